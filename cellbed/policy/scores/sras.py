"""SRAS: Service Re-Allocation Score (DESIGN §8, seed digest §D.8, §D.13).

SRAS scores a node as a migration target, over *used* resources, as if the
task were already there. Preference order TA > PA > DA: highest at (90, 90),
a medium plateau over PA, lowest in the off-diagonal corners. It is SIAS's
mirror image: the same kernel with the peak moved from m = 0 to m = U::

    m = mean_r p_r,   D = max_r p_r − min_r p_r
    SRAS(p) = max(0, λ_R + (1−λ_R)·exp(−(U−m)²/β_R) − γ·D/U)

with U = ``max_util_pct`` (90), λ_R = 0.6 and β_R = 500 (the seed's "0.6"
and "500"), γ = 1. Zero regions, clipping, shapes and the NaN-for-excluded
rule are exactly those of SIAS (see ``sias.py``): 0 if any p_r > 90 or
> 100; NaN where ``mask`` is False (constraints do not match).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cellbed.policy.scores.asr import utilisation_pct
from cellbed.policy.scores.sias import allocation_score, validate_shape_params

__all__ = ["DEFAULT_SRAS", "SrasParams", "sras", "sras_from_load"]


@dataclass(frozen=True)
class SrasParams:
    """Tunables of SRAS. Defaults are the reference reconstruction's."""

    lam: float = 0.6
    """λ_R in [0, 1]: the plateau level over PA (the seed's "0.6")."""
    beta: float = 500.0
    """β_R > 0, in percent²: width of the peak at m = U (the seed's "500")."""
    gamma: float = 1.0
    """γ ≥ 0: disproportion penalty; the score loses γ·D/U."""
    max_util_pct: float = 90.0
    """U, in percent: the peak, the STA threshold (any p_r above it scores 0), and the scale of D."""
    overload_pct: float = 100.0
    """Any p_r above it is OVERLOADED and scores 0. Must be ≥ max_util_pct."""

    def __post_init__(self) -> None:
        validate_shape_params("SrasParams", self.lam, self.beta, self.gamma, self.max_util_pct, self.overload_pct)


DEFAULT_SRAS = SrasParams()


def sras(
    p: ArrayLike, params: SrasParams | None = None, *, mask: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """SRAS of one node ((R,) → float) or many ((N, R) → (N,) array).

    ``p`` holds utilisation percentages over *used* resources with the task
    counted in. ``mask``: False where constraints do not match → NaN.
    """
    q = DEFAULT_SRAS if params is None else params
    return allocation_score(
        p,
        lam=q.lam,
        beta=q.beta,
        peak_pct=q.max_util_pct,
        gamma=q.gamma,
        max_util_pct=q.max_util_pct,
        overload_pct=q.overload_pct,
        mask=mask,
    )


def sras_from_load(
    used: ArrayLike,
    capacity: ArrayLike,
    task: ArrayLike,
    params: SrasParams | None = None,
    *,
    mask: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    """SRAS from loads: ``used`` is the summed usage of the tasks already on
    each node ((R,) or (N, R)), ``capacity`` the node capacities, ``task`` the
    candidate's current usage (R,). Same units for all three."""
    return sras(utilisation_pct(used, capacity, task), params, mask=mask)
