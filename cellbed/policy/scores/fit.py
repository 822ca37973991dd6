"""Deterministic sum fit test, and the interface shared with the GPA test.

A fit test answers "does this task fit on this node?". Two implementations
share one interface so that the node agent (and the LM) can pick either by
name from ``cellbed.policy.FIT_TESTS``::

    fits(node: Demand, task: Demand, capacity, params=None) -> bool | ndarray
    projection(node: Demand, task: Demand, params=None) -> ndarray

``projection`` gives the per-resource demand the test compares with
``capacity × max_util``, so that a rejection can report its numbers.

The sum test (this module)::

    fits  ⇔  for every resource r:  node.size_r + task.size_r ≤ capacity_r × max_util

``size`` is whatever deterministic amount the caller checks: used resources,
or requested resources (for example the RUS production-request rule, with
``max_util=0.9``). ``max_util`` defaults to 1.0: the accept rule of DESIGN §7
is "the projection does not overflow the host", and a forced migration checks
against total capacity.

Shapes: ``node.size`` is (R,) for one node (→ bool) or (N, R) for N nodes
(→ (N,) bool array); ``task.size`` is (R,); ``capacity`` is (R,) or (N, R).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from cellbed.policy.scores.asr import require_number

__all__ = ["DEFAULT_SUM_FIT", "Demand", "SumFitParams", "fits_within", "sum_fit", "sum_projection"]


def _nonneg_array(owner: str, field: str, value: Any, *, allow_inf: bool = False) -> NDArray[np.float64]:
    a = np.asarray(value, dtype=np.float64)
    ok = ~np.isnan(a) & (a >= 0)
    if not allow_inf:
        ok &= np.isfinite(a)
    if not ok.all():
        kind = "≥ 0 (inf allowed)" if allow_inf else "finite and ≥ 0"
        raise ValueError(f"{owner}.{field} must be {kind}, got {value!r}")
    return a


@dataclass(frozen=True, eq=False)
class Demand:
    """The demand of one task, or of the set of tasks on a node (then every
    field is the sum over the tasks, and ``cpu_samples`` the fewest).

    The GPA fields are ignored by the sum test. Units: ``size``, ``cpu_mean``
    and capacities share one unit per resource (e.g. normalised GCD units);
    ``cpu_var`` is in that unit squared.
    """

    size: ArrayLike
    """Deterministic amount per resource: (R,), or (N, R) for N nodes."""
    cpu_mean: ArrayLike = 0.0
    """GPA: μ (sum of μ_i) of the 1-s CPU usage samples; scalar, or (N,)."""
    cpu_var: ArrayLike = 0.0
    """GPA: σ² (sum of σ_i²) of the 1-s CPU usage samples; scalar, or (N,)."""
    cpu_samples: ArrayLike = 0.0
    """GPA: how many 1-s CPU samples μ and σ² rest on. For a sum of demands,
    the fewest among them; math.inf for the empty set (see :meth:`empty`)."""

    def __post_init__(self) -> None:
        size = _nonneg_array("Demand", "size", self.size)
        if size.ndim not in (1, 2) or size.shape[-1] < 1:
            raise ValueError(f"Demand.size must be (R,) or (N, R) with R ≥ 1, got shape {size.shape}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "cpu_mean", _nonneg_array("Demand", "cpu_mean", self.cpu_mean))
        object.__setattr__(self, "cpu_var", _nonneg_array("Demand", "cpu_var", self.cpu_var))
        samples = _nonneg_array("Demand", "cpu_samples", self.cpu_samples, allow_inf=True)
        object.__setattr__(self, "cpu_samples", samples)

    @classmethod
    def empty(cls, n_resources: int) -> Demand:
        """The demand of a node with no tasks: zero everywhere, and no task
        short of samples (cpu_samples = inf), so GPA applies to a first task."""
        return cls(np.zeros(n_resources), 0.0, 0.0, math.inf)

    @classmethod
    def total(cls, demands: list[Demand], n_resources: int) -> Demand:
        """Sum of task demands (the node's set); the empty list gives :meth:`empty`."""
        acc = cls.empty(n_resources)
        for d in demands:
            acc = acc + d
        return acc

    def __add__(self, other: Demand) -> Demand:
        if not isinstance(other, Demand):
            return NotImplemented
        return Demand(
            self.size + other.size,
            self.cpu_mean + other.cpu_mean,
            self.cpu_var + other.cpu_var,
            np.minimum(self.cpu_samples, other.cpu_samples),
        )


@dataclass(frozen=True)
class SumFitParams:
    """Parameters of the deterministic sum test."""

    max_util: float = 1.0
    """Fraction of capacity that may be filled, in (0, 1]."""

    def __post_init__(self) -> None:
        require_number("SumFitParams", "max_util", self.max_util, lo=0.0, hi=1.0, lo_open=True, unit="of capacity")


DEFAULT_SUM_FIT = SumFitParams()


def fits_within(projected: NDArray[np.float64], capacity: ArrayLike, max_util: float) -> bool | NDArray[np.bool_]:
    """``all_r projected_r ≤ capacity_r × max_util``; a bool for one node, (N,) for many."""
    cap = np.asarray(capacity, dtype=np.float64)
    if not np.all(np.isfinite(cap)) or np.any(cap < 0):
        raise ValueError("capacity must be finite and ≥ 0 for every resource")
    try:
        ok = np.all(projected <= cap * max_util, axis=-1)
    except ValueError as e:
        raise ValueError(f"capacity {cap.shape} does not match the demand {projected.shape}: {e}") from None
    if np.ndim(ok) == 0:
        return bool(ok)
    return ok


def sum_projection(node: Demand, task: Demand, params: SumFitParams | None = None) -> NDArray[np.float64]:
    """node.size + task.size, per resource: (R,) or (N, R)."""
    del params  # same interface as gpa_projection; nothing to tune here
    if task.size.ndim != 1 or task.size.shape[0] != node.size.shape[-1]:
        raise ValueError(f"task.size must be ({node.size.shape[-1]},), got {task.size.shape}")
    return node.size + task.size


def sum_fit(
    node: Demand, task: Demand, capacity: ArrayLike, params: SumFitParams | None = None
) -> bool | NDArray[np.bool_]:
    """Deterministic sum test: every resource of node + task ≤ capacity × max_util."""
    q = DEFAULT_SUM_FIT if params is None else params
    return fits_within(sum_projection(node, task, q), capacity, q.max_util)
