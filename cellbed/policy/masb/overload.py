"""Overload detection (DESIGN §7): used resources above max_util of capacity, or the RUS
rule broken (the *requested* resources of production tasks above max_util of capacity).
Every verdict carries its numbers."""
from __future__ import annotations

import dataclasses

import numpy as np

RESOURCES = ("cpu", "mem")


@dataclasses.dataclass(frozen=True)
class HostLoad:
    capacity: tuple[float, float]          # cores, MiB
    used: tuple[float, float]              # measured use incl. tasks migrating in and out
    prod_requested: tuple[float, float]    # requests of production tasks

    def used_pct(self) -> np.ndarray:
        return 100.0 * np.asarray(self.used) / np.asarray(self.capacity)


@dataclasses.dataclass(frozen=True)
class Verdict:
    overloaded: bool
    reasons: tuple[str, ...]               # e.g. "cpu used 0.97 > 0.90 × 1.00 cores"
    excess: tuple[float, float]            # how much must go, per resource (≥ 0)

    def __bool__(self) -> bool:
        return self.overloaded


def check(load: HostLoad, max_util: float = 0.9) -> Verdict:
    reasons, excess = [], [0.0, 0.0]
    for i, r in enumerate(RESOURCES):
        limit = max_util * load.capacity[i]
        if load.used[i] > limit:
            reasons.append(f"{r} used {load.used[i]:.3f} > {max_util:g} × {load.capacity[i]:.3f}")
            excess[i] = max(excess[i], load.used[i] - limit)
        if load.prod_requested[i] > limit:
            reasons.append(f"RUS: production {r} requested {load.prod_requested[i]:.3f} > "
                           f"{max_util:g} × {load.capacity[i]:.3f}")
    return Verdict(bool(reasons), tuple(reasons), (excess[0], excess[1]))


def spike(prev_used_pct: np.ndarray | None, used_pct: np.ndarray, threshold_pct: float = 10.0) -> str:
    """'' or a description of the resources that rose by more than *threshold_pct* points
    between two samples (a Resource Usage Spike)."""
    if prev_used_pct is None:
        return ""
    rise = np.asarray(used_pct) - np.asarray(prev_used_pct)
    hits = [f"{r} +{rise[i]:.1f} points" for i, r in enumerate(RESOURCES) if rise[i] > threshold_pct]
    return ", ".join(hits)
