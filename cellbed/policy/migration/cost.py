"""The pre-copy migration cost model (DESIGN §11).

Round 0 sends all of memory M at bandwidth B; each later round sends what was dirtied
during the previous one, ``min(D·t_prev, WSS)``; stop-and-copy happens once the remainder
can be sent within the downtime limit (or after ``max_rounds``, when QEMU would keep
iterating and libvirt's completion timeout takes over: we then report the forced
stop-and-copy). It predicts total time, bytes, downtime and iterations.

:func:`estimate` adds what a calibration (cellbed/policy/migration/costfit.py, fitted to real
migrations by ``cellctl bench migration --fit``) knows about a real link and guest; with the
defaults of :class:`PrecopyParams` it is exactly the plain model above:

- the bandwidth under a limit L is ``min(limit_efficiency·L, bandwidth_mib_s)``;
- round 0 sends only the guest's non-zero pages, ``resident_base_mib + resident_mem_share·M +
  resident_wss_share·max(0, WSS − resident_overlap_mib)`` (within [WSS, M]: the first MiB of the
  working set reuse pages the guest wrote at boot), and scans the zero pages at ``zero_scan_mib_s``;
- the guest dirties ``dirty_scale`` times its measured rate (``max``: ``max_dirty_mib_s``), distinct
  pages up to its WSS; of round 0's dirt, the share ``first_pass_tail`` × (downtime limit × B) / M
  falls on pages round 0 had not sent yet and costs nothing more;
- auto-converge throttles the guest's vCPU as QEMU does: at every pass that dirtied more than
  half of what it sent, every second time, the throttle rises (20 %, then +10 % a step, ≤ 99 %);
- post-copy switches after the first pass when pre-copy has not converged and a pass still has
  more than ``postcopy_switch_ms`` of sending left (the switch is requested when the job is seen in
  its second pass; a pre-copy that ends sooner completes as pre-copy): the guest stops for
  ``postcopy_downtime_ms``, and the pages still dirty follow on demand at B;
- the downtime is ``downtime_fixed_ms`` + (the last remainder + a tail) / the link's unlimited
  rate (QEMU lifts the bandwidth limit for the stop-and-copy). The tail: QEMU stops the guest
  while the pages still to scan, zero or not, fit the downtime limit at its measured rate, so
  even an idle guest is stopped for part of the limit; the tail is ``downtime_tail_share`` ×
  (non-zero share of memory) ** ``downtime_tail_power`` × min(M, limit × B);
- every pass after the first costs ``iteration_ms`` more (a dirty-bitmap sync under TCG);
- a pass converges once what it leaves can be sent in ``converge_ms`` (QEMU completes at a sync
  only when the pages found dirty fit in what is left of its limit after the unsent tail: about
  one chunk of sending, far less than the limit itself); < 0: the downtime limit (the plain model);
- libvirt counts ``iteration_offset`` more iterations than passes (its dirty-bitmap syncs);
- the migrate call takes ``wall_overhead_ms`` more than libvirt's elapsed time (the
  destination's QEMU starts first).

``calibrate`` is the older two-parameter fit (bandwidth and setup cost from total time).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

MIB = 1 << 20

THROTTLE_INITIAL = 0.20     # QEMU cpu-throttle-initial
THROTTLE_STEP = 0.10        # QEMU cpu-throttle-increment
THROTTLE_MAX = 0.99         # QEMU max-cpu-throttle
THROTTLE_TRIGGER = 0.50     # QEMU throttle-trigger-threshold: dirtied / sent in a pass


@dataclasses.dataclass(frozen=True)
class PrecopyParams:
    bandwidth_mib_s: float = 1250.0   # 10 Gb/s; libvirt's default is unlimited
    max_downtime_ms: float = 300.0    # QEMU's default downtime limit
    setup_ms: float = 30.0            # fixed cost: connection, device state
    max_rounds: int = 30
    zero_page_share: float = 0.0      # share of non-WSS memory that is zero pages (sent almost free)
    # --- calibrated terms (see the module docstring); the defaults give the plain model ---------
    limit_efficiency: float = 1.0     # bandwidth under a limit L: min(L·this, bandwidth_mib_s)
    resident_base_mib: float = -1.0   # non-zero pages: < 0 = all of memory (less zero_page_share)
    resident_wss_share: float = 1.0
    resident_mem_share: float = 0.0
    resident_overlap_mib: float = 0.0  # the first MiB of the WSS land on pages that were non-zero anyway
    first_pass_tail: float = 0.0      # share of round 0's last budget-worth of pages sent after the guest dirtied them
    zero_scan_mib_s: float = math.inf  # zero pages scanned at this rate, MiB/s (inf: free)
    dirty_scale: float = 1.0          # effective / measured dirty rate
    max_dirty_mib_s: float = math.inf  # what dirty = max means, MiB/s (inf: the whole WSS each pass)
    downtime_fixed_ms: float = 0.0
    downtime_tail_share: float = 0.0  # share of the downtime limit spent stopped on top ...
    downtime_tail_power: float = 1.0  # ... times (non-zero share of memory) ** this
    iteration_ms: float = 0.0         # cost of every pass after the first (a dirty-bitmap sync), ms
    converge_ms: float = -1.0         # converged once a pass leaves at most this much sending; < 0: the limit
    postcopy_downtime_ms: float = 0.0
    postcopy_switch_ms: float = 0.0   # post-copy starts only while a pass still has this much left to send
    iteration_offset: int = 0
    wall_overhead_ms: float = 0.0


@dataclasses.dataclass(frozen=True)
class MigrationCost:
    total_ms: float
    downtime_ms: float
    bytes: int
    rounds: int
    converged: bool
    iterations: int = 0               # as libvirt counts them: rounds + iteration_offset
    wall_ms: float = 0.0              # the migrate call: total + wall_overhead_ms
    postcopy_switched: bool = False


def nonzero_mib(mem_mib: float, wss_mib: float, p: PrecopyParams) -> float:
    """MiB that round 0 really sends: the guest's non-zero pages."""
    wss = min(wss_mib, mem_mib)
    if p.resident_base_mib < 0:
        return mem_mib - (mem_mib - wss) * p.zero_page_share
    n = (p.resident_base_mib + p.resident_wss_share * max(0.0, wss - p.resident_overlap_mib)
         + p.resident_mem_share * mem_mib)
    return min(mem_mib, max(wss, n))


