"""The reference architecture's job metrics (seed 002 §V-A), from a run's tasks.csv and
allocations.csv, for a workload of jobs whose tasks run for their duration from their start:

* TRT, task response time: submission → completion (start + duration);
* JMS, job makespan: the job's first task submission → its last task completion;
* NJSL, normalized job schedule length: JMS / the job's critical path, which for a bag of tasks
  (no dependencies between them) is its longest task;
* JWT, job waiting time: the job's first task submission → the first start of any of its tasks.

A job counts once all its tasks started; the others are counted as unfinished. Pure.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

NAMES = ("jobs", "jobs_unfinished", "tasks", "trt_mean_s", "trt_p50_s", "trt_p95_s", "jms_mean_s", "njsl_mean",
         "jwt_mean_s")


def job_metrics(tasks: Mapping[str, Sequence], starts: Mapping[str, float]) -> dict[str, float]:
    """*tasks*: columns task, job, arrival_s, duration_s; *starts*: each started task's start_s."""
    names, jobs = list(tasks["task"]), np.asarray(tasks["job"], dtype=np.int64)
    arrival = np.asarray(tasks["arrival_s"], dtype=float)
    dur = np.asarray(tasks["duration_s"], dtype=float)
    start = np.array([starts.get(n, math.nan) for n in names], dtype=float)
    done = ~np.isnan(start)
    trt = (start + dur - arrival)[done]
    jms, njsl, jwt = [], [], []
    unfinished = 0
    order = np.argsort(jobs, kind="stable")
    bounds = np.flatnonzero(np.diff(jobs[order])) + 1
    for idx in np.split(order, bounds) if len(order) else []:
        if not done[idx].all():
            unfinished += 1
            continue
        first = arrival[idx].min()
        makespan = (start[idx] + dur[idx]).max() - first
        jms.append(makespan)
        longest = dur[idx].max()
        njsl.append(makespan / longest if longest > 0 else math.nan)
        jwt.append(start[idx].min() - first)
    mean = (lambda xs: float(np.mean(xs)) if len(xs) else math.nan)  # noqa: E731
    pct = (lambda q: float(np.percentile(trt, q)) if trt.size else math.nan)  # noqa: E731
    return {"jobs": float(len(jms)), "jobs_unfinished": float(unfinished), "tasks": float(done.sum()),
            "trt_mean_s": mean(trt), "trt_p50_s": pct(50), "trt_p95_s": pct(95), "jms_mean_s": mean(jms),
            "njsl_mean": mean(njsl), "jwt_mean_s": mean(jwt)}
