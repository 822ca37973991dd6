"""GAIN variants of the allocation scores (DESIGN §8, seed digest §D.8).

    X_GAIN = max(0, X(T') − X(T))

where T is the set of tasks on the node now and T' = T plus the candidate.
In utilisation terms X(T) is the score of ``p_before`` (the node as it is) and
X(T') the score of ``p_after`` (the task counted in). :func:`gain_of` turns
any score function with the signature ``score(p, params=None, *, mask=None)``
into its GAIN variant; ``sias_gain`` and ``sras_gain`` are the two the seed
names.

**Zero-gain ties.** Under the reference SIAS, adding a task almost always
lowers the score (SIAS falls with the fill level m), so SIAS_GAIN is > 0 only
when the task reduces the disproportion D, and most candidates tie at 0.
DESIGN §8: break zero-gain ties by the absolute score. :func:`gain_sort_key`
(one candidate at a time) and :func:`rank_by_gain` (vectorised) order
candidates by gain, then by the absolute score X(T'), best first. Equal
(gain, score) pairs keep their input order, so callers that shuffle the pool
first (as the BA does) get a random tie-break on top.

Excluded nodes (``mask`` False) get NaN gains, as in the base scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cellbed.policy.scores.asr import utilisation_pct
from cellbed.policy.scores.sias import sias
from cellbed.policy.scores.sras import sras

__all__ = [
    "gain",
    "gain_from_load",
    "gain_of",
    "gain_sort_key",
    "rank_by_gain",
    "sias_gain",
    "sias_gain_from_load",
    "sras_gain",
    "sras_gain_from_load",
]

Score = Callable[..., Any]
"""``score(p, params=None, *, mask=None) -> float | ndarray`` (p-space)."""


def gain(
    score: Score,
    p_before: ArrayLike,
    p_after: ArrayLike,
    params: Any = None,
    *,
    mask: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    """``max(0, score(p_after) − score(p_before))``; NaN where ``mask`` is False.

    ``p_before`` and ``p_after`` have the same shape: (R,) for one node or
    (N, R) for N nodes. ``params`` is passed to ``score`` (None = its default).
    """
    before = score(p_before, params, mask=mask)
    after = score(p_after, params, mask=mask)
    if np.shape(before) != np.shape(after):
        raise ValueError(
            f"p_before and p_after must describe the same nodes; shapes {np.shape(p_before)} vs {np.shape(p_after)}"
        )
    g = np.maximum(np.subtract(after, before), 0.0)  # np.maximum keeps NaN
    if np.ndim(g) == 0:
        return float(g)
    return g


def gain_of(score: Score) -> Callable[..., float | NDArray[np.float64]]:
    """The GAIN variant of ``score``, as ``f(p_before, p_after, params=None, *, mask=None)``."""

    def score_gain(
        p_before: ArrayLike, p_after: ArrayLike, params: Any = None, *, mask: ArrayLike | None = None
    ) -> float | NDArray[np.float64]:
        return gain(score, p_before, p_after, params, mask=mask)

    name = getattr(score, "__name__", "score")
    score_gain.__name__ = score_gain.__qualname__ = f"{name}_gain"
    score_gain.__doc__ = f"max(0, {name}(p_after) − {name}(p_before)); see cellbed.policy.scores.gain.gain."
    return score_gain


sias_gain = gain_of(sias)
"""SIAS_GAIN over requested-resource percentages: ``sias_gain(p_before, p_after, params=None, *, mask=None)``."""

sras_gain = gain_of(sras)
"""SRAS_GAIN over used-resource percentages: ``sras_gain(p_before, p_after, params=None, *, mask=None)``."""


def gain_from_load(
    score: Score,
    load: ArrayLike,
    capacity: ArrayLike,
    task: ArrayLike,
    params: Any = None,
    *,
    mask: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    """GAIN from loads: T is ``load`` on ``capacity``, T' adds ``task``."""
    return gain(
        score,
        utilisation_pct(load, capacity),
        utilisation_pct(load, capacity, task),
        params,
        mask=mask,
    )


def sias_gain_from_load(
    requested: ArrayLike, capacity: ArrayLike, task: ArrayLike, params: Any = None, *, mask: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """SIAS_GAIN from summed requests on each node, capacities and the task's request."""
    return gain_from_load(sias, requested, capacity, task, params, mask=mask)


def sras_gain_from_load(
    used: ArrayLike, capacity: ArrayLike, task: ArrayLike, params: Any = None, *, mask: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """SRAS_GAIN from summed usage on each node, capacities and the task's usage."""
    return gain_from_load(sras, used, capacity, task, params, mask=mask)


def gain_sort_key(gain_value: float, absolute: float) -> tuple[float, float]:
    """Sort key, ascending = best first: higher gain first, ties (notably the
    many zero gains) broken by higher absolute score X(T').

    ``sorted(cands, key=lambda c: gain_sort_key(c.gain, c.score))``. A
    candidate with a NaN gain or score (excluded node) sorts last.
    """
    if math.isnan(gain_value) or math.isnan(absolute):
        return (math.inf, math.inf)
    return (-gain_value, -absolute)


def rank_by_gain(gains: ArrayLike, absolute: ArrayLike) -> NDArray[np.intp]:
    """Indices of the defined nodes, best first, by (gain, absolute score)
    descending. Nodes with NaN in either (excluded) are left out. Stable:
    exact ties keep their input order."""
    g = np.asarray(gains, dtype=np.float64)
    a = np.asarray(absolute, dtype=np.float64)
    if g.ndim != 1 or g.shape != a.shape:
        raise ValueError(f"gains and absolute must be 1-D and of equal length, got {g.shape} and {a.shape}")
    keep = np.flatnonzero(~(np.isnan(g) | np.isnan(a)))
    order = np.lexsort((-a[keep], -g[keep]))  # last key is primary
    return keep[order]
