"""The report of a whole sweep (``cellctl report SWEEPDIR``): per configuration (scenario × grid
point), the mean and the min–max over its seeds of every summary number of a run
(cellbed/experiment/report/summary.py summarize), as ``sweep.md`` and ``sweep.csv``.

Only completed runs count; the report says how many seeds each configuration has and names the
runs that are missing, so a sweep can be reported while it runs or after some runs failed.
CSV: one row per configuration; ``<number>_mean``, ``_min``, ``_max`` per summary number; an
empty cell is "not measured" (NaN), as in the results CSVs.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from cellbed.domain.errors import FailedPrecondition, NotFound
from cellbed.experiment.markdown import md_table
from cellbed.experiment.report.summary import Summary, fmt_bytes, fmt_ms, fmt_num, fmt_pct, fmt_ratio, summarize
from cellbed.experiment.results.reader import load_run
from cellbed.experiment.sweep.plan import SWEEP_FILE, SWEEP_FORMAT

__all__ = ["is_sweep", "load_sweep", "sweep_table", "write_sweep_report"]

PCT = {"asr_sta", "asr_ta", "asr_pa", "asr_da", "idle_mean", "overloaded_mean", "overloaded_max",
       "ticks_over_threshold", "used_cpu_mean", "used_mem_mean", "req_cpu_mean", "req_mem_mean", "refusal_rate"}
BYTES = {"migration_bytes", "bytes_per_migration", "tick_bytes_moved"}


def is_sweep(path: str | Path) -> bool:
    return (Path(path) / SWEEP_FILE).is_file()


def load_sweep(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_dir():
        raise NotFound(f"no sweep folder {str(p)!r}")
    try:
        data = json.loads((p / SWEEP_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FailedPrecondition(f"{p}: no {SWEEP_FILE}; not a sweep's folder (cellctl sweep writes one)") from None
    except (OSError, ValueError) as e:
        raise FailedPrecondition(f"{p / SWEEP_FILE}: cannot be read ({e})") from None
    if not isinstance(data, dict) or data.get("format") != SWEEP_FORMAT:
        raise FailedPrecondition(f"{p / SWEEP_FILE}: not a {SWEEP_FORMAT} file")
    return data


def numbers(s: Summary) -> dict[str, float]:
    """Every number of a run's summary, the per-part dicts flattened (``part_share.processing_ms``)."""
    out: dict[str, float] = {}
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        if isinstance(v, dict):
            out.update({f"{f.name}.{k}": float(x) for k, x in v.items()})
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f.name] = float(v)
    return out


def _stats(xs: list[float]) -> tuple[float, float, float]:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return math.nan, math.nan, math.nan
    return sum(xs) / len(xs), min(xs), max(xs)     # an infinite ratio (PA:DA with DA = 0) stays infinite


def sweep_table(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """(sweep.json, one row per configuration, the planned runs that are not complete).

    A row: scenario, point, grid (dict), seeds (planned), seeds_done (the seeds with a completed
    run) and stats: number → (mean, min, max) over those seeds."""
    root = Path(path)
    data = load_sweep(root)
    runs = data.get("runs", [])
    rows, missing = [], []
    for stem, point in data.get("configurations", []):
        mine = [r for r in runs if r["stem"] == stem and r["point"] == point]
        per: dict[str, list[float]] = {}
        done = []
        for r in mine:
            try:
                run = load_run(root / r["key"])
            except (NotFound, FailedPrecondition):      # IncompleteRun is a FailedPrecondition
                missing.append(r["key"])
                continue
            done.append(r["seed"])
            for k, v in numbers(summarize(run)).items():
                per.setdefault(k, []).append(v)
        rows.append({"scenario": stem, "point": point, "grid": mine[0]["grid"] if mine else {},
                     "seeds": [r["seed"] for r in mine], "seeds_done": done,
                     "stats": {k: _stats(v) for k, v in per.items()}})
    return data, rows, missing


def _fmt(name: str, x: float) -> str:
    base = name.split(".")[0]
    if base in PCT or base == "part_share":
        return fmt_pct(x)
    if base.endswith("_ms"):
        return fmt_ms(x)
    if base in BYTES:
        return fmt_bytes(x)
    if base == "pa_da_ratio":
        return fmt_ratio(x)
    return fmt_num(x)


def _cell(name: str, st: tuple[float, float, float] | None, n: int) -> str:
    if st is None or math.isnan(st[0]):
        return "n/a"
    mean, lo, hi = st
    return _fmt(name, mean) if n <= 1 or lo == hi else f"{_fmt(name, mean)} ({_fmt(name, lo)} – {_fmt(name, hi)})"


def _csv_num(x: float) -> str:
    return "" if math.isnan(x) else ("inf" if x == math.inf else "-inf" if x == -math.inf else repr(x))


def write_sweep_report(path: str | Path, out: str | Path | None = None) -> Path:
    """Write ``sweep.md`` and ``sweep.csv`` into *out* (default: the sweep's folder); returns the .md."""
    data, rows, missing = sweep_table(path)
    dest = Path(out) if out else Path(path)
    dest.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for r in rows:
        names += [k for k in r["stats"] if k not in names]
    grid_keys = list(data.get("grid", {}))
    with open(dest / "sweep.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["scenario", "point", *grid_keys, "seeds", "seeds_done",
                    *(f"{n}_{s}" for n in names for s in ("mean", "min", "max"))])
        for r in rows:
            w.writerow([r["scenario"], r["point"], *(json.dumps(r["grid"].get(k)) for k in grid_keys),
                        len(r["seeds"]), len(r["seeds_done"]),
                        *(_csv_num(x) for n in names for x in r["stats"].get(n, (math.nan,) * 3))])
    done = sum(len(r["seeds_done"]) for r in rows)
    total = sum(len(r["seeds"]) for r in rows)
    lines = [f"# Sweep {data.get('name', '')}", "",
             f"{len(rows)} configurations × {len(data.get('seeds', []))} seeds: {done} of {total} runs complete. "
             "Each cell: the mean over the configuration's completed seeds, with (min – max) when they differ.",
             "", md_table(["#", "scenario", "grid point", "seeds done"],
                          [[f"C{i + 1}", r["scenario"], r["point"],
                            f"{len(r['seeds_done'])}/{len(r['seeds'])}"] for i, r in enumerate(rows)]),
             "", md_table(["number", *(f"C{i + 1}" for i in range(len(rows)))],
                          [[n, *(_cell(n, r["stats"].get(n), len(r["seeds_done"])) for r in rows)] for n in names])]
    if missing:
        lines += ["", f"Not complete ({len(missing)}): " + ", ".join(missing[:50]) + (" ..." if len(missing) > 50
                                                                                     else "")]
    md = dest / "sweep.md"
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return md
