"""Fitting the migration cost model (cost.py) to real migrations (costdata.py: the records, the
split rule and the errors), and validating it on the held-out configurations. Pure: records in,
parameters and errors out; no I/O.

**Fit** (:func:`fit_params`), in physical stages, each a closed form or a one-dimensional search
(a coarse grid, then golden section), on the fit set only (succeeded migrations):

1. the guest's non-zero memory: least squares of idle guests' bytes on (1, M, max(0, WSS − overlap)),
   the overlap on a grid; libvirt's iteration offset: an idle guest's migration is one pass;
2. the limit's efficiency: QEMU's own measured rate (memory_bps) over the limit;
3. by coordinate descent, each stage on the others' current values, ten sweeps:
   the link: least squares of the time on (1, MiB sent at the link's own rate, zero MiB scanned,
   passes after the first); the dirty-rate scale, round 0's re-sent share and the convergence
   threshold: searches on the relative (log) errors of bytes (and iterations); the downtime: least
   squares of what the rest leaves, weighted by 1 / measured, on (1, the tail), its power on a grid;
4. post-copy: the switch delay and post-copy's own downtime;
5. the wall-time overhead: the median of (wall − libvirt's time).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Callable, Sequence

import numpy as np

from cellbed.policy.migration.cost import MIB, PrecopyParams, link_bandwidth, nonzero_mib
from cellbed.policy.migration.costdata import (CSV_NEEDS, HOLDOUT_EVERY, MODES, QUANTITIES, Record, pairs,
                                               config_key, error_summary, full_summary, percentile, predict,
                                               record_from_row, records_from_rows, split)

__all__ = ["CSV_NEEDS", "HOLDOUT_EVERY", "MODES", "QUANTITIES", "FitResult", "Record", "config_key", "error_summary",
           "fit", "fit_params", "full_summary", "percentile", "predict", "record_from_row", "records_from_rows",
           "split"]


@dataclasses.dataclass(frozen=True)
class FitResult:
    params: PrecopyParams
    n_fit: int
    n_held_out: int
    n_fit_configs: int
    n_held_out_configs: int
    held_out_keys: tuple[str, ...]
    fit_errors: dict
    held_out_errors: dict


def _lstsq(rows: list[list[float]], ys: list[float]) -> list[float]:
    coef, *_ = np.linalg.lstsq(np.asarray(rows, dtype=float), np.asarray(ys, dtype=float), rcond=None)
    return [float(c) for c in coef]


def _golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 40) -> float:
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def _log_loss(records: Sequence[Record], p: PrecopyParams, quantities: Sequence[str]) -> float:
    s = 0.0
    for r in records:
        for q, (pred, meas) in pairs(r, predict(r, p)).items():
            if q in quantities and meas > 0 and pred > 0:
                s += math.log(pred / meas) ** 2
    return s


def _fit_resident(idle: Sequence[Record], p: PrecopyParams) -> PrecopyParams:
    """Least squares of idle guests' bytes on (1, M, max(0, WSS − overlap)), the overlap from a
    grid of whole MiB up to the smallest working set above it."""
    if len({(r.mem_mib, r.wss_mib) for r in idle}) < 3:
        return p
    ys = [r.bytes / MIB for r in idle]
    best = None
    for overlap in range(0, int(max(r.wss_mib for r in idle))):
        rows = [[1.0, r.mem_mib, max(0.0, r.wss_mib - overlap)] for r in idle]
        if len({row[2] for row in rows}) < 2:
            break
        coef = _lstsq(rows, ys)
        sse = sum((y - sum(c * x for c, x in zip(coef, row))) ** 2 for y, row in zip(ys, rows))
        if best is None or sse < best[0] - 1e-9:
            best = (sse, overlap, coef)
    _, overlap, (base, mshare, wshare) = best
    return dataclasses.replace(p, resident_base_mib=max(0.0, base), resident_wss_share=max(0.0, wshare),
                               resident_mem_share=max(0.0, mshare), resident_overlap_mib=float(overlap))


def _fit_limit(rs: Sequence[Record], p: PrecopyParams) -> tuple[PrecopyParams, bool]:
    """The limit's efficiency as QEMU measured it: the median of its own rate (memory_bps) / the
    limit over limited migrations. (The link's own rate comes from the time: QEMU measures it over
    its last pass only, and a short migration does not reach its full rate.)"""
    lim = [r.bps_mib_s / r.bandwidth_mib_s for r in rs if r.bandwidth_mib_s > 0 and r.mode == "precopy"
           and r.bps_mib_s > 0]
    if lim:
        return dataclasses.replace(p, limit_efficiency=statistics.median(lim)), True
    return p, False


def _fit_time(rs: Sequence[Record], p: PrecopyParams, limit_known: bool) -> PrecopyParams:
    """Least squares of the migrations' time, less the fixed downtime and, under a known limit,
    less the MiB sent at the limited rate, on (1, MiB sent at the link's own rate, zero MiB
    scanned, passes after the first), the volumes from the model as it stands."""
    pre = [r for r in rs if r.mode != "postcopy" and (limit_known or r.bandwidth_mib_s <= 0)]
    if len(pre) < 4:
        return p
    feats, ys = [], []
    for r in pre:
        c = predict(r, p)
        zero = r.mem_mib - nonzero_mib(r.mem_mib, r.wss_mib, p)
        limited = 0 < r.bandwidth_mib_s * p.limit_efficiency < p.bandwidth_mib_s
        sent = c.bytes / MIB
        feats.append([1.0, 0.0 if limited else sent, zero, float(c.rounds - 1)])
        ys.append(r.time_ms / 1000.0 - p.downtime_fixed_ms / 1000.0
                  - (sent / (r.bandwidth_mib_s * p.limit_efficiency) if limited else 0.0))
    cols = [0, 1, 2, 3]
    while True:
        coef = dict(zip(cols, _lstsq([[f[i] for i in cols] for f in feats], ys)))
        bad = [i for i in (2, 3) if i in coef and coef[i] < 0]
        if not bad:
            break
        cols.remove(bad[0])                    # a negative cost is noise: leave that term out
    p = dataclasses.replace(p, bandwidth_mib_s=1.0 / max(coef[1], 1e-6))
    return dataclasses.replace(p, setup_ms=max(0.0, coef[0] * 1000.0),
                               zero_scan_mib_s=1.0 / coef[2] if coef.get(2, 0.0) > 0 else math.inf,
                               iteration_ms=coef.get(3, 0.0) * 1000.0)


def _fit_scalar(rs: Sequence[Record], p: PrecopyParams, name: str, lo: float, hi: float,
                quantities: Sequence[str]) -> PrecopyParams:
    """A coarse grid over [lo, hi] (the loss need not be unimodal), then a golden-section search
    between the best grid point's neighbours."""
    if not rs:
        return p
    loss = lambda v: _log_loss(rs, dataclasses.replace(p, **{name: v}), quantities)  # noqa: E731
    grid = [lo + (hi - lo) * i / 12 for i in range(13)]
    k = min(range(len(grid)), key=lambda i: loss(grid[i]))
    best = _golden(loss, grid[max(0, k - 1)], grid[min(len(grid) - 1, k + 1)], steps=24)
    return dataclasses.replace(p, **{name: best if loss(best) <= loss(grid[k]) else grid[k]})


