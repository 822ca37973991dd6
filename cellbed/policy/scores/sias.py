"""SIAS: Service Initial Allocation Score (DESIGN §8, seed digest §D.8, §D.13).

SIAS scores a node for placing a *new* task, over *requested* resources.
Preference order PA > TA > DA: highest near (0, 0), medium near (90, 90),
lowest in the off-diagonal corners. The seed's equation was stripped; this is
the reference reconstruction (digest §D.13, [RECON])::

    m = mean_r p_r                 (fill level, percent)
    D = max_r p_r − min_r p_r      (disproportion, points)
    SIAS(p) = max(0, λ_I + (1−λ_I)·exp(−m²/β_I) − γ·D/U)

with U = ``max_util_pct`` (90) and p_r the utilisation percent of resource r
*after* placing the task. Zero regions: the score is 0 if any p_r > 90 (STA)
or any p_r > 100 (OVERLOADED); a p_r of exactly 90 is still scored.

**Excluded nodes.** A node whose constraints the task does not match has no
score at all ("undefined", the node is not a candidate). The caller passes a
boolean ``mask`` (True = constraints match); excluded nodes get NaN, never 0,
so that they cannot be confused with a matching node that scores 0 (STA,
overloaded or clipped). Use ``np.isnan`` to drop them; NaN also makes any
score-weighted sampling fail loudly instead of silently giving them weight 0.
Rows that are masked out are not validated, so they may hold NaN.

Shapes: ``p`` is (R,) for one node (returns a Python float) or (N, R) for N
nodes (returns an (N,) float64 array). Any R ≥ 1 works. No Python loop runs
over nodes.

:func:`allocation_score` is the shared kernel; SRAS (``sras.py``) is the same
kernel with the peak moved from 0 to U, which is the seed's "mirror image".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cellbed.policy.scores.asr import as_node_mask, as_pct_matrix, require_number, row_stats, utilisation_pct

__all__ = ["DEFAULT_SIAS", "SiasParams", "allocation_score", "sias", "sias_from_load", "validate_shape_params"]


def validate_shape_params(
    owner: str, lam: float, beta: float, gamma: float, max_util_pct: float, overload_pct: float
) -> None:
    """Range checks shared by SiasParams and SrasParams; errors name the field."""
    require_number(owner, "lam", lam, lo=0.0, hi=1.0)
    require_number(owner, "beta", beta, lo=0.0, lo_open=True, unit="percent²")
    require_number(owner, "gamma", gamma, lo=0.0)
    over = require_number(owner, "overload_pct", overload_pct, lo=0.0, lo_open=True, unit="%")
    require_number(owner, "max_util_pct", max_util_pct, lo=0.0, hi=over, lo_open=True, unit="% (≤ overload_pct)")


@dataclass(frozen=True)
class SiasParams:
    """Tunables of SIAS. Defaults are the reference reconstruction's."""

    lam: float = 0.5
    """λ_I in [0, 1]: the level the score falls to far from the peak, for proportional nodes."""
    beta: float = 2500.0
    """β_I > 0, in percent²: width of the peak at m = 0."""
    gamma: float = 1.0
    """γ ≥ 0: disproportion penalty; the score loses γ·D/U."""
    max_util_pct: float = 90.0
    """U, in percent: any p_r above it is STA and scores 0; also the scale of D."""
    overload_pct: float = 100.0
    """Any p_r above it is OVERLOADED and scores 0. Must be ≥ max_util_pct."""

    def __post_init__(self) -> None:
        validate_shape_params("SiasParams", self.lam, self.beta, self.gamma, self.max_util_pct, self.overload_pct)


DEFAULT_SIAS = SiasParams()


def allocation_score(
    p: ArrayLike,
    *,
    lam: float,
    beta: float,
    peak_pct: float,
    gamma: float,
    max_util_pct: float,
    overload_pct: float,
    mask: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    """The shared kernel: ``max(0, λ + (1−λ)·exp(−(peak−m)²/β) − γ·D/U)``,
    0 where any p_r > min(U, overload), NaN where ``mask`` is False.
    Parameters are taken as already validated."""
    a = np.asarray(p, dtype=np.float64)
    n = a.shape[0] if a.ndim == 2 else 1
    m_ok = as_node_mask(mask, n, a.ndim == 1)
    P, one = as_pct_matrix(a, ignore_rows=None if m_ok is None else ~m_ok)
    if m_ok is not None and not m_ok.all():
        P = np.where(m_ok[:, np.newaxis], P, 0.0)  # keep NaN/inf garbage of excluded rows out of the arithmetic
    pmax, pmin, m = row_stats(P)
    # In place, to keep temporaries (and their allocation cost) down:
    # score = λ + (1−λ)·exp(−(peak−m)²/β) − (γ/U)·(max−min)
    d = np.subtract(peak_pct, m, out=m)
    score = np.square(d, out=d)
    score *= -1.0 / beta
    np.exp(score, out=score)
    score *= 1.0 - lam
    score += lam
    spread = np.subtract(pmax, pmin, out=pmin)
    spread *= gamma / max_util_pct
    score -= spread
    np.maximum(score, 0.0, out=score)
    score[pmax > min(max_util_pct, overload_pct)] = 0.0
    if m_ok is not None:
        score[~m_ok] = math.nan
    if one:
        return float(score[0])
    return score


def sias(
    p: ArrayLike, params: SiasParams | None = None, *, mask: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """SIAS of one node ((R,) → float) or many ((N, R) → (N,) array).

    ``p`` holds utilisation percentages over *requested* resources after
    placing the task. ``mask`` (bool, or (N,) bool): False where the task's
    constraints do not match; those nodes get NaN (see module docstring).
    """
    q = DEFAULT_SIAS if params is None else params
    return allocation_score(
        p,
        lam=q.lam,
        beta=q.beta,
        peak_pct=0.0,
        gamma=q.gamma,
        max_util_pct=q.max_util_pct,
        overload_pct=q.overload_pct,
        mask=mask,
    )


def sias_from_load(
    requested: ArrayLike,
    capacity: ArrayLike,
    task: ArrayLike,
    params: SiasParams | None = None,
    *,
    mask: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    """SIAS from loads: ``requested`` is the sum of the requests of the tasks
    already on each node ((R,) or (N, R)), ``capacity`` the node capacities,
    ``task`` the candidate's request (R,). Same units for all three."""
    return sias(utilisation_pct(requested, capacity, task), params, mask=mask)
