"""Service Candidate Selection (SAN step 1, DESIGN §7).

First the compulsory tasks (their constraints no longer hold here). If the host is still
overloaded, Tabu Search over subsets S of the remaining tasks maximises::

    fitness(S) = score(host after removing S) / Σ_{t∈S} cost(t)       if the host is then
                                                                          within max_util
               = −(remaining excess, as a fraction of capacity)        otherwise

``score`` is the host allocation score (SRAS over used resources by default: a host left
near 90% scores highest, so the search moves as little as needed); ``cost`` is the
predicted migration cost (MiB sent, from the pre-copy model). The negative branch is our
reconstruction: the paper gives no fitness for subsets that leave the host overloaded, and
the search needs a slope towards feasibility.

Search (defaults from the paper): ``restarts`` starts × ``steps`` moves, each move the best
non-tabu neighbour (even if worse); the whole search stops after ``patience`` moves without
improving the best. The neighbourhood is every single and double flip: the paper reports
that a call examines 2–7% of the subsets (20 tasks: 25 × 5 × 210 ≈ 2.5% of 2²⁰), which a
single-flip neighbourhood (0.25%) cannot reach. The first start is the empty set, the
others random subsets of about the size the excess calls for. Neighbourhoods are scored in
one vectorised call. Above ``max_pairs`` double flips (n > 20), each step samples that many
pairs at random, so a call stays within a few milliseconds on hosts with many tasks.
"""
from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Callable, Sequence

import numpy as np

from cellbed.policy.scores import SCORES


@dataclasses.dataclass(frozen=True)
class Candidate:
    name: str
    used: tuple[float, float]      # cores, MiB
    cost: float                    # predicted migration cost (> 0)
    compulsory: bool = False
    prod_req: tuple[float, float] = (0.0, 0.0)   # requests, if a production task (RUS rule)


@dataclasses.dataclass(frozen=True)
class TabuParams:
    restarts: int = 25
    steps: int = 5
    patience: int = 6
    tenure: int = 0                # 0 = max(1, n // 4)
    max_pairs: int = 190           # double flips per step (all of them up to n = 20)
    max_util: float = 0.9
    score: str = "sras"


@dataclasses.dataclass(frozen=True)
class Selection:
    names: tuple[str, ...]
    compulsory: tuple[str, ...]
    fitness: float
    feasible: bool
    evaluations: int
    score_after: float
    cost: float


class _Problem:
    def __init__(self, capacity: Sequence[float], used: Sequence[float], tasks: Sequence[Candidate],
                 params: TabuParams, prod: Sequence[float] = (0.0, 0.0)) -> None:
        self.cap = np.asarray(capacity, dtype=float)
        self.used = np.asarray(used, dtype=float)
        self.prod = np.asarray(prod, dtype=float)
        self.U = np.array([t.used for t in tasks], dtype=float).reshape(-1, 2)
        self.P = np.array([t.prod_req for t in tasks], dtype=float).reshape(-1, 2)
        self.C = np.array([max(t.cost, 1e-9) for t in tasks], dtype=float)
        self.p = params
        self.score = SCORES[params.score]
        self.evaluations = 0

    def fitness_many(self, X: np.ndarray) -> np.ndarray:
        """X: (k, n) 0/1 rows → (k,) fitness."""
        self.evaluations += X.shape[0]
        removed = X @ self.U
        after = np.maximum(self.used - removed, 0.0)
        cost = X @ self.C
        limit = self.p.max_util * self.cap
        excess = np.maximum(after - limit, 0.0) / self.cap
        if self.prod.any():   # the RUS rule: production requests within max_util too
            excess = excess + np.maximum(self.prod - X @ self.P - limit, 0.0) / self.cap
        feasible = ~np.any(excess > 1e-12, axis=1)
        sc = np.asarray(self.score(after, self.cap, np.zeros(2)), dtype=float).reshape(-1)
        sc = np.nan_to_num(sc)
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(cost > 0, sc / np.where(cost > 0, cost, 1.0), 0.0)
        return np.where(feasible, fit, -excess.sum(axis=1))

    def fitness(self, x: np.ndarray) -> float:
        return float(self.fitness_many(x[np.newaxis, :])[0])


def _result(tasks, x, prob, comp_names, used0) -> Selection:
    f = prob.fitness(x)
    removed = x @ prob.U if len(tasks) else np.zeros(2)
    after = np.maximum(used0 - removed, 0.0)
    prod_after = prob.prod - (x @ prob.P if len(tasks) else 0.0)
    feasible = bool(np.all(after <= prob.p.max_util * prob.cap + 1e-12)
                    and np.all(prod_after <= prob.p.max_util * prob.cap + 1e-12))
    sc = float(np.nan_to_num(np.asarray(prob.score(after, prob.cap, np.zeros(2))).reshape(-1)[0]))
    return Selection(tuple(t.name for t, b in zip(tasks, x) if b) + comp_names, comp_names, f, feasible,
                     prob.evaluations, sc, float(x @ prob.C) if len(tasks) else 0.0)


def _split(capacity, used, tasks, prod=(0.0, 0.0)):
    comp = [t for t in tasks if t.compulsory]
    rest = [t for t in tasks if not t.compulsory]
    used0 = np.asarray(used, dtype=float) - sum((np.asarray(t.used) for t in comp), np.zeros(2))
    prod0 = np.asarray(prod, dtype=float) - sum((np.asarray(t.prod_req) for t in comp), np.zeros(2))
    return comp, rest, np.maximum(used0, 0.0), np.maximum(prod0, 0.0)