def _fit_downtime(rs: Sequence[Record], p: PrecopyParams) -> PrecopyParams:
    """Least squares, weighted by 1 / measured, of what the rest of the model leaves of the
    pre-copy migrations' downtime on (1, tail · share ** power), the power from a grid."""
    pre = [r for r in rs if r.mode != "postcopy"]
    if len(pre) >= 3:
        base = dataclasses.replace(p, downtime_fixed_ms=0.0, downtime_tail_share=0.0)
        ys = [r.downtime_ms - predict(r, base).downtime_ms for r in pre]
        # the tail at share 1, in ms: min(M, limit · rate) / the link's unlimited rate
        tails = [min(r.mem_mib, (r.max_downtime_ms or p.max_downtime_ms) / 1000.0
                     * link_bandwidth(p, r.bandwidth_mib_s)) / p.bandwidth_mib_s * 1000.0 for r in pre]
        shares = [nonzero_mib(r.mem_mib, r.wss_mib, p) / r.mem_mib for r in pre]
        ws = [1.0 / max(r.downtime_ms, 1.0) for r in pre]       # relative errors: weigh by 1 / measured
        best = None
        for power in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0):
            rows = [[1.0, tail * sh ** power] for tail, sh in zip(tails, shares)]
            if len({row[1] for row in rows}) > 1:
                fixed, share = _lstsq([[w * x for x in row] for w, row in zip(ws, rows)],
                                      [w * y for w, y in zip(ws, ys)])
            else:
                fixed, share = statistics.median(ys), 0.0
            fixed, share = max(0.0, fixed), max(0.0, share)
            sse = sum((w * (y - fixed - share * row[1])) ** 2 for w, y, row in zip(ws, ys, rows))
            if best is None or sse < best[0]:
                best = (sse, fixed, share, power)
        _, fixed, share, power = best
        p = dataclasses.replace(p, downtime_fixed_ms=fixed, downtime_tail_share=share, downtime_tail_power=power)
    return p


