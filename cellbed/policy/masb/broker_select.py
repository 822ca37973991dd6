"""The Broker Agent's choices, pure: candidates for SAN step 2 and initial allocation
(DESIGN §7). Inputs are cache columns; the RNG is a seeded numpy Generator."""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from cellbed.policy.scores import SCORES


@dataclasses.dataclass(frozen=True)
class BrokerParams:
    candidate_count: int = 15
    realloc_scan_limit: int = 2000
    initial_scan_limit: int = 200
    node_expiry_s: float = 300.0
    realloc_score: str = "sras"
    initial_score: str = "sias"
    max_util: float = 0.9
    max_clock_skew_s: float = 30.0   # a report measured further in the broker's future is refused
    pool_sampling: str = "permute"   # initial allocation's random scan order: permute the fresh nodes,
                                     # or draw (the first 2 x initial_scan_limit without replacement, the
                                     # rest permuted only if needed: the same order's law, O(limit))


@dataclasses.dataclass(frozen=True)
class Pick:
    index: int
    score: float
    forced: bool


@dataclasses.dataclass(frozen=True)
class CandidateResult:
    picks: tuple[Pick, ...]
    scanned: int
    matched: int
    scores: np.ndarray            # of the scanned+matched pool (decision logs)


POOL_SAMPLINGS = ("permute", "draw")


def random_head(n: int, head: int, rng: np.random.Generator) -> np.ndarray:
    """*head* positions of range(n) in the order a uniform random permutation would put first
    (drawn without replacement, in random order): O(head) instead of a permutation's O(n)."""
    return rng.choice(n, size=min(head, n), replace=False)


def rus_ok(prod: np.ndarray, cap: np.ndarray, task_req: np.ndarray, max_util: float) -> np.ndarray:
    """The RUS rule for a production task: the node's production requests plus the task's
    stay within max_util of capacity. Column by column: a reduction along the short resource
    axis costs ~50x more than elementwise work on the columns (see policy.asr.row_stats)."""
    ok = prod[:, 0] + task_req[0] <= max_util * cap[:, 0] + 1e-9
    for r in range(1, prod.shape[1]):
        ok &= prod[:, r] + task_req[r] <= max_util * cap[:, r] + 1e-9
    return ok


def candidates(pool: np.ndarray, match: np.ndarray, cap: np.ndarray, used: np.ndarray, task_used: np.ndarray,
               rng: np.random.Generator, p: BrokerParams, forced_only: bool = False, *,
               score: Callable | None = None, pick: Callable | None = None,
               force: Callable | None = None) -> CandidateResult:
    """*pool*: fresh cache indices (source excluded), already shuffled; *match*: constraint mask
    over pool. Score at most realloc_scan_limit matching nodes with the reallocation score
    as if the task were there (stage ``score``); recommend some of them (stage ``candidates``:
    MASB samples candidate_count by score-weighted sampling without replacement). If none is
    recommended, or *forced_only*, return forced candidates (stage ``forced``: MASB takes
    matching nodes whose total capacity fits the task). The stages default to the built-ins
    named by *p*; a broker passes the policies it was given."""
    m = pool[match][: p.realloc_scan_limit]
    if len(m) == 0:
        return CandidateResult((), min(len(pool), p.realloc_scan_limit), 0, np.zeros(0))
    if forced_only:
        sc, picks = np.zeros(len(m)), []
    else:
        sc = np.nan_to_num(np.asarray((score or SCORES[p.realloc_score])(used[m], cap[m], task_used),
                                      dtype=float).reshape(-1))
        picks = (pick or _builtin_pick(p))(sc, cap[m], used[m], task_used, rng)
    forced = not picks
    if forced:
        picks = (force or _builtin_force(p))(cap[m], task_used, rng)
    return CandidateResult(tuple(Pick(int(m[x.index]), float(x.score), forced) for x in picks), len(m), len(m), sc)


def _builtin_pick(p: BrokerParams) -> Callable:
    return lambda sc, cap, used, task, rng: sample_by_score(sc, p.candidate_count, rng)


def _builtin_force(p: BrokerParams) -> Callable:
    return lambda cap, task, rng: sample_forced(cap, task, p.candidate_count, rng)


def sample_by_score(sc: np.ndarray, count: int, rng: np.random.Generator) -> list[Pick]:
    """*count* positions of *sc* scoring above 0, by score-weighted random sampling without
    replacement ([] if none scores above 0: no draw is made)."""
    pos = np.flatnonzero(sc > 0)
    k = min(count, len(pos))
    if not k:
        return []
    w = sc[pos] / sc[pos].sum()
    chosen = rng.choice(pos, size=k, replace=False, p=w)
    return [Pick(int(j), float(sc[j]), False) for j in chosen]


def sample_forced(cap: np.ndarray, task_used: np.ndarray, count: int, rng: np.random.Generator) -> list[Pick]:
    """Forced candidates: *count* random positions whose total capacity fits the task."""
    fits = np.flatnonzero(np.all(cap >= task_used, axis=1))
    k = min(count, len(fits))
    chosen = rng.choice(fits, size=k, replace=False) if k else []
    return [Pick(int(j), 0.0, True) for j in chosen]


def initial(pool: np.ndarray, match: np.ndarray, cap: np.ndarray, req: np.ndarray, used: np.ndarray,
            task_req: np.ndarray, p: BrokerParams, limit: int | None = None, *,
            score: Callable | None = None) -> tuple[list[Pick], int, np.ndarray]:
    """Initial allocation: score at most initial_scan_limit matching nodes with the initial
    score over *requested* resources; best first. Nodes scoring 0 (requests above 90%, as
    they are in an overcommitted cell) follow, lowest resulting *use* share first, among
    those whose use leaves room: our fallback, since the paper's Borg-like cell
    overcommits requests and it says nothing of this case. Returns (ranked picks, scanned,
    scores). *limit* keeps only the first picks of the ranking (the caller tries a few);
    *match* already includes the RUS rule for production tasks (see :func:`rus_ok`). *score* is the
    stage ``score`` in the ``initial_score`` slot (default: the built-in *p* names)."""
    m = pool[match][: p.initial_scan_limit]
    if len(m) == 0:
        return [], 0, np.zeros(0)
    sc = np.nan_to_num(np.asarray((score or SCORES[p.initial_score])(req[m], cap[m], task_req),
                                  dtype=float).reshape(-1))
    order = np.argsort(-sc, kind="stable")
    pos = order[sc[order] > 0][:limit]
    ranked = [Pick(h, s, False) for h, s in zip(m[pos].tolist(), sc[pos].tolist())]
    zero = np.flatnonzero(sc <= 0)
    if len(zero) and (limit is None or len(ranked) < limit):
        after = (used[m[zero]] + task_req) / cap[m[zero]]
        worst = after.max(axis=1)
        ok = worst <= 1.0
        for j in zero[ok][np.argsort(worst[ok], kind="stable")][: None if limit is None else limit - len(ranked)]:
            ranked.append(Pick(int(m[j]), 0.0, False))
    return ranked, len(m), sc
