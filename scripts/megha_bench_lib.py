"""What the Megha benchmarks share: the seeded model workload, one model-cell point, plots and the kept Reading section of a results page."""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cellbed.controller.megha.workload import ArrivalConfig, arrivals, offered_load  # noqa: E402 (after ROOT is on the path)
from cellbed.model.megha import megha_cell, megha_users  # noqa: E402
from cellbed.model.simulate import simulate  # noqa: E402


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if len(xs) else float("nan")


def write(out_dir: str, name: str, text: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


COUNTER_KEYS = ("launch_requests", "repartitions", "inconsistency_internal", "inconsistency_external", "requeued",
                "probes", "claims_refused")
SUMMARY_KEYS = ["tasks", "placed", "pending", "p50", "p90", "p99", "p99.9", "max", "mean"]


def model_workload(seed: int, duration_s: float, job_rate: float):
    return ArrivalConfig(seed=seed, duration_s=duration_s, job_rate_per_s=job_rate, task_min_s=2, task_max_s=60)


@dataclasses.dataclass
class ModelPoint:
    """One front-end on one model cell with one workload, run to the end (or the drain deadline)."""
    frontend: str
    cfg: object                 # ModelCellParams
    job_rate: float             # jobs/s
    duration_s: float           # arrivals over this long, s
    tasks: int
    offered_load: float         # CPU demand of the tasks / cell CPU over duration_s
    res: object                 # ModelRunResult
    wall_s: float               # build + run + check, s
    unaccounted: int            # arrivals with no record (neither placed nor pending nor rejected)
    duplicate_records: int      # records beyond the first for one task (a task started twice)


def run_model_point(frontend: str, nodes: int, gms: int, lms: int, *, seed: int = 1, duration_s: float = 20.0,
                    job_rate: float = 100.0, fill: float = 0.8, drain_s: float = 120.0, quiet: bool = False) -> ModelPoint:
    """Build a model cell, run the seeded workload through *frontend*, tear it down. The cell's
    no-double-allocation check runs at the end (ModelCell.check_no_double_allocation: every model
    task on one host, no host over capacity, LM invariants) and raises AssertionError if it fails."""
    cfg = megha_cell(frontend=frontend, nodes=nodes, gms=gms, lms=lms, background_fill=fill,
                     background_s=(5.0, 2 * duration_s), seed=seed)
    arr = arrivals(dataclasses.replace(model_workload(seed, duration_s, job_rate), users=megha_users(cfg)),
                   cfg.megha.attribute_probs)
    t0 = time.perf_counter()
    res = simulate(cfg, arr, drain_s=drain_s, check=True)
    wall = time.perf_counter() - t0
    seen = Counter(r.task for r in res.records)
    p = ModelPoint(frontend, cfg, job_rate, duration_s, len(arr), offered_load(arr, nodes * cfg.megha.node_cpu, duration_s),
                   res, wall, unaccounted=sum(1 for a in arr if a.task.name not in seen),
                   duplicate_records=sum(c - 1 for c in seen.values()))
    if not quiet:
        s = res.summary
        shape = "" if frontend == "sampling" else f" {cfg.n_gms}x{cfg.n_lms}"
        print(f"{nodes:6d} nodes {frontend:9s}{shape:6s} {len(arr):6d} tasks: placed {s['placed']} pending "
              f"{s['pending']} p50 {s['p50']:.2f} p99 {s['p99']:.2f} ms; wall {wall:.0f} s", flush=True)
    return p


def counters_line(name: str, counters: dict) -> str:
    return f"{name} counters: " + ", ".join(f"{k} {counters[k]}" for k in COUNTER_KEYS if k in counters)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def save_fig(fig, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    return path


def keep_reading(path: str, marker: str = "## Reading") -> str:
    """The hand-written section of an earlier version of *path* (from *marker* on), kept when the
    tables are regenerated."""
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        return ""
    i = old.find(marker)
    return "\n" + old[i:] if i >= 0 else ""
