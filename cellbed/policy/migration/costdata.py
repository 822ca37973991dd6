"""Migration records for the cost model's fit (costfit.py), the split into fit and held-out
configurations, and the error statistics. Pure: no I/O.

Records are `cellctl bench migration` rows (CSV dicts or the bench's own rows). A record's
*configuration* is what the experimenter chose: mode (precopy, auto-converge, postcopy), memory,
working set, configured dirty rate, bandwidth limit, downtime limit and TLS. Its dirty rate for
the model is the guest's own measurement (``guest_dirty_mib_s``), or the configured one when the
guest did not say (-1, or 0 while the configured rate is above 0: the workload had not started).

**Split rule** (:func:`split`): within each mode, the configurations are ordered by the SHA-256
of their key (:func:`config_key`); every ``every``-th of them (the 4th, 8th, ...) is held out, with
all its repeats. The fit never sees a held-out configuration, and every mode with at least
``every`` configurations is validated.

**Errors**: per quantity (time, bytes sent, downtime, iterations, the call's wall time), the
relative error |predicted − measured| / measured per migration; per configuration against the
median of its repeats; and the repeats' own noise (a repeat against the median of the others),
the floor of any model's per-migration error on the box that measured them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

from cellbed.policy.migration.cost import MIB, MigrationCost, PrecopyParams, estimate

MODES = ("precopy", "auto-converge", "postcopy")
QUANTITIES = ("time", "bytes", "downtime", "iterations", "wall")
HOLDOUT_EVERY = 4
CSV_NEEDS = ("mem_mib", "wss_mib", "dirty_mib_s", "bandwidth_mib_s", "outcome", "time_elapsed_ms", "downtime_ms",
             "memory_processed_bytes", "memory_iteration")


@dataclasses.dataclass(frozen=True)
class Record:
    """One migration: its configuration, the dirty rate the model uses, and what was measured."""

    mem_mib: float
    wss_mib: float
    dirty_cfg: float                # configured, MiB/s; inf = max
    dirty_mib_s: float              # for the model: measured (or configured), MiB/s; inf = max
    bandwidth_mib_s: float          # limit; 0 = none
    max_downtime_ms: float          # 0 = QEMU's default
    mode: str
    tls: bool
    time_ms: float
    bytes: float                    # memory_processed_bytes
    downtime_ms: float
    iterations: float
    wall_ms: float
    switched: bool = False
    succeeded: bool = True
    bps_mib_s: float = math.nan     # QEMU's own measured transfer rate (memory_bps), MiB/s


def _num(v: Any, default: float = math.nan) -> float:
    if v is None or v == "":
        return default
    if isinstance(v, str) and v.strip().lower() in ("max", "inf"):
        return math.inf
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def _flag(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "on"))


def record_from_row(r: Mapping[str, Any]) -> Record:
    """A Record from one bench row; ValueError naming the field when a needed one is missing."""
    for k in CSV_NEEDS:
        if k not in r:
            raise ValueError(f"record has no {k}")
    cfg = _num(r["dirty_mib_s"])
    cfg = math.inf if cfg < 0 else cfg                 # the record's -1 = as fast as possible
    guest = _num(r.get("guest_dirty_mib_s"), -1.0)
    dirty = cfg if guest < 0 or (guest == 0 and cfg > 0) else guest
    mode = "postcopy" if _flag(r.get("postcopy")) else "auto-converge" if _flag(r.get("auto_converge")) else "precopy"
    out = Record(mem_mib=_num(r["mem_mib"]), wss_mib=_num(r["wss_mib"]), dirty_cfg=cfg, dirty_mib_s=dirty,
                 bandwidth_mib_s=_num(r["bandwidth_mib_s"], 0.0), max_downtime_ms=_num(r.get("max_downtime_ms"), 0.0),
                 mode=mode, tls=_flag(r.get("tls")), time_ms=_num(r["time_elapsed_ms"]),
                 bytes=_num(r["memory_processed_bytes"]), downtime_ms=_num(r["downtime_ms"]),
                 iterations=_num(r["memory_iteration"]), wall_ms=_num(r.get("wall_ms")),
                 switched=_flag(r.get("postcopy_switched")), succeeded=r["outcome"] == "succeeded",
                 bps_mib_s=_num(r.get("memory_bps")) / MIB)
    for k in ("mem_mib", "wss_mib", "time_ms", "bytes", "downtime_ms", "iterations", "bandwidth_mib_s",
              "max_downtime_ms"):
        if not math.isfinite(getattr(out, k)) or getattr(out, k) < 0:
            raise ValueError(f"record field {k}={getattr(out, k)!r} is not a finite number ≥ 0")
    return out


def records_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Record]:
    """The succeeded migrations of *rows* (the others say nothing about a completed migration's cost)."""
    recs = [record_from_row(r) for r in rows if r.get("outcome") == "succeeded"]
    return [rec for rec in recs if rec.time_ms > 0 and rec.bytes > 0]


# --- the split ---------------------------------------------------------------------------
def config_key(r: Record) -> str:
    d = "max" if math.isinf(r.dirty_cfg) else f"{r.dirty_cfg:g}"
    return (f"{r.mode}|mem={r.mem_mib:g}|wss={r.wss_mib:g}|dirty={d}|bw={r.bandwidth_mib_s:g}"
            f"|downtime={r.max_downtime_ms:g}|tls={int(r.tls)}")


def split(records: Sequence[Record], every: int = HOLDOUT_EVERY) -> tuple[list[Record], list[Record]]:
    """(fit, held out) by the module's split rule."""
    held: set[str] = set()
    for mode in MODES:
        keys = sorted({config_key(r) for r in records if r.mode == mode},
                      key=lambda k: hashlib.sha256(k.encode()).hexdigest())
        held |= {k for i, k in enumerate(keys) if i % every == every - 1}
    return ([r for r in records if config_key(r) not in held], [r for r in records if config_key(r) in held])


# --- prediction and errors ---------------------------------------------------------------
def predict(r: Record, p: PrecopyParams) -> MigrationCost:
    return estimate(r.mem_mib, r.wss_mib, r.dirty_mib_s, p, bandwidth_limit_mib_s=r.bandwidth_mib_s,
                    max_downtime_ms=r.max_downtime_ms, auto_converge=r.mode == "auto-converge",
                    postcopy=r.mode == "postcopy")


def pairs(r: Record, c: MigrationCost) -> dict[str, tuple[float, float]]:
    """quantity -> (predicted by *c*, measured by *r*)."""
    return {"time": (c.total_ms, r.time_ms), "bytes": (c.bytes / MIB, r.bytes / MIB),
            "downtime": (c.downtime_ms, r.downtime_ms), "iterations": (float(c.iterations), r.iterations),
            "wall": (c.wall_ms, r.wall_ms)}


def rel_errors(records: Sequence[Record], p: PrecopyParams) -> dict[str, list[float]]:
    """quantity -> |predicted − measured| / measured, in percent, one per record that measured it."""
    out: dict[str, list[float]] = {q: [] for q in QUANTITIES}
    for r in records:
        for q, (pred, meas) in pairs(r, predict(r, p)).items():
            if meas > 0 and math.isfinite(meas):
                out[q].append(abs(pred - meas) / meas * 100.0)
    return out


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    s = sorted(xs)
    if not s:
        return math.nan
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _stats(errs: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {q: {"n": len(e), "median_pct": percentile(e, 50), "p90_pct": percentile(e, 90),
                "max_pct": max(e) if e else math.nan} for q, e in errs.items()}


def _by_config(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(config_key(r), []).append(r)
    return out


def config_errors(records: Sequence[Record], p: PrecopyParams) -> dict[str, list[float]]:
    """quantity -> |predicted − median of the configuration's repeats| / that median, in percent,
    one per configuration: the model's error once repeat-to-repeat noise is averaged out."""
    out: dict[str, list[float]] = {q: [] for q in QUANTITIES}
    for grp in _by_config(records).values():
        preds = {q: v[0] for q, v in pairs(grp[0], predict(grp[0], p)).items()}
        for q in QUANTITIES:
            meas = [v for v in (pairs(r, predict(r, p))[q][1] for r in grp) if v > 0 and math.isfinite(v)]
            if meas:
                m = statistics.median(meas)
                out[q].append(abs(preds[q] - m) / m * 100.0)
    return out


def noise_errors(records: Sequence[Record]) -> dict[str, list[float]]:
    """quantity -> |a repeat − the median of its configuration's other repeats| / that median, in
    percent: how well one migration predicts another of the same configuration, the floor of any
    model's per-migration error on this box."""
    out: dict[str, list[float]] = {q: [] for q in QUANTITIES}
    measured = lambda r: {"time": r.time_ms, "bytes": r.bytes, "downtime": r.downtime_ms,  # noqa: E731
                          "iterations": r.iterations, "wall": r.wall_ms}
    for grp in _by_config(records).values():
        for i, r in enumerate(grp):
            for q, x in measured(r).items():
                others = [measured(o)[q] for j, o in enumerate(grp) if j != i]
                others = [v for v in others if v > 0 and math.isfinite(v)]
                if others and x > 0 and math.isfinite(x):
                    m = statistics.median(others)
                    out[q].append(abs(x - m) / m * 100.0)
    return out


def error_summary(records: Sequence[Record], p: PrecopyParams) -> dict[str, dict[str, float]]:
    """Per migration: n, median, p90 and max of the relative error, in percent, per quantity."""
    return _stats(rel_errors(records, p))


def full_summary(records: Sequence[Record], p: PrecopyParams) -> dict[str, dict]:
    """Per migration, per configuration (median of its repeats) and the repeats' own noise."""
    return {"per_migration": _stats(rel_errors(records, p)), "per_configuration": _stats(config_errors(records, p)),
            "repeat_noise": _stats(noise_errors(records))}


# --- the fit -----------------------------------------------------------------------------
