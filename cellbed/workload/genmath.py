"""Numerical helpers of the GCD-shaped generator: the regularised incomplete beta, the normal CDF, grid weights, a monotone solver, apportionment and Gamma draws."""
from __future__ import annotations

import math
from typing import Sequence
import numpy as np


def betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """Regularised incomplete beta I_x(a, b), the CDF of Beta(a, b) at x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lfront = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(lfront)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1.0 - x) / b


def norm_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + ERF(z / math.sqrt(2.0)))


ERF = np.frompyfunc(math.erf, 1, 1)


def grid_weights(grid: np.ndarray, loc: float, spread: float) -> np.ndarray:
    """A log-normal discretised on the grid: w_i ∝ exp(-(ln g_i - loc)² / 2 spread²)."""
    lw = -((np.log(grid) - loc) ** 2) / (2.0 * spread * spread)
    w = np.exp(lw - lw.max())
    return w / w.sum()


def solve_monotone(fn, target: float, lo: float, hi: float, what: str) -> float:
    """Bisection for an increasing fn; ValueError if the target is out of reach."""
    flo, fhi = fn(lo), fn(hi)
    if not flo <= target <= fhi:
        raise ValueError(
            f"calibration infeasible: {what} needs {target:.6g}, reachable range is [{flo:.6g}, {fhi:.6g}]"
        )
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def apportion(shares: Sequence[float], n: int) -> list[int]:
    """Largest-remainder apportionment of n items to shares."""
    s = np.asarray(shares, dtype=float)
    s = s / s.sum()
    raw = s * n
    counts = np.floor(raw).astype(int)
    rem = n - counts.sum()
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[:rem]] += 1
    return counts.tolist()


def gamma1(rng: np.random.Generator, v: np.ndarray) -> np.ndarray:
    """Mean-one Gamma draws with variance v (v ≤ 1e-12 gives exactly 1)."""
    v = np.asarray(v, dtype=float)
    out = np.ones(v.shape)
    pos = v > 1e-12
    if pos.any():
        vp = v[pos]
        out[pos] = rng.gamma(1.0 / vp, vp)
    return out


MU_MIN = 1e-4
"""Floor on a task's mean CPU: keeps the Gamma cascade finite."""
