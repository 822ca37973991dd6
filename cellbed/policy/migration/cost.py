"""The pre-copy migration cost model (DESIGN §11).

Round 0 sends all of memory M at bandwidth B; each later round sends what was dirtied
during the previous one, ``min(D·t_prev, WSS)``; stop-and-copy happens once the remainder
can be sent within the downtime limit (or after ``max_rounds``, when QEMU would keep
iterating and libvirt's completion timeout takes over: we then report the forced
stop-and-copy). It predicts total time, bytes and downtime; ``calibrate`` fits the
effective bandwidth and the fixed setup cost to measured MigrationRecords.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

MIB = 1 << 20


@dataclasses.dataclass(frozen=True)
class PrecopyParams:
    bandwidth_mib_s: float = 1250.0   # 10 Gb/s; libvirt's default is unlimited
    max_downtime_ms: float = 300.0    # QEMU's default downtime limit
    setup_ms: float = 30.0            # fixed cost: connection, device state
    max_rounds: int = 30
    zero_page_share: float = 0.0      # share of non-WSS memory that is zero pages (sent almost free)


@dataclasses.dataclass(frozen=True)
class MigrationCost:
    total_ms: float
    downtime_ms: float
    bytes: int
    rounds: int
    converged: bool


def precopy(mem_mib: float, wss_mib: float, dirty_mib_s: float,
            p: PrecopyParams = PrecopyParams()) -> MigrationCost:
    """Cost of migrating a guest of *mem_mib* whose working set *wss_mib* is re-dirtied at
    *dirty_mib_s* (inf = as fast as memory allows, i.e. the whole WSS every round)."""
    if mem_mib < 0 or wss_mib < 0 or dirty_mib_s < 0 or p.bandwidth_mib_s <= 0:
        raise ValueError(f"precopy: sizes and rates must be ≥ 0 and bandwidth > 0 "
                         f"(mem {mem_mib}, wss {wss_mib}, dirty {dirty_mib_s}, bw {p.bandwidth_mib_s})")
    bw = p.bandwidth_mib_s
    wss = min(wss_mib, mem_mib)
    first = mem_mib - (mem_mib - wss) * p.zero_page_share
    t = first / bw                                  # round 0, seconds
    sent = first
    budget = p.max_downtime_ms / 1000.0 * bw        # MiB that fit in the downtime limit
    remaining = min(dirty_mib_s * t, wss) if dirty_mib_s > 0 else 0.0
    rounds = 1
    while remaining > budget and rounds < p.max_rounds:
        dt = remaining / bw
        sent += remaining
        t += dt
        remaining = min(dirty_mib_s * dt, wss) if not math.isinf(dirty_mib_s) else wss
        rounds += 1
    converged = remaining <= budget
    down = remaining / bw
    sent += remaining
    total = t + down + p.setup_ms / 1000.0
    return MigrationCost(total_ms=total * 1000.0, downtime_ms=down * 1000.0 + 0.0,
                         bytes=int(sent * MIB), rounds=rounds, converged=converged)


@dataclasses.dataclass(frozen=True)
class Calibration:
    params: PrecopyParams
    n: int
    mean_abs_error_pct: float   # |predicted − measured| / measured, total time
    accuracy_pct: float         # 100 − mean_abs_error_pct (Akoush et al. report ≈ 90%)


def calibrate(records: Sequence[dict], base: PrecopyParams = PrecopyParams()) -> Calibration:
    """Fit bandwidth and setup time (least squares on total time) to measured records, each a
    dict with mem_mib, wss_mib, dirty_mib_s, time_elapsed_ms (and data_total_bytes)."""
    rs = [r for r in records if r.get("time_elapsed_ms", 0) > 0 and r.get("data_total_bytes", 0) > 0]
    if len(rs) < 2:
        raise ValueError(f"calibrate: need at least 2 completed records with bytes, got {len(rs)}")
    # total ≈ setup + bytes/bw: linear in (1, MiB sent)
    xs = [r["data_total_bytes"] / MIB for r in rs]
    ys = [r["time_elapsed_ms"] / 1000.0 for r in rs]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    slope = max(slope, 1e-6)
    setup = max(0.0, my - slope * mx)
    params = dataclasses.replace(base, bandwidth_mib_s=1.0 / slope, setup_ms=setup * 1000.0)
    errs = []
    for r in rs:
        pred = precopy(r["mem_mib"], r.get("wss_mib", 0), max(0.0, r.get("dirty_mib_s", 0.0)), params).total_ms
        errs.append(abs(pred - r["time_elapsed_ms"]) / r["time_elapsed_ms"] * 100.0)
    mae = sum(errs) / len(errs)
    return Calibration(params, n, mae, max(0.0, 100.0 - mae))


def path_factor(src_rack: str, dst_rack: str, cross_rack: float = 1.5) -> float:
    """Rack-aware cost (MASB future work): moves across racks cost *cross_rack* times more."""
    return 1.0 if src_rack == dst_rack else cross_rack


def records_from_csv(rows: Iterable[dict]) -> list[dict]:
    out = []
    for r in rows:
        try:
            out.append({k: float(r[k]) for k in ("mem_mib", "wss_mib", "dirty_mib_s", "time_elapsed_ms",
                                                  "data_total_bytes") if k in r and r[k] != ""})
        except ValueError:
            continue
    return out
