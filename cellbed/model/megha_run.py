"""How a Megha-front-end model cell is driven: by a list of arrivals (the Megha paper's
experiments, :func:`run_arrivals`; as a scenario run, :func:`run_jobs`) or by the scenario's
GCD-shaped event stream (``cellctl run``, :func:`run_stream`)."""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Callable
import math
import time
from collections import Counter

import numpy as np

from cellbed.controller.megha.alloc import pending, summarize
from cellbed.controller.megha.workload import Arrival, ArrivalConfig, arrivals
from cellbed.domain import errors, wire
from cellbed.domain.constraints import constraints_match
from cellbed.metrics.rows import AllocationRow
from cellbed.model.megha_actions import StreamActions
from cellbed.model.megha_stream import read_stream
from cellbed.model.params import ModelCellParams, Summary


@dataclasses.dataclass
class ModelRunResult:
    config: ModelCellParams
    records: list[AllocationRow]
    counters: dict
    lm_counters: dict
    virtual_s: float
    wall_s: float
    usage_samples: list[tuple[float, dict[str, float]]]
    messages: int

    @property
    def summary(self) -> dict:
        return summarize(self.records)


async def _sample_usage(front, t0: float, period: float, samples: list) -> None:
    while True:
        samples.append((front.clock.monotonic() - t0, front.true_usage()))
        await front.clock.sleep(period)


async def _wait(front, bg: set, drain_s: float, stop_at_s: float | None, t0: float) -> None:
    """After the last arrival: with *stop_at_s*, until then (a stream's run lasts its duration,
    whenever its last task arrives); without, until everything has started or *drain_s* has
    passed."""
    clock = front.clock
    end = (t0 + stop_at_s) if stop_at_s is not None else None
    deadline = clock.monotonic() + drain_s
    while True:
        now = clock.monotonic()
        if end is not None and now >= end:
            break
        if end is None and (not front.submitter.unstarted() and not bg or now >= deadline):
            break
        await clock.sleep(min(1.0, max(1e-3, (end or deadline) - now)))


def _records(front, recs: list, submitting: dict, refused: list, epoch: float) -> list[AllocationRow]:
    """Every arrival once: placed, or pending (not started, or still being submitted), or rejected."""
    fe = front.p.frontend
    seen = {r.task for r in recs}
    out = list(recs)
    for name, user, arrival, attempts in front.submitter.unstarted():
        if name not in seen:
            seen.add(name)
            out.append(pending(name, user, fe, arrival, attempts))
    # a run stopped while a submission was on its way: the front-end does not list the task
    # yet, but it arrived, so it is pending too; a refused submission is "rejected"
    for a in list(submitting.values()):
        if a.task.name not in seen:
            seen.add(a.task.name)
            out.append(pending(a.task.name, a.task.user, fe, epoch + a.time_s, 0))
    for a in refused:
        if a.task.name not in seen:
            seen.add(a.task.name)
            out.append(pending(a.task.name, a.task.user, fe, epoch + a.time_s, 0, outcome="rejected"))
    return out


async def run_arrivals(front, arr: list[Arrival], drain_s: float = 300.0, sample_period_s: float = 0.0,
                       stop_at_s: float | None = None) -> ModelRunResult:
    """Submit every arrival at its time; then wait (virtual time) until every task has started
    or *drain_s* has passed (or until *stop_at_s*). *sample_period_s* > 0 samples each user's
    true share."""
    clock = front.clock
    wall0 = time.perf_counter()
    recs: list[AllocationRow] = []
    front.submitter.on_record(recs.append)
    t0 = clock.monotonic()
    epoch = clock.now()
    samples: list[tuple[float, dict[str, float]]] = []
    bg: set[asyncio.Task] = set()
    rejected: Counter = Counter()
    sampler = asyncio.create_task(_sample_usage(front, t0, sample_period_s, samples)) if sample_period_s > 0 else None
    submitting: dict[str, Arrival] = {}      # arrivals whose submission has not returned yet
    refused: list[Arrival] = []

    async def one(a: Arrival):
        try:
            await front.submitter.submit(a.task)
        except errors.CellbedError as e:
            rejected[type(e).__name__] += 1
            refused.append(a)
        finally:
            submitting.pop(a.task.name, None)
    for a in arr:
        dt = t0 + a.time_s - clock.monotonic()
        if dt > 0:
            await clock.sleep(dt)
        submitting[a.task.name] = a
        t = asyncio.create_task(one(a))
        bg.add(t)
        t.add_done_callback(bg.discard)
    await _wait(front, bg, drain_s, stop_at_s, t0)
    if sampler is not None:
        sampler.cancel()
    out = _records(front, recs, submitting, refused, epoch)
    lm_counters: Counter = Counter()
    for a in front.lms.values():
        lm_counters.update(a.counters)
    counters = dict(front.submitter.counters())
    counters.update({f"submit_rejected_{k}": v for k, v in rejected.items()})
    records = [dataclasses.replace(r, arrival_s=r.arrival_s - epoch, start_s=r.start_s - epoch) for r in out]
    return ModelRunResult(front.p, records, counters, dict(lm_counters), clock.monotonic() - t0,
                          time.perf_counter() - wall0, samples, front.cell.net.stats.requests)


