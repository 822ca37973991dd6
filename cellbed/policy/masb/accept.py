"""A target's answers in the SAN (DESIGN §7).

Step 3 (TaskMigrationRequest): the projected load is the current use (tasks migrating out
still count), plus every task migrating in, plus the requested task; accept iff the
projection stays within max_util of capacity, production requests keep the RUS rule, and
the constraints match. The CPU test may be the GPA percentile test (seed 003) instead of the
sum. Step 5 (final check): the same, except that a forced migration is checked against total
capacity only. Constraints are always checked.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from cellbed.policy.scores.fit import Demand
from cellbed.policy.scores.gpa import GpaParams, gpa_projection
from cellbed.domain.constraints import AttrValue, Constraint

CAPACITY, CONSTRAINTS, RUS, OVERLOADED, SAME_HOST, NO_ANSWER, GPA = (
    "capacity", "constraints", "rus", "overloaded", "same_host", "no_answer", "gpa")


@dataclasses.dataclass(frozen=True)
class TargetState:
    host: str
    capacity: tuple[float, float]
    used: tuple[float, float]              # incl. migrating out
    incoming_used: tuple[float, float]     # tasks migrating in
    prod_requested: tuple[float, float]
    attributes: Mapping[str, AttrValue]
    cpu_mean: float = 0.0                  # GPA statistics of the host's tasks (cores)
    cpu_var: float = 0.0
    cpu_samples: float = 0.0


@dataclasses.dataclass(frozen=True)
class TaskDemand:
    name: str
    used: tuple[float, float]
    requested: tuple[float, float]
    production: bool
    constraints: tuple[Constraint, ...]
    cpu_mean: float = 0.0
    cpu_var: float = 0.0
    cpu_samples: float = 0.0


@dataclasses.dataclass(frozen=True)
class Answer:
    accepted: bool
    reason: str = ""
    detail: str = ""
    projected: tuple[float, float] = (0.0, 0.0)
    limit: tuple[float, float] = (0.0, 0.0)


def _constraint_answer(t: TargetState, task: TaskDemand) -> Answer | None:
    bad = [c for c in task.constraints if not c.matches(t.attributes)]
    if bad:
        return Answer(False, CONSTRAINTS, f"{t.host}: " + ", ".join(
            f"{c.attribute} {c.op.name} {c.value!r} (host has {t.attributes.get(c.attribute)!r})" for c in bad))
    return None


def evaluate(t: TargetState, task: TaskDemand, max_util: float = 0.9, fit: str = "sum",
             gpa: GpaParams | None = None, forced: bool = False) -> Answer:
    if (a := _constraint_answer(t, task)) is not None:
        return a
    cap = np.asarray(t.capacity, dtype=float)
    if forced:   # total capacity only
        req = np.maximum(np.asarray(task.used), np.asarray(task.requested))
        if np.any(req > cap):
            return Answer(False, CAPACITY, f"{t.host}: task {task.name} needs {req[0]:.3f} cores / {req[1]:.0f} MiB "
                          f"> total capacity {cap[0]:.3f} / {cap[1]:.0f}", tuple(req), tuple(cap))
        return Answer(True, projected=tuple(req), limit=tuple(cap))
    node_used = np.asarray(t.used) + np.asarray(t.incoming_used)
    limit = cap * max_util
    if fit == "gpa":
        q = gpa or GpaParams(max_util=max_util)
        node = Demand(node_used, t.cpu_mean, t.cpu_var, t.cpu_samples)
        proj = gpa_projection(node, Demand(np.asarray(task.used), task.cpu_mean, task.cpu_var, task.cpu_samples), q)
        reason = GPA
    else:
        proj = node_used + np.asarray(task.used)
        reason = CAPACITY
    if np.any(proj > limit):
        r = "cpu" if proj[0] > limit[0] else "mem"
        return Answer(False, reason, f"{t.host}: projected {r} {proj[0 if r == 'cpu' else 1]:.3f} > "
                      f"{max_util:g} × {cap[0 if r == 'cpu' else 1]:.3f} (used {node_used[0]:.3f} cores / "
                      f"{node_used[1]:.0f} MiB incl. incoming, task {task.used[0]:.3f} / {task.used[1]:.0f})",
                      tuple(proj), tuple(limit))
    if task.production:
        prod = np.asarray(t.prod_requested) + np.asarray(task.requested)
        if np.any(prod > limit):
            return Answer(False, RUS, f"{t.host}: production requests {prod[0]:.3f} cores / {prod[1]:.0f} MiB > "
                          f"{max_util:g} × capacity", tuple(prod), tuple(limit))
    return Answer(True, projected=tuple(proj), limit=tuple(limit))