_FLIPS: dict[int, np.ndarray] = {}


def _flip_matrix(n: int, max_pairs: int, rng: random.Random) -> np.ndarray:
    full = n * (n - 1) // 2 <= max_pairs
    m = _FLIPS.get(n) if full else None
    if m is None:
        rows = [np.eye(n)]
        if n > 1:
            if full:
                i, j = np.triu_indices(n, 1)
            else:
                pairs = set()
                while len(pairs) < max_pairs:
                    a, b = rng.randrange(n), rng.randrange(n)
                    if a != b:
                        pairs.add((min(a, b), max(a, b)))
                i, j = (np.array(v) for v in zip(*sorted(pairs)))
            d = np.zeros((len(i), n))
            d[np.arange(len(i)), i] = 1
            d[np.arange(len(i)), j] = 1
            rows.append(d)
        m = np.vstack(rows)
        if full:
            _FLIPS[n] = m
    return m


def tabu_select(capacity: Sequence[float], used: Sequence[float], tasks: Sequence[Candidate],
                rng: random.Random, params: TabuParams = TabuParams(),
                prod_requested: Sequence[float] = (0.0, 0.0)) -> Selection:
    """*prod_requested*: the production tasks' requests on the host (RUS rule), or zeros."""
    comp, rest, used0, prod0 = _split(capacity, used, tasks, prod_requested)
    comp_names = tuple(t.name for t in comp)
    prob = _Problem(capacity, used0, rest, params, prod0)
    n = len(rest)
    if n == 0 or prob.fitness(np.zeros(n)) >= 0:      # nothing to choose, or already within limits
        return _result(rest, np.zeros(n), prob, comp_names, used0)
    tenure = params.tenure or max(1, n // 4)
    best_x, best_f = np.zeros(n), prob.fitness(np.zeros(n))
    stale = 0
    # expected share of tasks to move, for the random starts
    share = float(np.clip(np.max((np.maximum(used0, prod0) - params.max_util * prob.cap)
                                 / np.maximum(prob.U.sum(axis=0) + prob.P.sum(axis=0), 1e-12)), 1.0 / n, 1.0))
    for r in range(params.restarts):
        x = np.zeros(n) if r == 0 else np.array([rng.random() < share for _ in range(n)], dtype=float)
        f = prob.fitness(x)
        if f > best_f:
            best_x, best_f, stale = x.copy(), f, 0
        tabu: list[int] = []
        for _ in range(params.steps):
            flips = _flip_matrix(n, params.max_pairs, rng)     # (m, n): rows with one or two ones
            X = np.abs(x[np.newaxis, :] - flips)
            fs = prob.fitness_many(X)
            if tabu:
                allowed = ~np.any(flips[:, tabu] > 0, axis=1)
                allowed |= fs > best_f                     # aspiration: beating the best is allowed
                fs = np.where(allowed, fs, -np.inf)
            j = int(np.argmax(fs))
            if not np.isfinite(fs[j]):
                break
            x = X[j].copy()
            tabu.extend(int(i) for i in np.flatnonzero(flips[j]))
            del tabu[:max(0, len(tabu) - tenure)]
            if fs[j] > best_f + 1e-15:
                best_x, best_f, stale = x.copy(), float(fs[j]), 0
            else:
                stale += 1
                if stale >= params.patience:
                    return _result(rest, best_x, prob, comp_names, used0)
    return _result(rest, best_x, prob, comp_names, used0)


def greedy_by_size(capacity, used, tasks: Sequence[Candidate], params: TabuParams = TabuParams(),
                   prod_requested: Sequence[float] = (0.0, 0.0)) -> Selection:
    """Baseline: remove the largest tasks (by used share of capacity, summed over resources)
    until the host is within max_util."""
    comp, rest, used0, prod0 = _split(capacity, used, tasks, prod_requested)
    prob = _Problem(capacity, used0, rest, params, prod0)
    cap = prob.cap
    order = sorted(range(len(rest)), key=lambda i: -(prob.U[i] / cap).sum())
    x = np.zeros(len(rest))
    for i in order:
        if prob.fitness(x) >= 0:
            break
        x[i] = 1
    return _result(rest, x, prob, tuple(t.name for t in comp), used0)


def brute_force(capacity, used, tasks: Sequence[Candidate], params: TabuParams = TabuParams(),
                prod_requested: Sequence[float] = (0.0, 0.0)) -> Selection:
    """The optimum by enumeration (2^n subsets; for checking the search on n ≤ 16)."""
    comp, rest, used0, prod0 = _split(capacity, used, tasks, prod_requested)
    n = len(rest)
    if n > 16:
        raise ValueError(f"brute_force: {n} tasks is too many (allowed ≤ 16)")
    prob = _Problem(capacity, used0, rest, params, prod0)
    X = np.array(list(itertools.product((0.0, 1.0), repeat=n))) if n else np.zeros((1, 0))
    fs = prob.fitness_many(X)
    return _result(rest, X[int(np.argmax(fs))], prob, tuple(t.name for t in comp), used0)


SELECTORS: dict[str, Callable[..., Selection]] = {"tabu": tabu_select}
