"""The calibration file of the migration cost model: versioned JSON that `cellctl bench migration
--fit OUT` writes and a scenario names (``migration.calibration``) for the model backend.

    {"format": "cellbed-migration-calibration", "version": 1,
     "params":  {every PrecopyParams field; "inf" for an infinite rate},
     "split":   {"rule": ..., "every": 4, "held_out_configs": [...]},
     "fit_set": {"migrations": n, "configurations": n}, "held_out": {...},
     "errors":  {"fit" | "held_out": {"per_migration" | "per_configuration" | "repeat_noise":
                 {quantity: {n, median_pct, p90_pct, max_pct}}}},
     "provenance": {"sources": [{"path", "sha256", "rows"}], "command", "created_unix_s"}}

:func:`document` and :func:`parse` are pure; :func:`read`, :func:`write` and
:func:`check_writable` are the thin file edge. Every refusal is one line naming the file and the
field (InvalidArgument: cellctl exits 2).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import Any, Mapping

from cellbed.domain.errors import InvalidArgument
from cellbed.policy.migration import costfit
from cellbed.policy.migration.cost import PrecopyParams

FORMAT = "cellbed-migration-calibration"
VERSION = 1
SPLIT_RULE = ("within each mode, configurations ordered by the SHA-256 of their key "
              "(mode|mem|wss|dirty|bw|downtime|tls); every `every`-th held out with all its repeats")

# field -> (lo, hi) allowed in a file; inf allowed where hi is inf
PARAM_RANGES: dict[str, tuple[float, float]] = {
    "bandwidth_mib_s": (1e-3, 1e7), "max_downtime_ms": (0.0, 60_000.0), "setup_ms": (0.0, 600_000.0),
    "max_rounds": (1, 100_000), "zero_page_share": (0.0, 1.0), "limit_efficiency": (1e-3, 100.0),
    "resident_base_mib": (-1.0, 1 << 20), "resident_wss_share": (0.0, 10.0), "resident_mem_share": (0.0, 10.0),
    "resident_overlap_mib": (0.0, 1 << 20), "first_pass_tail": (0.0, 1.0),
    "zero_scan_mib_s": (1e-3, math.inf), "dirty_scale": (0.0, 100.0), "max_dirty_mib_s": (0.0, math.inf),
    "downtime_fixed_ms": (0.0, 600_000.0), "downtime_tail_share": (0.0, 100.0),
    "downtime_tail_power": (0.0, 10.0), "iteration_ms": (0.0, 600_000.0), "converge_ms": (-1.0, 60_000.0),
    "postcopy_downtime_ms": (0.0, 600_000.0), "postcopy_switch_ms": (0.0, 600_000.0),
    "iteration_offset": (-100, 100_000), "wall_overhead_ms": (0.0, 600_000.0),
}
_INTS = {"max_rounds", "iteration_offset"}


@dataclasses.dataclass(frozen=True)
class CalibrationFile:
    path: str
    sha256: str
    params: PrecopyParams
    doc: dict

    def record(self) -> dict[str, Any]:
        """What a run's manifest records: which file, its hash, and its held-out errors."""
        return {"path": self.path, "sha256": self.sha256, "version": self.doc.get("version"),
                "held_out_errors": self.doc.get("errors", {}).get("held_out", {})}


def _json_num(v: float) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else None
    return round(v, 6) if isinstance(v, float) else v


def document(res: costfit.FitResult, provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The calibration file's content for a fit."""
    errs = {s: {kind: {q: {k: _json_num(float(v)) if k != "n" else int(v) for k, v in e.items()}
                       for q, e in by_q.items()} for kind, by_q in summary.items()}
            for s, summary in (("fit", res.fit_errors), ("held_out", res.held_out_errors))}
    return {"format": FORMAT, "version": VERSION,
            "model": "cellbed.policy.migration.cost.estimate: pre-copy rounds (DESIGN §11) with calibrated terms",
            "params": {f.name: _json_num(getattr(res.params, f.name)) for f in dataclasses.fields(PrecopyParams)},
            "split": {"rule": SPLIT_RULE, "every": costfit.HOLDOUT_EVERY, "held_out_configs": list(res.held_out_keys)},
            "fit_set": {"migrations": res.n_fit, "configurations": res.n_fit_configs},
            "held_out": {"migrations": res.n_held_out, "configurations": res.n_held_out_configs},
            "errors": errs, "provenance": dict(provenance)}


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def _param(where: str, name: str, v: Any) -> float | int:
    lo, hi = PARAM_RANGES[name]
    if v == "inf" and math.isinf(hi):
        return math.inf
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (name in _INTS and not isinstance(v, int)):
        kind = "an integer" if name in _INTS else "a number"
        also = ' or "inf"' if math.isinf(hi) else ""
        raise InvalidArgument(f"{where}: params.{name}={v!r} must be {kind} in {lo:g}..{hi:g}{also}")
    if not math.isfinite(v) or not lo <= v <= hi:
        raise InvalidArgument(f"{where}: params.{name}={v!r} is out of range: allowed {lo:g}..{hi:g}")
    return v


def parse(text: str, where: str) -> PrecopyParams:
    """The parameters of a calibration file's *text*; InvalidArgument naming *where* and the field."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InvalidArgument(f"{where}: not a calibration file (not JSON: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidArgument(f"{where}: not a calibration file (format must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise InvalidArgument(f"{where}: calibration version {doc.get('version')!r} is not supported: "
                              f"allowed {VERSION}")
    params = doc.get("params")
    if not isinstance(params, dict):
        raise InvalidArgument(f"{where}: params must be a table of the cost model's parameters")
    unknown = sorted(set(params) - set(PARAM_RANGES))
    missing = sorted(set(PARAM_RANGES) - set(params))
    if unknown or missing:
        what = ([f"unknown {', '.join(unknown)}"] if unknown else []) + ([f"missing {', '.join(missing)}"]
                                                                          if missing else [])
        raise InvalidArgument(f"{where}: params: {'; '.join(what)}")
    return PrecopyParams(**{k: _param(where, k, v) for k, v in params.items()})


def read(path: str) -> CalibrationFile:
    """Read and check the calibration file *path* (InvalidArgument naming it when missing,
    unreadable or wrong)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InvalidArgument(f"migration calibration {path}: cannot read it ({e.strerror or e})") from None
    where = f"migration calibration {path}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgument(f"{where}: not a calibration file (not UTF-8 text)") from None
    params = parse(text, where)
    return CalibrationFile(path=os.path.abspath(path), sha256=hashlib.sha256(raw).hexdigest(), params=params,
                           doc=json.loads(text))


def check_writable(path: str, flag: str) -> None:
    """Refuse, before a sweep, an output path that cannot be written (one line naming *flag*)."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(d) or not os.access(d, os.W_OK):
        raise InvalidArgument(f"{flag} {path}: allowed a file in an existing, writable folder")


def write(path: str, doc: Mapping[str, Any]) -> None:
    check_writable(path, "--fit")
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(dumps(doc))
    os.replace(tmp, path)