def _postcopy_downtime(post: Sequence[Record], p: PrecopyParams) -> PrecopyParams:
    """The median downtime of the post-copy migrations that the model says switched (the record's
    postcopy_switched says only that the switch was asked for: a pre-copy that had just completed
    ignores it)."""
    down = [r.downtime_ms for r in post if predict(r, p).postcopy_switched]
    return dataclasses.replace(p, postcopy_downtime_ms=statistics.median(down)) if down else p


def _fit_postcopy(rs: Sequence[Record], p: PrecopyParams) -> PrecopyParams:
    """Post-copy's switch delay (a grid, then golden section) on the log errors of the post-copy
    migrations' downtime and time, each candidate with its own post-copy downtime."""
    post = [r for r in rs if r.mode == "postcopy"]
    if not post:
        return p

    def at(ms: float) -> PrecopyParams:
        return _postcopy_downtime(post, dataclasses.replace(p, postcopy_switch_ms=ms))
    loss = lambda ms: _log_loss(post, at(ms), ("downtime", "time"))  # noqa: E731
    grid = [0.0, 25.0, 50.0, 100.0, 150.0, 200.0, 300.0, 400.0, 600.0, 800.0, 1000.0]
    k = min(range(len(grid)), key=lambda i: loss(grid[i]))
    best = _golden(loss, grid[max(0, k - 1)], grid[min(len(grid) - 1, k + 1)], steps=20)
    return at(best if loss(best) <= loss(grid[k]) else grid[k])


def _coordinates(rs: Sequence[Record], p: PrecopyParams, limit_known: bool, sweeps: int = 10) -> PrecopyParams:
    """The link and the dynamics, by coordinate descent: each stage on the others' current values."""
    dirty = [r for r in rs if r.dirty_mib_s > 0 and r.mode == "precopy"]
    limited = [r for r in rs if r.bandwidth_mib_s > 0 and r.mode == "precopy"]
    for _ in range(sweeps):
        p = _fit_time(rs, p, limit_known)
        if not limit_known:
            p = _fit_scalar(limited, p, "limit_efficiency", 0.2, 2.0, ("time",))
        p = _fit_scalar(dirty, p, "dirty_scale", 0.05, 3.0, ("bytes",))
        p = _fit_scalar(dirty, p, "first_pass_tail", 0.0, 1.0, ("bytes",))
        p = _fit_scalar(dirty, p, "converge_ms", 0.0, 300.0, ("iterations", "bytes"))
        p = _fit_downtime(rs, p)
    return p


def fit_params(rs: Sequence[Record], base: PrecopyParams = PrecopyParams()) -> PrecopyParams:
    """The stages of the module docstring, on *rs* (the fit set)."""
    if len(rs) < 3:
        raise ValueError(f"fit: need at least 3 succeeded migrations, got {len(rs)}")
    p = dataclasses.replace(base, max_rounds=max(base.max_rounds, 60))
    maxed = [r.dirty_mib_s for r in rs if math.isinf(r.dirty_cfg) and math.isfinite(r.dirty_mib_s)]
    if maxed:
        p = dataclasses.replace(p, max_dirty_mib_s=statistics.median(maxed))
    idle = [r for r in rs if r.dirty_mib_s == 0]
    p = _fit_resident(idle, p)
    # an idle guest's migration is one pass: libvirt's count of iterations beyond it is its offset
    p = dataclasses.replace(p, iteration_offset=int(round(statistics.median(r.iterations - 1 for r in idle or rs))))
    p, limit_known = _fit_limit(rs, p)
    p = _fit_postcopy(rs, _coordinates(rs, p, limit_known))
    walls = [r.wall_ms - r.time_ms for r in rs if math.isfinite(r.wall_ms) and r.wall_ms > 0]
    return dataclasses.replace(p, wall_overhead_ms=max(0.0, statistics.median(walls)) if walls else 0.0)


def fit(records: Sequence[Record], every: int = HOLDOUT_EVERY, base: PrecopyParams = PrecopyParams()) -> FitResult:
    """Split *records* (the module's rule), fit on one part, and measure the errors on both."""
    fit_set, held = split(records, every)
    p = fit_params(fit_set, base)
    return FitResult(params=p, n_fit=len(fit_set), n_held_out=len(held),
                     n_fit_configs=len({config_key(r) for r in fit_set}),
                     n_held_out_configs=len({config_key(r) for r in held}),
                     held_out_keys=tuple(sorted({config_key(r) for r in held})),
                     fit_errors=full_summary(fit_set, p), held_out_errors=full_summary(held, p))
