"""Seeded workloads for Megha model cells: node attributes and a task arrival process.

[RECON] Megha's experiments replay Google/Alibaba/Cloudera samples that are not public in the
form used; this generator keeps what matters for allocation time: Poisson job arrivals,
jobs of 1..N tasks arriving together (bursts), heavy-tailed durations, requests on a small
grid, and GCD-style binary constraints (digest §E.9: ~50% of jobs constrained,
k = 1 + Geometric(p) attributes, EQUAL 1 with the attribute's prevalence, else NOT_EQUAL 1).
Node attributes use the GCD generator's 21 prevalences; each LM's cluster scales them by
its own factor in [0.7, 1.3], so clusters differ as in the paper's clusters A, B, C.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from cellbed.domain import wire
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.workload.generator import DEFAULT_ATTRIBUTE_PROBS, attribute_name
from cellbed.domain.errors import check_range
from cellbed.domain.errors import InvalidArgument

COMMON_ATTRS = 18          # the first 18 of the 21 are common; the last three are rare (< 1%)


def node_attributes(n: int, rng: np.random.Generator, probs=DEFAULT_ATTRIBUTE_PROBS,
                    cluster_factor: float = 1.0) -> list[dict]:
    """Attributes of *n* nodes: attribute j present (value 1) with probability probs[j]·factor."""
    p = np.clip(np.asarray(probs) * cluster_factor, 0.0, 1.0)
    has = rng.random((n, p.size)) < p
    return [{attribute_name(j): 1 for j in np.flatnonzero(row)} for row in has]


@dataclasses.dataclass(frozen=True)
class ArrivalConfig:
    seed: int = 0
    duration_s: float = 60.0                      # arrivals in [0, duration_s), s
    job_rate_per_s: float = 20.0                  # Poisson job arrivals, jobs/s
    tasks_per_job: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    tasks_per_job_weights: tuple[float, ...] = (0.55, 0.15, 0.12, 0.09, 0.06, 0.03)
    task_min_s: float = 2.0                       # task durations: log-uniform in [min, max], s
    task_max_s: float = 120.0
    cpu_cores: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)
    cpu_weights: tuple[float, ...] = (0.35, 0.35, 0.2, 0.1)
    mem_mib: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
    mem_weights: tuple[float, ...] = (0.25, 0.3, 0.25, 0.15, 0.05)
    constrained_job_frac: float = 0.5
    extra_constraint_geom_p: float = 0.6
    max_constraints: int = 4
    users: tuple[str, ...] = ("u1",)
    user_weights: tuple[float, ...] = ()          # empty: jobs go to users round-robin

    def validate(self) -> "ArrivalConfig":
        check_range("duration_s", self.duration_s, 0.0, 1e7, "s")
        check_range("job_rate_per_s", self.job_rate_per_s, 1e-6, 1e6, "jobs/s")
        check_range("task_min_s", self.task_min_s, 0.0, self.task_max_s, "s")
        for name, vals, w in (("tasks_per_job", self.tasks_per_job, self.tasks_per_job_weights),
                              ("cpu_cores", self.cpu_cores, self.cpu_weights),
                              ("mem_mib", self.mem_mib, self.mem_weights)):
            if len(vals) != len(w) or not vals:
                raise InvalidArgument(f"{name} and its weights must have the same, non-zero length")
        return self


@dataclasses.dataclass(frozen=True)
class Arrival:
    time_s: float
    task: meghapb.MeghaTask
    job: int


def _constraints(rng: np.random.Generator, cfg: ArrivalConfig, probs) -> tuple[Constraint, ...]:
    if rng.random() >= cfg.constrained_job_frac:
        return ()
    k = min(cfg.max_constraints, int(rng.geometric(cfg.extra_constraint_geom_p)))
    attrs = sorted(rng.choice(COMMON_ATTRS, size=k, replace=False).tolist())
    return tuple(Constraint(attribute_name(j), ConstraintOp.EQUAL if rng.random() < probs[j] else ConstraintOp.NOT_EQUAL, 1)
                 for j in attrs)


def arrivals(cfg: ArrivalConfig, probs=DEFAULT_ATTRIBUTE_PROBS, prefix: str = "t") -> list[Arrival]:
    """Every task arrival in time order; task names are <prefix><n>, users round-robin by job."""
    cfg = cfg.validate()
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 4]))
    out: list[Arrival] = []
    t = 0.0
    job = 0
    n = 0
    w_tpj = np.asarray(cfg.tasks_per_job_weights, dtype=float)
    w_cpu = np.asarray(cfg.cpu_weights, dtype=float)
    w_mem = np.asarray(cfg.mem_weights, dtype=float)
    w_user = np.asarray(cfg.user_weights, dtype=float) if cfg.user_weights else None
    lo, hi = math.log(max(cfg.task_min_s, 1e-3)), math.log(cfg.task_max_s)
    while True:
        t += float(rng.exponential(1.0 / cfg.job_rate_per_s))
        if t >= cfg.duration_s:
            return out
        size = int(cfg.tasks_per_job[rng.choice(len(w_tpj), p=w_tpj / w_tpj.sum())])
        cpu = float(cfg.cpu_cores[rng.choice(len(w_cpu), p=w_cpu / w_cpu.sum())])
        mem = int(cfg.mem_mib[rng.choice(len(w_mem), p=w_mem / w_mem.sum())])
        cons = wire.constraints_pb(_constraints(rng, cfg, probs))
        user = (cfg.users[job % len(cfg.users)] if w_user is None
                else cfg.users[int(rng.choice(len(w_user), p=w_user / w_user.sum()))])
        for _ in range(size):
            n += 1
            dur = math.exp(rng.uniform(lo, hi))
            task = meghapb.MeghaTask(name=f"{prefix}{n}", user=user, request=wire.resources(cpu, mem),
                                 constraints=cons, duration_s=round(dur, 3), workload=npb.Workload(cpu_load=0.0))
            out.append(Arrival(t, task, job))
        job += 1


def offered_load(arr: list[Arrival], cap_cpu: float, span_s: float) -> float:
    """Mean CPU demand over *span_s* as a fraction of *cap_cpu* (Σ cores·duration / cap / span)."""
    return sum(a.task.request.cpu_cores * a.task.duration_s for a in arr) / (cap_cpu * span_s) if span_s > 0 else 0.0