# --- the scenario's GCD-shaped stream ----------------------------------------------------------------

async def prefill(front, warm: list) -> int:
    """Place the warm-start tasks directly (best effort, most free CPU first), not through the
    front-end; returns how many fit nowhere (dropped)."""
    hosts = front.host_list
    free = np.array([h.agent.view().capacity for h in hosts], dtype=float)
    attrs = [front.attributes[h.name] for h in hosts]
    lm_of = {h: lm for lm, hs in front.lm_hosts.items() for h in hs}
    by_host = {wk.host: wk for wk in front.workers}
    dropped = 0
    starts = []
    for _, task in warm:
        need = np.array([task.request.cpu_cores, task.request.mem_mib])
        ok = (free >= need).all(axis=1)
        cons = wire.constraints_from_pb(task.constraints) if task.constraints else ()
        if cons:
            ok &= np.fromiter((constraints_match(cons, a) for a in attrs), dtype=bool, count=len(attrs))
        if not ok.any():
            dropped += 1
            continue
        i = int(np.argmax(np.where(ok, free[:, 0] / free[:, 0].max(), -1)))
        free[i] -= need
        h = hosts[i].name
        starts.append(by_host[h].place_direct(task) if front.workers else front.lms[lm_of[h]].place_direct(task, h))
    for k in range(0, len(starts), 2000):
        for r in await asyncio.gather(*starts[k:k + 2000], return_exceptions=True):
            if isinstance(r, errors.FailedPrecondition):
                dropped += 1
            elif isinstance(r, BaseException):
                raise r
    return dropped


def _row(r: AllocationRow, epoch: float) -> AllocationRow:
    return AllocationRow(task=r.task, user=r.user, frontend=r.frontend, arrival_s=r.arrival_s - epoch,
                         start_s=r.start_s - epoch, host=r.host, framework_queue_ms=r.framework_queue_ms,
                         processing_ms=r.processing_ms, worker_queue_ms=r.worker_queue_ms,
                         communication_ms=r.communication_ms, total_ms=r.total_ms, attempts=r.attempts,
                         outcome="placed")


def _unplaced(res: ModelRunResult) -> list[AllocationRow]:
    placed = {r.task for r in res.records if r.outcome == "placed"}
    return [AllocationRow(task=r.task, user=r.user, frontend=r.frontend, arrival_s=max(0.0, r.arrival_s),
                          start_s=math.nan, host="", framework_queue_ms=math.nan, processing_ms=math.nan,
                          worker_queue_ms=math.nan, communication_ms=math.nan, total_ms=math.nan,
                          attempts=r.attempts, outcome="pending" if r.outcome == "pending" else "rejected")
            for r in res.records if r.outcome != "placed" and r.task not in placed]


@dataclasses.dataclass(frozen=True)
class JobsWorkload:
    """The Megha paper's own workload for :func:`run_jobs`: Poisson jobs (*arrivals*; its users
    are replaced by the front-end's queues) on the warm cell that ``MeghaParams.background_fill``
    builds, then up to *drain_s* for the last tasks to start."""

    arrivals: ArrivalConfig
    drain_s: float
    on_tasks: Callable | None = None         # sees every (task, job, arrival, duration) before the run


