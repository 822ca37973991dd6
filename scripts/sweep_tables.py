"""What the reproduction scripts (reproduce_masb.py, reproduce_megha.py) share: running a sweep
spec, and turning its run folders into results tables (whether a run completed, and a number over
seeds as *mean (min–max)*)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def run_sweep(spec: Path, out: Path, workers: int, cwd: Path) -> None:
    """One sweep spec through `cellctl sweep` (resumable: a completed run is skipped), timed."""
    cmd = [sys.executable, "-m", "cellbed.cli.main", "sweep", str(spec), "--out", str(out), "--no-report"] + \
        (["--workers", str(workers)] if workers else [])
    print(f"== {spec.stem}: {' '.join(cmd[3:])}", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=cwd)
    print(f"== {spec.stem}: {time.perf_counter() - t0:.0f} s wall", flush=True)


def completed(out: Path) -> bool:
    """The run folder ends with run_completed (a failed or unfinished run does not count)."""
    ev = out / "events.jsonl"
    if not ev.is_file():
        return False
    lines = ev.read_text().strip().splitlines()
    return bool(lines) and json.loads(lines[-1]).get("kind") == "run_completed"


def run_completed(out: Path) -> dict:
    """The run_completed event of a completed run (the driver's counts)."""
    return json.loads((out / "events.jsonl").read_text().strip().splitlines()[-1])


def num(x) -> float:
    """A number for the CSV/averaging (None as NaN; NaN/inf kept)."""
    return float(x) if x is not None else math.nan


def fmt(v, d: int) -> str:
    if isinstance(v, str):
        return v
    v = float(v)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "inf"
    return f"{v:.{d}f}"


def spread(vals, d: int) -> str:
    """One seed: the value; several: *mean (min–max)*, NaNs left out (all NaN: n/a)."""
    x = np.array([num(v) for v in vals], dtype=float)
    if len(x) == 1 or np.isnan(x).all():
        return fmt(x[0], d)
    return f"{fmt(np.nanmean(x), d)} ({fmt(np.nanmin(x), d)}–{fmt(np.nanmax(x), d)})"