def link_bandwidth(p: PrecopyParams, bandwidth_limit_mib_s: float = 0.0) -> float:
    if bandwidth_limit_mib_s > 0:
        return min(p.limit_efficiency * bandwidth_limit_mib_s, p.bandwidth_mib_s)
    return p.bandwidth_mib_s


def _dirtied(rate: float, seconds: float, wss: float) -> float:
    """Distinct MiB dirtied in *seconds* (the guest rewrites its WSS round-robin)."""
    return min(rate * seconds, wss) if rate > 0 and seconds > 0 else 0.0


def estimate(mem_mib: float, wss_mib: float, dirty_mib_s: float, p: PrecopyParams = PrecopyParams(), *,
             bandwidth_limit_mib_s: float = 0.0, max_downtime_ms: float = 0.0, auto_converge: bool = False,
             postcopy: bool = False) -> MigrationCost:
    """Cost of migrating a guest of *mem_mib* whose working set *wss_mib* is re-dirtied at
    *dirty_mib_s* (inf = as fast as it can: ``max_dirty_mib_s``), with a bandwidth limit
    (0 = none), a downtime limit (0 = ``p.max_downtime_ms``), auto-converge and post-copy."""
    if (mem_mib < 0 or wss_mib < 0 or dirty_mib_s < 0 or p.bandwidth_mib_s <= 0 or bandwidth_limit_mib_s < 0
            or max_downtime_ms < 0 or math.isnan(dirty_mib_s)):
        raise ValueError(f"precopy: sizes and rates must be ≥ 0 and bandwidth > 0 "
                         f"(mem {mem_mib}, wss {wss_mib}, dirty {dirty_mib_s}, bw {p.bandwidth_mib_s}, "
                         f"limit {bandwidth_limit_mib_s}, max downtime {max_downtime_ms})")
    bw = link_bandwidth(p, bandwidth_limit_mib_s)
    wss = min(wss_mib, mem_mib)
    rate = p.dirty_scale * (p.max_dirty_mib_s if math.isinf(dirty_mib_s) else dirty_mib_s)
    whole = math.isinf(rate)                       # the whole WSS is dirty after any pass
    first = nonzero_mib(mem_mib, wss, p)
    t = first / bw + ((mem_mib - first) / p.zero_scan_mib_s if math.isfinite(p.zero_scan_mib_s) else 0.0)
    sent = first
    limit_s = (max_downtime_ms or p.max_downtime_ms) / 1000.0
    budget = limit_s * bw                          # MiB that fit in the downtime limit
    enough = budget if p.converge_ms < 0 else p.converge_ms / 1000.0 * bw
    remaining = wss if whole else _dirtied(rate, t, wss)
    remaining *= max(0.0, 1.0 - p.first_pass_tail * budget / mem_mib) if mem_mib > 0 else 1.0
    rounds, throttle, high, passed = 1, 0.0, 0, first
    switched = False
    while remaining > enough and rounds < p.max_rounds:
        if auto_converge and remaining > THROTTLE_TRIGGER * passed:
            high += 1
            if high >= 2:
                high = 0
                throttle = THROTTLE_INITIAL if throttle == 0 else min(THROTTLE_MAX, throttle + THROTTLE_STEP)
        if postcopy and remaining > bw * p.postcopy_switch_ms / 1000.0:
            switched = True
            break
        dt = remaining / bw
        sent += remaining
        passed = remaining
        t += dt
        r = rate * (1.0 - throttle)
        remaining = wss if whole else _dirtied(r, dt, wss)
        rounds += 1
    sent += remaining
    t += p.iteration_ms / 1000.0 * (rounds - 1)
    if switched:
        down_s = p.postcopy_downtime_ms / 1000.0
        total = t + down_s + remaining / bw
    else:
        # QEMU lifts the bandwidth limit for the stop-and-copy: the guest is stopped for the
        # remainder, and for the unsent tail of pages that still fitted the limit, at the link's rate
        stop_s = p.downtime_fixed_ms / 1000.0 + remaining / p.bandwidth_mib_s
        share = first / mem_mib if mem_mib > 0 else 0.0
        tail = p.downtime_tail_share * share ** p.downtime_tail_power * min(mem_mib, budget)
        down_s = stop_s + tail / p.bandwidth_mib_s
        total = t + stop_s
    total_ms = (total + p.setup_ms / 1000.0) * 1000.0
    return MigrationCost(total_ms=total_ms, downtime_ms=down_s * 1000.0, bytes=int(sent * MIB), rounds=rounds,
                         converged=switched or remaining <= enough, iterations=rounds + p.iteration_offset,
                         wall_ms=total_ms + p.wall_overhead_ms, postcopy_switched=switched)


def precopy(mem_mib: float, wss_mib: float, dirty_mib_s: float,
            p: PrecopyParams = PrecopyParams()) -> MigrationCost:
    """Cost of migrating a guest of *mem_mib* whose working set *wss_mib* is re-dirtied at
    *dirty_mib_s* (inf = as fast as memory allows, i.e. the whole WSS every round)."""
    return estimate(mem_mib, wss_mib, dirty_mib_s, p)


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
