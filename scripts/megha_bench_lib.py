"""What the Megha benchmarks share: the seeded model workload, one model-cell point and its row, CSV rows, plots and the kept Reading section of a results page."""
from __future__ import annotations

import csv
import dataclasses
import os
import resource
import sys
import time
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cellbed.controller.megha.alloc import PARTS, summarize  # noqa: E402 (after ROOT is on the path)
from cellbed.controller.megha.workload import ArrivalConfig, arrivals, offered_load  # noqa: E402
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


WORKLOAD_SHAPE = ("Poisson jobs of 1-32 tasks (55% single-task), 0.25-2 cores, 256-4096 MiB, log-uniform "
                  "2-60 s, 50% of jobs constrained")
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


def point_row(p: ModelPoint) -> dict:
    """The flat summary of one point (a CSV row): configuration, outcome counts, percentiles, the
    four parts (median, mean, share of the summed time), counters (GM side and LM side), cost."""
    s = summarize(p.res.records)
    c, lc = p.res.counters, p.res.lm_counters
    sampling = p.frontend == "sampling"
    row = {"frontend": p.frontend, "nodes": p.cfg.nodes,
           "gms": "" if sampling else p.cfg.n_gms, "lms": "" if sampling else p.cfg.n_lms,
           "schedulers": (p.cfg.megha.schedulers or p.cfg.megha.gms) if sampling else "",
           "job_rate": p.job_rate, "duration_s": p.duration_s, "tasks": p.tasks,
           "offered_load": round(p.offered_load, 4),
           "placed": s["placed"], "pending": s["pending"], "rejected": s["rejected"],
           "unaccounted": p.unaccounted, "duplicate_records": p.duplicate_records,
           **{k: s[k] for k in ("p50", "p90", "p99", "p99.9", "max", "mean")}}
    for part in PARTS:
        for x in ("p50", "mean", "share"):
            row[f"{part}_{x}"] = s[f"{part}_{x}"]
    for k in COUNTER_KEYS:
        row[k] = c.get(k, 0)
    row["lm_inconsistency_internal"] = lc.get("inconsistency_internal", 0)
    row["lm_inconsistency_external"] = lc.get("inconsistency_external", 0)
    row["double_allocation_check"] = "ok"        # run_model_point raised otherwise
    row.update(virtual_s=round(p.res.virtual_s, 1), wall_s=round(p.wall_s, 1), messages=p.res.messages,
               peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
               loadavg_1m=round(os.getloadavg()[0], 2), finished_utc=time.strftime("%Y-%m-%d %H:%M", time.gmtime()))
    return row


def csv_value(x: str):
    for conv in (int, float):
        try:
            return conv(x)
        except ValueError:
            pass
    return x


def read_rows_csv(path: str) -> list[dict]:
    """Rows written by write_rows_csv, with numbers as numbers (re-render without re-running)."""
    with open(path, newline="") as f:
        return [{k: csv_value(v) for k, v in r.items()} for r in csv.DictReader(f)]


def write_rows_csv(path: str, rows: list[dict]) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    return path


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
