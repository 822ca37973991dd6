"""Gaussian Percentile Approximation fit test (seed 003, Janus & Rzadca;
DESIGN §7 "Fit test option", seed digest §B.4).

For CPU, with the node's tasks S and the candidate k::

    μ'  = μ_k  + Σ_{i∈S} μ_i
    σ'² = σ_k² + Σ_{i∈S} σ_i²
    fits ⇔ μ' + Φ⁻¹(1−ϱ)·σ' ≤ capacity_cpu × max_util

μ_i and σ_i² are the mean and variance of task i's 1-s CPU usage samples.
This is the paper's ``F(c | μ', σ'²) ≥ 1 − ϱ`` (Pr[CPU demand > c] ≤ ϱ under
the normal approximation); for σ' = 0 both read μ' ≤ c. Φ⁻¹ comes from
``statistics.NormalDist``: ϱ = 0.10 → 1.2816, 0.05 → 1.6449, 0.01 → 2.3263,
0.001 → 3.0902.

Every other resource (memory in particular, which is value-limited, not
rate-limited) stays a hard sum: ``node.size_r + task.size_r ≤ capacity_r ×
max_util``, exactly as in the sum test.

**Too few samples: the deterministic fallback.** μ and σ from fewer than
``min_samples`` (default 100; [003] §5.5 shows 100 suffice) samples are not
trusted. If the candidate task, or any task already on the node (the node's
``cpu_samples`` is the fewest among its tasks), has fewer than
``min_samples`` samples, GPA is not used for that node: CPU is checked by the
deterministic sum test on ``size``, ``node.size_cpu + task.size_cpu ≤
capacity_cpu × max_util``. The result is then identical to :func:`sum_fit`.
Put requested CPU in ``size`` if the fallback should be conservative.

Interface, shapes and ``max_util`` are those of ``fit.py`` (default
max_util = 1.0, as in the paper: the bound is the capacity c).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cellbed.policy.scores.asr import require_number
from cellbed.policy.scores.fit import Demand, fits_within, sum_projection

__all__ = ["DEFAULT_GPA", "GpaParams", "gpa_fit", "gpa_projection"]


@dataclass(frozen=True)
class GpaParams:
    """Parameters of the GPA test."""

    rho: float = 0.01
    """ϱ, the accepted probability that the node's CPU demand exceeds the
    bound, in (0, 0.5]. 0.01 is a 99% SLO."""
    min_samples: int = 100
    """Fewest 1-s CPU samples behind μ and σ for GPA to be used (≥ 2)."""
    max_util: float = 1.0
    """Fraction of capacity that may be filled, in (0, 1]."""
    cpu_index: int = 0
    """Column of CPU in the resource vectors."""

    def __post_init__(self) -> None:
        o = "GpaParams"
        require_number(o, "rho", self.rho, lo=0.0, hi=0.5, lo_open=True)
        if isinstance(self.min_samples, bool) or not isinstance(self.min_samples, int) or self.min_samples < 2:
            raise ValueError(f"{o}.min_samples must be an integer ≥ 2, got {self.min_samples!r}")
        require_number(o, "max_util", self.max_util, lo=0.0, hi=1.0, lo_open=True, unit="of capacity")
        if isinstance(self.cpu_index, bool) or not isinstance(self.cpu_index, int) or self.cpu_index < 0:
            raise ValueError(f"{o}.cpu_index must be an integer ≥ 0, got {self.cpu_index!r}")

    @property
    def z(self) -> float:
        """Φ⁻¹(1 − ϱ)."""
        return NormalDist().inv_cdf(1.0 - self.rho)


DEFAULT_GPA = GpaParams()


def gpa_projection(node: Demand, task: Demand, params: GpaParams | None = None) -> NDArray[np.float64]:
    """Per-resource demand that GPA compares with capacity × max_util:
    CPU → μ' + Φ⁻¹(1−ϱ)·σ' (or the plain size sum where the fallback
    applies), every other resource → node.size + task.size."""
    q = DEFAULT_GPA if params is None else params
    projected = sum_projection(node, task)
    n_res = projected.shape[-1]
    if q.cpu_index >= n_res:
        raise ValueError(f"GpaParams.cpu_index {q.cpu_index} is out of range for {n_res} resources")
    mu = node.cpu_mean + task.cpu_mean
    sigma = np.sqrt(node.cpu_var + task.cpu_var)
    sampled = (node.cpu_samples >= q.min_samples) & (task.cpu_samples >= q.min_samples)
    cpu = np.where(sampled, mu + q.z * sigma, projected[..., q.cpu_index])
    if projected.ndim == 2 and np.ndim(cpu) == 0:
        cpu = np.full(projected.shape[0], cpu)
    if np.shape(cpu) != projected.shape[:-1]:
        raise ValueError(
            f"CPU statistics of shape {np.shape(cpu)} do not match {projected.shape[:-1] or 'one node'}"
        )
    projected[..., q.cpu_index] = cpu
    return projected


def gpa_fit(
    node: Demand, task: Demand, capacity: ArrayLike, params: GpaParams | None = None
) -> bool | NDArray[np.bool_]:
    """GPA test for CPU, hard sum for the rest; bool for one node, (N,) for many."""
    q = DEFAULT_GPA if params is None else params
    return fits_within(gpa_projection(node, task, q), capacity, q.max_util)
