"""What a PA:DA ratio needs of the per-node use distribution (issue 14 part 4). Pure functions.

A node is PA only if every resource is below the TA edge (70 %) and, by DESIGN §8, within
``pa_spread_pct`` (30) points of the others; DA is the rest of the nodes below STA/TA. When one
resource binds (memory in the GCD-shaped cell: 60–70 % used cell-wide, CPU 40–50 %), the PA share
is, to first order, the share of nodes whose use of that resource is below 70 %. With per-node use
≈ Normal(μ, σ) and no STA/TA nodes::

    PA share = Φ((70 − μ)/σ),   PA:DA = Φ/(1 − Φ),   PA:DA ≥ k  ⇔  σ ≤ (70 − μ)/Φ⁻¹(k/(1+k))

so 3:1 at μ = 64 % needs σ ≤ 8.9 points, and at μ = 69 % σ ≤ 1.5. Packing a share s of the nodes at
level L (STA/TA, as best fit or SRAS do) leaves the others at μ' = (μ − sL)/(1 − s).

:func:`repack_balanced` is the offline existence check: the same tasks placed by a greedy
balancer with full knowledge (largest first, each where its resources end closest to the cell's
mean use vector).
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cellbed.policy.scores.asr import AsrBands, AsrClass, classify

__all__ = ["classify_counts", "pada", "pa_share_normal", "pada_normal", "required_sigma", "rest_mean",
           "repack_balanced"]

_N = NormalDist()


def pada(pa: float, da: float) -> float:
    """PA:DA as a number (PA per DA node); inf when there is no DA node, NaN when neither."""
    if da > 0:
        return pa / da
    return math.inf if pa > 0 else math.nan


def rest_mean(mu: float, packed_share: float = 0.0, packed_level: float = 90.0) -> float:
    """Mean use (%) of the nodes left when a share *packed_share* of the (equal-sized) nodes sits at
    *packed_level* % and the cell-wide mean is *mu* %."""
    if not 0.0 <= packed_share < 1.0:
        raise ValueError(f"packed_share must be in [0, 1), got {packed_share!r}")
    return (mu - packed_share * packed_level) / (1.0 - packed_share)


def pa_share_normal(mu: float, sigma: float, edge: float = 70.0) -> float:
    """Share of nodes below *edge* % when per-node use ~ Normal(mu, sigma) (sigma ≥ 0, in points)."""
    if sigma < 0 or not math.isfinite(mu):
        raise ValueError(f"need a finite mu and sigma >= 0, got mu={mu!r}, sigma={sigma!r}")
    if sigma == 0:
        return 1.0 if mu < edge else 0.0
    return _N.cdf((edge - mu) / sigma)


def pada_normal(mu: float, sigma: float, packed_share: float = 0.0, packed_level: float = 90.0,
                edge: float = 70.0) -> float:
    """PA:DA under the normal approximation, the packed nodes (STA/TA) counting as neither."""
    f = pa_share_normal(rest_mean(mu, packed_share, packed_level), sigma, edge)
    return pada(f, 1.0 - f)


def required_sigma(mu: float, ratio: float = 3.0, packed_share: float = 0.0, packed_level: float = 90.0,
                   edge: float = 70.0) -> float:
    """Largest per-node σ (points) at which PA:DA ≥ *ratio* under the normal approximation; 0 when
    the (rest) mean is at or above the edge (no σ is small enough)."""
    if ratio <= 0:
        raise ValueError(f"ratio must be > 0, got {ratio!r}")
    m = rest_mean(mu, packed_share, packed_level)
    if m >= edge:
        return 0.0
    return (edge - m) / _N.inv_cdf(ratio / (1.0 + ratio)) if ratio > 1.0 else math.inf


def classify_counts(p: ArrayLike, spread: float = 30.0) -> dict:
    """ASR counts of (N, R) use percentages (busy nodes) with DESIGN's bands and *spread* as the
    PA spread test (math.inf = the digest's literal banding). Also the DA mask."""
    a = np.asarray(p, dtype=float).reshape(-1, np.shape(p)[-1] if np.ndim(p) else 1)
    codes = classify(a, None, AsrBands(pa_spread_pct=spread)) if len(a) else np.zeros(0, dtype=np.int8)
    c = np.bincount(np.asarray(codes, dtype=np.intp), minlength=len(AsrClass))
    return {"sta": int(c[AsrClass.STA]), "ta": int(c[AsrClass.TA]), "pa": int(c[AsrClass.PA]),
            "da": int(c[AsrClass.DA]), "overloaded": int(c[AsrClass.OVERLOADED]),
            "da_mask": np.asarray(codes) == AsrClass.DA}


def repack_balanced(task_use: ArrayLike, capacity: ArrayLike) -> NDArray[np.float64]:
    """Place the tasks (T, R) on the nodes (N, R capacities) greedily: largest first (by its
    largest share of a mean node), each on the node whose fullest resource, *relative to the
    cell-wide use of that resource*, is lowest afterwards (max_r p_r/μ_r). Every node then tends
    to the cell's use vector (e.g. 40 % CPU / 64 % memory), memory-poor machines getting the
    CPU-heavy tasks. Returns the (N, R) use percentages. Ignores constraints and RUS: it asks
    whether this set of tasks *can* be spread so that most nodes are PA, not what a real
    scheduler would do."""
    t = np.asarray(task_use, dtype=float).reshape(-1, np.shape(capacity)[-1])
    cap = np.asarray(capacity, dtype=float)
    if np.any(cap <= 0) or np.any(t < 0):
        raise ValueError("capacities must be > 0 and task use >= 0")
    mu = t.sum(axis=0) / cap.sum(axis=0)
    mu = np.where(mu > 0, mu, 1.0)
    order = np.argsort(-(t / cap.mean(axis=0)).max(axis=1), kind="stable")
    load = np.zeros_like(cap)
    scaled_cap = cap * mu
    for i in order:
        j = int(np.argmin(((load + t[i]) / scaled_cap).max(axis=1)))
        load[j] += t[i]
    return 100.0 * load / cap
