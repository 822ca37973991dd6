"""Hypothesis strategies for every stage's inputs: the kinds of inputs the agents really pass
(finite, non-negative resources, capacities > 0, sizes a cell produces), so that a violation
found on them is one an agent could meet. Used by :mod:`.kit` (``cellctl policy check``)."""
from __future__ import annotations

import random

import numpy as np
from hypothesis import strategies as st

from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.policy import api

CPU = st.floats(0.05, 64.0, allow_nan=False, allow_infinity=False)
MEM = st.floats(64.0, 262_144.0, allow_nan=False, allow_infinity=False)
SHARE = st.floats(0.0, 1.5, allow_nan=False, allow_infinity=False)
UNIT = st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False)
SEEDS = st.integers(0, 2**32 - 1)
ATTRS = st.dictionaries(st.sampled_from(["arch", "zone", "gen"]), st.one_of(st.integers(0, 3), st.sampled_from(["a", "b"])),
                        max_size=3)
CONSTRAINTS = st.lists(st.builds(Constraint, st.sampled_from(["arch", "zone", "gen"]), st.sampled_from(list(ConstraintOp)),
                                 st.one_of(st.integers(0, 3), st.sampled_from(["a", "b"]))), max_size=2).map(tuple)


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=float)
    a.setflags(write=False)
    return a


@st.composite
def vec(draw, cap: tuple[float, float] | None = None, share=SHARE) -> tuple[float, float]:
    if cap is None:
        return (draw(CPU), draw(MEM))
    return (draw(share) * cap[0], draw(share) * cap[1])


@st.composite
def table(draw, n_min: int = 1, n_max: int = 24):
    """(load, capacity) of n hosts, both (n, 2) read-only."""
    n = draw(st.integers(n_min, n_max))
    cap = np.array([[draw(CPU), draw(MEM)] for _ in range(n)])
    load = cap * np.array([[draw(SHARE), draw(SHARE)] for _ in range(n)])
    return _ro(load), _ro(cap)


@st.composite
def task_vec(draw, cap_hint: float = 8.0):
    return _ro(np.array([draw(st.floats(0.0, cap_hint)), draw(st.floats(0.0, 16_384.0))]))


@st.composite
def overload(draw):
    cap = draw(vec())
    return (api.HostLoad(cap, draw(vec(cap)), draw(vec(cap))),)


@st.composite
def task_selection(draw):
    cap = draw(vec())
    tasks = draw(st.lists(st.builds(
        lambda i, u, c, comp, prod: api.Candidate(f"t{i}", u, c, comp, prod),
        st.integers(0, 10**6), vec(cap, st.floats(0.0, 0.5)), st.floats(0.01, 100.0), st.booleans(),
        vec(cap, st.floats(0.0, 0.3))), max_size=12, unique_by=lambda c: c.name))
    used = (sum(t.used[0] for t in tasks), sum(t.used[1] for t in tasks))
    prod = (sum(t.prod_req[0] for t in tasks), sum(t.prod_req[1] for t in tasks))
    return cap, used, tasks, prod, random.Random(draw(SEEDS))


@st.composite
def score(draw):
    load, cap = draw(table())
    return load, cap, draw(task_vec())


@st.composite
def candidates(draw):
    load, cap = draw(table())
    sc = _ro(np.array([draw(UNIT) for _ in range(len(cap))]))
    return sc, cap, load, draw(task_vec()), np.random.default_rng(draw(SEEDS))


@st.composite
def forced(draw):
    _, cap = draw(table())
    return cap, draw(task_vec()), np.random.default_rng(draw(SEEDS))


@st.composite
def _stats(draw):
    return draw(st.floats(0.0, 8.0)), draw(st.floats(0.0, 4.0)), draw(st.floats(0.0, 500.0))


@st.composite
def fit(draw):
    cap = draw(vec())
    m, v, n = draw(_stats())
    t = api.TargetState(draw(st.sampled_from(["h1", "h2"])), cap, draw(vec(cap)), draw(vec(cap, st.floats(0, 0.3))),
                        draw(vec(cap)), draw(ATTRS), m, v, n)
    tm, tv, tn = draw(_stats())
    task = api.TaskDemand(f"t{draw(st.integers(0, 99))}", draw(vec(cap, st.floats(0, 0.6))),
                          draw(vec(cap, st.floats(0, 0.6))), draw(st.booleans()), draw(CONSTRAINTS), tm, tv, tn)
    return t, task, draw(st.booleans())


@st.composite
def target_order(draw):
    k = draw(st.integers(1, 8))
    acc = []
    for i in range(k):
        cap = draw(vec())
        acc.append(api.Acceptor(f"h{i}", cap, draw(vec(cap)), draw(st.booleans())))
    sc = _ro(np.array([draw(UNIT) for _ in range(k)]))
    return acc, sc, random.Random(draw(SEEDS))


@st.composite
def admission(draw):
    cap = draw(vec())
    node = api.NodeUse("h1", cap, draw(vec(cap)), draw(vec(cap)), draw(vec(cap)), draw(ATTRS))
    vm = api.VmDemand(f"v{draw(st.integers(0, 99))}", draw(vec(cap, st.floats(0, 0.6))), draw(st.booleans()),
                      draw(CONSTRAINTS))
    return node, vm, draw(st.booleans())


@st.composite
def allocation(draw):
    load, cap = draw(table())
    free = _ro(np.maximum(cap - load, 0.0))
    demand = draw(task_vec())
    fits = np.all(free >= demand, axis=1)
    offered = np.array([bool(f) and draw(st.booleans()) for f in fits])
    offered.setflags(write=False)
    return api.Hosts(offered, free, cap), demand, random.Random(draw(SEEDS))


@st.composite
def validation(draw):
    cap = draw(vec())
    return "h1", draw(vec(cap, UNIT)), cap, draw(vec(cap, st.floats(0, 0.8)))


@st.composite
def task_order(draw):
    cap = draw(vec())
    t = api.QueuedTask(f"t{draw(st.integers(0, 999))}", draw(st.sampled_from(["u1", "u2"])), draw(st.integers(0, 10**6)),
                       draw(st.floats(0.0, 1e6)), draw(st.floats(0.0, 1e5)), draw(vec(cap, UNIT)),
                       draw(st.integers(0, 11)), draw(st.booleans()), draw(st.integers(0, 20)))
    return t, random.Random(draw(SEEDS))


@st.composite
def preemption(draw):
    users = draw(st.lists(st.sampled_from(["u1", "u2", "u3", "u4", "u5"]), min_size=1, max_size=5, unique=True))
    shares = {u: draw(UNIT) for u in users}
    consumed = {u: draw(UNIT) for u in users}
    return draw(st.sampled_from(users)), shares, consumed


@st.composite
def probe(draw):
    return draw(st.integers(1, 200)), draw(st.integers(1, 10)), np.random.default_rng(draw(SEEDS))


STRATEGIES = {"overload": overload, "task_selection": task_selection, "score": score, "candidates": candidates,
              "forced": forced, "fit": fit, "target_order": target_order, "admission": admission,
              "allocation": allocation, "validation": validation, "task_order": task_order,
              "preemption": preemption, "probe": probe}
