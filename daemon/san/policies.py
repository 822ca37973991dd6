"""The SAN's policies as one bundle of plain callables, handed to the SanAgent by
:func:`cellbed.assembly.build_san`; the SAN's mechanism calls a policy only through this bundle.

The stages (overload, task selection, the re-score and target order of step 4, the target's fit)
are the policy book's guarded policies (DESIGN §17): built-ins with their constants from a
SanConfig, or plugins. The spike test and the migration-cost model are not stages.
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
from cellbed.policy.masb.choose import Acceptor
from cellbed.policy.masb.scs import Selection
from cellbed.policy.migration.cost import MigrationCost, PrecopyParams, precopy
from cellbed.runtime.plugins.book import PolicyBook

OverloadFn = Callable[[overload.HostLoad], overload.Verdict]
"""Step 1: is the host overloaded (capacity, max_util, the RUS rule)? Every verdict carries its reasons."""
SpikeFn = Callable[[np.ndarray | None, np.ndarray], str]
"""Step 1: '' or the resources whose use (percent of capacity) rose by a spike since the last sample."""
MigrationCostFn = Callable[[float, float, float], MigrationCost]
"""SCS input: the predicted cost of moving a guest of (mem MiB, WSS MiB, dirty MiB/s)."""
ScsFn = Callable[..., Selection]
"""Step 1, Service Candidate Selection (stage ``task_selection``):
``scs(capacity, used, tasks, prod_requested, rng)`` → the tasks to move."""
OrderFn = Callable[[Sequence[Acceptor], Sequence[float], random.Random], list[tuple[Acceptor, float]]]
"""Step 4: ``order(acceptors, task_used, rng)`` → (acceptor, score) in the order step 5 tries them."""
AcceptFn = Callable[..., accept.Answer]
"""Steps 3 and 5 on the target (stage ``fit``): ``accept(target_state, task_demand, forced)`` → the answer."""


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


def scored_order(score: Callable, order: Callable) -> OrderFn:
    """SAN step 4 from two stages: re-score the acceptors on their fresh usage (stage ``score``,
    slot ``realloc_score``), then order them (stage ``target_order``). A forced acceptor's score is
    reported as 0 (it is tried last, for its capacity only)."""
    def order_targets(acceptors: Sequence[Acceptor], task_used: Sequence[float], rng: random.Random
                      ) -> list[tuple[Acceptor, float]]:
        if not acceptors:
            return []
        sc = np.zeros(len(acceptors))
        if not all(a.forced for a in acceptors):
            used = np.array([a.used for a in acceptors], dtype=float)
            cap = np.array([a.capacity for a in acceptors], dtype=float)
            sc = np.nan_to_num(np.asarray(score(used, cap, np.asarray(task_used, dtype=float)),
                                          dtype=float).reshape(-1))
        return [(acceptors[i], 0.0 if acceptors[i].forced else max(float(sc[i]), 0.0))
                for i in order(acceptors, sc, rng)]
    return order_targets


def san_policies(cfg: SanConfig, book: PolicyBook) -> SanPolicies:
    """The SAN's stages from the policy book: the built-ins *cfg* names, with its parameters,
    unless the book holds a choice for the slot (DESIGN §17)."""
    cfg = cfg.validate()
    fit = book.get("fit", cfg.fit, {"max_util": cfg.max_util, "rho": cfg.gpa_rho, "min_samples": cfg.gpa_min_samples})
    return SanPolicies(
        overload=book.get("overload", defaults={"max_util": cfg.max_util}),
        spike=functools.partial(overload.spike, threshold_pct=cfg.rus_threshold_pct),
        migration_cost=functools.partial(precopy, p=PrecopyParams(bandwidth_mib_s=cfg.cost_bandwidth_mib_s)),
        scs=book.get("task_selection", defaults={"restarts": cfg.tabu_restarts, "steps": cfg.tabu_steps,
                                                 "patience": cfg.tabu_patience, "max_util": cfg.max_util,
                                                 "score": cfg.scs_score}),
        order_targets=scored_order(book.get("realloc_score", cfg.realloc_score), book.get("target_order")),
        accept=fit,
        cpu_stats=fit.needs_input("cpu_stats"))


__all__ = ["AcceptFn", "MigrationCostFn", "OrderFn", "OverloadFn", "SanPolicies", "ScsFn", "SpikeFn",
           "san_policies", "scored_order"]