async def run_stream(front, events) -> Summary:
    """The stream's warm-start tasks pre-placed, later arrivals through the front-end until
    duration_s, the stream's machine and task changes applied at their times
    (:mod:`cellbed.model.megha_actions`), a tick row every tick_s; the Summary's ``extra``
    holds the Megha counts."""
    p = front.p
    plan = read_stream(events, p.duration_s, front.users)
    warm, arr = plan.warm, plan.arrivals
    arrivals = [Arrival(t, task, i) for i, (t, task) in enumerate(arr)]
    await front.build(plan.machines)
    try:
        dropped = await prefill(front, warm)
    except BaseException:
        await front.close()
        raise
    return await _drive(front, arrivals, len(warm), dropped, plan.counts,
                        (lambda t0: StreamActions(front, plan, t0, p.duration_s)) if plan.actions else None,
                        drain_s=0.0, stop_at_s=p.duration_s)


async def run_jobs(front, jobs: JobsWorkload) -> Summary:
    """The Megha paper's experiment as a scenario run (``workload.source = "jobs"``): the warm
    homogeneous cell, the seeded Poisson jobs through the front-end, until every task has
    started or *jobs.drain_s* after the last arrival; a tick row every tick_s."""
    arr = arrivals(dataclasses.replace(jobs.arrivals, users=front.users), front.m.attribute_probs)
    if jobs.on_tasks is not None:
        jobs.on_tasks(arr)
    await front.build()
    warm = sum(len(b.tasks) for b in front.cell.fabric.backends.values())     # the background fill
    return await _drive(front, arr, warm, 0, Counter(), None, drain_s=jobs.drain_s, stop_at_s=None)


async def _drive(front, arrivals: list[Arrival], warm: int, dropped: int, counts: Counter, make_actions,
                 *, drain_s: float, stop_at_s: float | None) -> Summary:
    """Run *arrivals* through the built front-end with ticks (and the stream's actions), close
    it, write every arrival's allocation row and return the Summary."""
    cell, p = front.cell, front.p
    ticks: list = []
    actions = None
    try:
        epoch = cell.clock.now()

        def on_record(r) -> None:
            if r.outcome == "placed":
                cell.allocation(_row(r, epoch))

        def sample() -> None:
            k = len(ticks) + 1
            ticks.append(cell.tick(k * p.tick_s, len(front.submitter.unstarted())))

        async def ticker():
            while True:
                await cell.clock.sleep(p.tick_s)
                sample()

        front.submitter.on_record(on_record)
        tk = asyncio.ensure_future(ticker())
        if make_actions is not None:
            actions = make_actions(cell.clock.monotonic())
            act = asyncio.ensure_future(actions.run())
        res = await front.run_arrivals(arrivals, drain_s=drain_s, stop_at_s=stop_at_s)
        tk.cancel()
        await asyncio.gather(tk, return_exceptions=True)
        if actions is not None:
            act.cancel()
            await asyncio.gather(act, return_exceptions=True)
            await actions.cancel()
        if stop_at_s is not None:
            while (len(ticks) + 1) * p.tick_s <= stop_at_s + 1e-6:
                sample()        # the run stopped at duration_s, before the last tick's timer fired
        elif not ticks or ticks[-1].t_s < res.virtual_s - 1e-9:
            # everything started between two ticks: one last row at the end, so the run's end
            # state is in ticks.csv (and a run shorter than a tick has one)
            ticks.append(cell.tick(res.virtual_s, len(front.submitter.unstarted())))
        front.check_no_double_allocation()
    finally:
        await front.close()
    unplaced = _unplaced(res)
    for row in unplaced:
        cell.allocation(row)
    placed = {r.task for r in res.records if r.outcome == "placed"}
    stream = dict(sorted((counts + (actions.counters if actions is not None else Counter())).items()))
    extra = {"prefilled": warm - dropped, "prefill_dropped": dropped, "arrivals": len(arrivals),
             "placed": len(placed), "pending_rows": len(unplaced), "lm": dict(sorted(res.lm_counters.items())),
             "messages": res.messages, "stream": stream, "virtual_s": res.virtual_s}
    return Summary(ticks, warm + len(arrivals), 0, len(placed), len(unplaced), [], [],
                   dict(sorted(res.counters.items())), {}, dataclasses.asdict(cell.net.stats), [], extra=extra)
