"""A central scheduler's choice of host over its view of the cell (R4 then R5), shared by the
best-fit front-end of the model cell, the real-cell runner and its twin, so that one allocation
rule has one implementation (the ``allocation`` stage's policy; ``best_fit`` by default,
cellbed/policy/builtin/megha.py).

R4, the filter, is the scheduler's view: a host is offered when the task's constraints match and
its load (requests, or measured use: what the cell admits on) plus the task fits the capacity,
and, on a real cell, it has a boot slot left. R5 is the policy's choice among the offered hosts.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from cellbed.policy.api import Hosts


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    matches: bool                      # constraints (R3) and any other static filter of the caller
    capacity: tuple[float, float]      # cores, MiB
    load: tuple[float, float]          # requests or use, plus what the scheduler booked and has not seen yet


def choose(allocate: Callable, rows: Sequence[Row], demand: tuple[float, float], rng) -> str | None:
    """The host the *allocate* policy picks among the offered *rows*, or None."""
    n = len(rows)
    if not n:
        return None
    free = np.empty((n, 2))
    cap = np.empty((n, 2))
    offered = np.zeros(n, dtype=bool)
    dc, dm = demand
    for i, r in enumerate(rows):
        cap_c, cap_m = r.capacity
        lc, lm = r.load
        cap[i] = cap_c, cap_m
        free[i] = cap_c - lc, cap_m - lm
        offered[i] = r.matches and not (lc + dc > cap_c or lm + dm > cap_m)
    i = allocate(Hosts(offered, free, cap), np.array([dc, dm], dtype=float), rng)
    return rows[i].name if i >= 0 else None
