"""The SAN's policies as one bundle of plain callables, handed to the SanAgent by
:func:`cellbed.assembly.build_san`; the SAN's mechanism calls a policy only through this bundle.

Each field is a pure function of its explicit inputs (cellbed.policy.masb, cellbed.policy.scores,
cellbed.policy.migration), with its constants bound by :func:`san_policies` from a SanConfig.
A policy that draws random numbers takes the SAN's one generator as an argument, so the draws
stay in the SAN's order (the golden runs check it).
"""
from __future__ import annotations

import dataclasses
import functools
import random
from typing import Callable, Sequence

import numpy as np

from cellbed.daemon.san.config import SanConfig
from cellbed.policy.masb import accept, overload
from cellbed.policy.masb.choose import Acceptor, order_targets
from cellbed.policy.masb.scs import Selection, TabuParams, tabu_select
from cellbed.policy.migration.cost import MigrationCost, PrecopyParams, precopy
from cellbed.policy.scores.gpa import GpaParams

OverloadFn = Callable[[overload.HostLoad], overload.Verdict]
"""Step 1: is the host overloaded (capacity, max_util, the RUS rule)? Every verdict carries its reasons."""
SpikeFn = Callable[[np.ndarray | None, np.ndarray], str]
"""Step 1: '' or the resources whose use (percent of capacity) rose by a spike since the last sample."""
MigrationCostFn = Callable[[float, float, float], MigrationCost]
"""SCS input: the predicted cost of moving a guest of (mem MiB, WSS MiB, dirty MiB/s)."""
ScsFn = Callable[..., Selection]
"""Step 1, Service Candidate Selection: ``scs(capacity, used, tasks, rng, *, prod_requested)``
→ the tasks to move (``tasks``: :class:`~cellbed.policy.masb.scs.Candidate`)."""
OrderFn = Callable[[Sequence[Acceptor], Sequence[float], random.Random], list[tuple[Acceptor, float]]]
"""Step 4: ``order(acceptors, task_used, rng)`` → (acceptor, score) in the order step 5 tries them."""
AcceptFn = Callable[..., accept.Answer]
"""Steps 3 and 5 on the target: ``accept(target_state, task_demand, *, forced)`` → the answer."""


@dataclasses.dataclass(frozen=True)
class SanPolicies:
    overload: OverloadFn
    spike: SpikeFn
    migration_cost: MigrationCostFn
    scs: ScsFn
    order_targets: OrderFn
    accept: AcceptFn
    cpu_stats: bool = False
    """The accept rule reads each task's sampled CPU mean and variance (GPA): the SAN keeps them
    at every sample, and a host with them cannot skip a quiet sample."""


def san_policies(cfg: SanConfig) -> SanPolicies:
    """The bundle SanConfig names (the paper's policies by default)."""
    cfg = cfg.validate()
    tabu = TabuParams(restarts=cfg.tabu_restarts, steps=cfg.tabu_steps, patience=cfg.tabu_patience,
                      max_util=cfg.max_util, score=cfg.scs_score)
    gpa = GpaParams(rho=cfg.gpa_rho, min_samples=cfg.gpa_min_samples, max_util=cfg.max_util)
    return SanPolicies(
        overload=functools.partial(overload.check, max_util=cfg.max_util),
        spike=functools.partial(overload.spike, threshold_pct=cfg.rus_threshold_pct),
        migration_cost=functools.partial(precopy, p=PrecopyParams(bandwidth_mib_s=cfg.cost_bandwidth_mib_s)),
        scs=functools.partial(tabu_select, params=tabu),
        order_targets=functools.partial(order_targets, score=cfg.realloc_score),
        accept=functools.partial(accept.evaluate, max_util=cfg.max_util, fit=cfg.fit, gpa=gpa),
        cpu_stats=cfg.fit == "gpa")


__all__ = ["AcceptFn", "MigrationCostFn", "OrderFn", "OverloadFn", "SanPolicies", "ScsFn", "SpikeFn",
           "san_policies"]
