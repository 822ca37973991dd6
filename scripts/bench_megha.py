#!/usr/bin/env python3
"""Megha benchmarks (issue 4): print figures, assert nothing.

  bench_megha.py match [--n 20000]                GM match (bit-vector AND + first-fit scan) on a
                                                  1,000-node partition with 21 constraints: p50/p99
  bench_megha.py model [--nodes 10000] [...]      Megha (4 GMs x 10 LMs) vs central (1 x 1) vs sampling
                                                  (d = 2) on one seeded workload in virtual time:
                                                  p50/p90/p99/p99.9, the four parts, CSV + markdown + CDF
  bench_megha.py grpc [--tasks 3000]              sustained placement rate of 1 GM + 1 LM over gRPC
                                                  (cellbed-controller processes, model hosts), tasks/s
  bench_megha.py sweep-size [--sizes 1000,...]    seed 001 Figs 6/8: allocation time vs cluster size,
                                                  Megha (10 x 10) vs central vs sampling, workload scaled
                                                  with the cell: p50..p99.9, parts; megha-size.md/.csv/.png
  bench_megha.py sweep-gmlm [--gms 1,2,4,8] ...   seed 001 Fig. 9: allocation time vs GM x LM counts at a
                                                  fixed size: p50/p99, inconsistencies, requeues;
                                                  megha-gmlm.md/.csv/.png

The real-cell figure (submit -> VM running, with the VM boot separately) is printed by
tests/integration/test_megha_cell.py. Outputs go to docs/bench/ (match, model, grpc) or
docs/results/ (the sweeps), or --out.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if len(xs) else float("nan")


def write(out_dir: str, name: str, text: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


# --- match --------------------------------------------------------------------------------------------
def bench_match(args) -> str:
    from cellbed.policy.megha.match import HostBits, PartitionBits, match_partition
    from cellbed.domain.constraints import Constraint, ConstraintOp
    rng = np.random.default_rng(1)
    n = 1000
    # every attribute on 97% of nodes: 0.97^21 = 53% of nodes satisfy all 21 constraints
    attrs = [{f"attr{j:02d}": 1 for j in range(21) if rng.random() < 0.97} for _ in range(n)]
    bits = HostBits(attrs)
    part = PartitionBits(bits, np.arange(n))
    cons21 = [Constraint(f"attr{j:02d}", ConstraintOp.EQUAL, 1) for j in range(21)]
    t0 = time.perf_counter_ns()
    part.candidates(cons21)
    cold = (time.perf_counter_ns() - t0) / 1e3
    rows = []
    for label, cons, free_frac in (("21 constraints, 50% of nodes have room", cons21, 0.5),
                                   ("21 constraints, 2% of nodes have room (scan far)", cons21, 0.02),
                                   ("1 constraint, 50% room", cons21[:1], 0.5),
                                   ("no constraint, 50% room", [], 0.5)):
        lat = []
        for _ in range(args.n):
            free = np.where(rng.random(n) < free_frac, 4.0, 0.0)
            t0 = time.perf_counter_ns()
            match_partition(part, cons, free, free, 1.0, 1.0)
            lat.append((time.perf_counter_ns() - t0) / 1e3)
        rows.append((label, pct(lat, 50), pct(lat, 99), max(lat)))
    text = (f"## GM match on a 1,000-node partition (bit-vector AND + first-fit scan)\n\n"
            f"numpy {np.__version__}, {args.n} matches per row; vectors cached per (partition, constraint): "
            f"the first 21-constraint match (computing the vectors) took {cold:.0f} µs.\n\n"
            "| case | p50 µs | p99 µs | max µs |\n|---|---:|---:|---:|\n"
            + "".join(f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.1f} |\n" for r in rows))
    return text


# --- shared model-cell pieces: one seeded point, its row, the outputs -----------------------------------
# `model`, `sweep-size` and `sweep-gmlm` all run points of the same kind: one front-end on one model
# cell (megha_cell(...)) with one seeded arrival process (ArrivalConfig); they differ only in which
# knobs they vary and how they report.

WORKLOAD_SHAPE = ("Poisson jobs of 1-32 tasks (55% single-task), 0.25-2 cores, 256-4096 MiB, log-uniform "
                  "2-60 s, 50% of jobs constrained")
COUNTER_KEYS = ("launch_requests", "repartitions", "inconsistency_internal", "inconsistency_external", "requeued",
                "probes", "claims_refused")
SUMMARY_KEYS = ["tasks", "placed", "pending", "p50", "p90", "p99", "p99.9", "max", "mean"]


def model_workload(seed: int, duration_s: float, job_rate: float):
    from cellbed.controller.megha.workload import ArrivalConfig
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
    from cellbed.controller.megha.workload import arrivals, offered_load
    from cellbed.model.megha import megha_cell, megha_users
    from cellbed.model.simulate import simulate
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
    from cellbed.controller.megha.alloc import PARTS, summarize
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


def _value(x: str):
    for conv in (int, float):
        try:
            return conv(x)
        except ValueError:
            pass
    return x


def read_rows_csv(path: str) -> list[dict]:
    """Rows written by write_rows_csv, with numbers as numbers (re-render without re-running)."""
    with open(path, newline="") as f:
        return [{k: _value(v) for k, v in r.items()} for r in csv.DictReader(f)]


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


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def _save(fig, path: str) -> str:
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


# --- model: 10k nodes, three front-ends -------------------------------------------------------------------
def bench_model(args) -> str:
    from cellbed.controller.megha.alloc import PARTS, summarize
    points = {fe: run_model_point(fe, args.nodes, args.gms, args.lms, seed=args.seed, duration_s=args.duration_s,
                                  job_rate=args.job_rate, fill=args.fill, drain_s=args.drain_s)
              for fe in args.frontends.split(",")}
    results = {fe: p.res for fe, p in points.items()}
    n_tasks = next(iter(points.values())).tasks
    load = next(iter(points.values())).offered_load
    os.makedirs(args.out, exist_ok=True)
    tag = args.tag
    with open(os.path.join(args.out, f"megha_model{tag}_allocations.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["frontend", "task", "user", "arrival_s", "start_s", "host", *PARTS, "total_ms", "attempts", "outcome"])
        for fe, res in results.items():
            for r in res.records:
                w.writerow([fe, r.task, r.user, f"{r.arrival_s:.6f}", f"{r.start_s:.6f}", r.host,
                            *(f"{getattr(r, p):.4f}" for p in PARTS), f"{r.total_ms:.4f}", r.attempts, r.outcome])
    with open(os.path.join(args.out, f"megha_model{tag}_summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        keys = SUMMARY_KEYS + [f"{p}_{x}" for p in PARTS for x in ("p50", "share")]
        w.writerow(["frontend", *keys, "virtual_s", "wall_s", "messages"])
        for fe, res in results.items():
            s = summarize(res.records)
            w.writerow([fe, *(s[k] for k in keys), f"{res.virtual_s:.1f}", f"{res.wall_s:.1f}", res.messages])
    png = ""
    plt = _pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for fe, res in results.items():
            v = np.sort([r.total_ms for r in res.records if r.outcome == "placed"])
            ax.plot(np.maximum(v, 1e-3), np.arange(1, v.size + 1) / v.size, label=fe)
        ax.set_xscale("log")
        ax.set_xlabel("allocation time, ms (log)")
        ax.set_ylabel("CDF of placed tasks")
        ax.set_title(f"{args.nodes} nodes, {n_tasks} tasks: Megha {args.gms}x{args.lms}, central 1x1, sampling d=2")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        png = os.path.join(args.out, f"megha_model{tag}_cdf.png")
        fig.savefig(png, dpi=110)
    lines = [f"## Megha vs central vs sampling, {args.nodes:,} nodes in virtual time\n",
             f"Workload: seed {args.seed}, {n_tasks:,} tasks in {args.duration_s:g} s (Poisson jobs at "
             f"{args.job_rate:g}/s of 1-32 tasks, 2-60 s, 50% of jobs constrained); the cell starts "
             f"{args.fill:.0%} full on average (background tasks ending within {2 * args.duration_s:g} s); "
             f"offered load of the tasks {load:.1%} of the cell's CPU. Nodes 4 cores / 16 GiB; one-way message "
             f"delay 0.5 ms; LM updates every 10 s; modelled processing (CostModel defaults).\n",
             "| front-end | placed | pending | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | "
             "queueing | processing | worker queue | communication | wall s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for fe, res in results.items():
        s = summarize(res.records)
        lines.append(f"| {fe} | {s['placed']} | {s['pending']} | {s['p50']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | "
                     f"{s['p99.9']:.2f} | {s['max']:.0f} | " + " | ".join(f"{s[p + '_share']:.1%}" for p in PARTS)
                     + f" | {res.wall_s:.0f} |")
    lines.append("\nParts: share of the summed allocation time of placed tasks. Median of each part (ms):\n")
    lines.append("| front-end | " + " | ".join(PARTS) + " |\n|---|" + "---:|" * len(PARTS))
    for fe, res in results.items():
        s = summarize(res.records)
        lines.append(f"| {fe} | " + " | ".join(f"{s[p + '_p50']:.3f}" for p in PARTS) + " |")
    for fe, res in results.items():
        lines.append("\n" + counters_line(fe, res.counters))
    if png:
        lines.append(f"\n![CDF]({os.path.basename(png)})\n")
    lines.append(f"\nPeak RSS of the benchmark process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB.")
    return "\n".join(lines) + "\n"


# --- sweep-size: allocation time vs cluster size (seed 001 Figs 6 and 8) ----------------------------------
def sweep_size(sizes, frontends=("megha", "central", "sampling"), *, gms: int = 10, lms: int = 10,
               base_nodes: int = 10_000, base_job_rate: float = 100.0, duration_s: float = 20.0, fill: float = 0.8,
               seed: int = 1, drain_s: float = 120.0, quiet: bool = False, on_row=None) -> list[dict]:
    """One row per (size, front-end). The workload keeps its shape and scales with the cell: jobs
    arrive at base_job_rate * nodes / base_nodes per s for duration_s, so the offered load per node
    and the initial fill are the same at every size and the task count grows with the node count.
    Megha keeps gms x lms fixed (the paper's Fig. 8 holds 10 GMs x 10 LMs); central is 1 x 1."""
    rows = []
    for n in sizes:
        rate = base_job_rate * n / base_nodes
        for fe in frontends:
            p = run_model_point(fe, n, min(gms, n), min(lms, n), seed=seed, duration_s=duration_s, job_rate=rate,
                                fill=fill, drain_s=drain_s, quiet=quiet)
            rows.append(point_row(p))
            if on_row is not None:
                on_row(rows)
    return rows


# --- sweep-gmlm: allocation time vs GM x LM counts at a fixed size (seed 001 Fig. 9) -----------------------
def sweep_gmlm(nodes: int, gms_list, lms_list, *, job_rate: float = 100.0, duration_s: float = 20.0,
               fill: float = 0.8, seed: int = 1, drain_s: float = 120.0, quiet: bool = False,
               on_row=None) -> list[dict]:
    """One row per (GMs, LMs), Megha only, same cell size and workload (users = one queue per GM,
    jobs round-robin over them, so every configuration sees the same tasks at the same times)."""
    rows = []
    for g in gms_list:
        for l in lms_list:
            p = run_model_point("megha", nodes, g, l, seed=seed, duration_s=duration_s, job_rate=job_rate, fill=fill,
                                drain_s=drain_s, quiet=quiet)
            rows.append(point_row(p))
            if on_row is not None:
                on_row(rows)
    return rows


def _ms(x: float) -> str:
    return "–" if x != x else (f"{x:.2f}" if x < 100 else f"{x:.0f}")


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.1%}"


def accounting_line(rows: list[dict]) -> str:
    bad = [r for r in rows if r["unaccounted"] or r["duplicate_records"]
           or r["placed"] + r["pending"] + r["rejected"] != r["tasks"]]
    head = ("Every point ended with the model cell's no-double-allocation check passing (every model task on one "
            "host, no host over capacity, LM invariants)")
    if not bad:
        return head + " and every task accounted for exactly once (placed, or pending at the drain deadline)."
    return head + "; task accounting FAILED at: " + ", ".join(
        f"{r['frontend']} {r['nodes']} nodes {r['gms']}x{r['lms']} (unaccounted {r['unaccounted']}, "
        f"duplicate records {r['duplicate_records']})" for r in bad) + "."


def inconsistency_agreement(rows: list[dict]) -> str:
    bad = [r for r in rows if r["frontend"] != "sampling" and (
        r["inconsistency_internal"] != r["lm_inconsistency_internal"]
        or r["inconsistency_external"] != r["lm_inconsistency_external"])]
    if not bad:
        return "the two counts agree in every row"
    return "they DIFFER at " + ", ".join(
        f"{r['gms']}x{r['lms']} (GM {r['inconsistency_internal']}/{r['inconsistency_external']}, "
        f"LM {r['lm_inconsistency_internal']}/{r['lm_inconsistency_external']})" for r in bad)


def _box_line(rows: list[dict]) -> str:
    loads = [r["loadavg_1m"] for r in rows]
    return (f"Measured (finished {rows[-1]['finished_utc']} UTC) on this project's {os.cpu_count()}-core box, shared "
            f"with other CPU-heavy work (1-min load average {min(loads):.1f}-{max(loads):.1f} at the end of the "
            f"points); sweep wall time {sum(r['wall_s'] for r in rows):.0f} s (build + run + check of every point); "
            f"peak RSS of the benchmark process {max(r['peak_rss_mib'] for r in rows)} MiB. Wall times are as measured "
            f"on that shared box, for scale only.")


def _sweep_rows(args, name: str, run) -> list[dict]:
    path = os.path.join(args.out, name)
    if args.render_only:
        return read_rows_csv(path)
    rows = run(lambda rs: write_rows_csv(path + ".partial", rs))     # the points so far, if it is stopped
    write_rows_csv(path, rows)
    if os.path.exists(path + ".partial"):
        os.remove(path + ".partial")
    return rows


def bench_sweep_size(args) -> str:
    from cellbed.controller.megha.alloc import PARTS
    sizes = [int(x) for x in args.sizes.split(",")]
    frontends = args.frontends.split(",")
    rows = _sweep_rows(args, "megha-size.csv", lambda on_row: sweep_size(
        sizes, frontends, gms=args.gms, lms=args.lms, base_nodes=args.base_nodes, base_job_rate=args.base_job_rate,
        duration_s=args.duration_s, fill=args.fill, seed=args.seed, drain_s=args.drain_s, on_row=on_row))
    png = ""
    plt = _pyplot()
    if plt is not None:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
        for fe, color in zip(frontends, ("C0", "C1", "C2", "C3")):
            rs = [r for r in rows if r["frontend"] == fe]
            x = [r["nodes"] for r in rs]
            for q, style in (("p50", "-o"), ("p99", "--s")):
                a1.plot(x, [r[q] for r in rs], style, color=color, ms=4, label=f"{fe} {q}")
        a1.set_xscale("log")
        a1.set_yscale("log")
        a1.set_xticks(sizes, [f"{n:,}" for n in sizes], fontsize=7)
        a1.minorticks_off()
        a1.set_xlabel("nodes")
        a1.set_ylabel("allocation time, ms")
        a1.grid(True, which="both", alpha=0.3)
        a1.legend(fontsize=7, ncol=2)
        width = 0.8 / max(1, len(frontends))
        bottoms = np.zeros(len(rows))
        xs = np.array([sizes.index(r["nodes"]) + (frontends.index(r["frontend"]) - (len(frontends) - 1) / 2) * width
                       for r in rows])
        for part, color in zip(PARTS, ("C4", "C5", "C6", "C7")):
            h = np.array([r[f"{part}_share"] if r[f"{part}_share"] == r[f"{part}_share"] else 0.0 for r in rows])
            a2.bar(xs, h, width * 0.95, bottom=bottoms, color=color, label=part.replace("_ms", ""))
            bottoms += h
        a2.set_xticks(range(len(sizes)), [f"{n // 1000}k" if n % 1000 == 0 else f"{n / 1000:g}k" for n in sizes])
        a2.set_xlabel("nodes (bars: " + ", ".join(frontends) + ")")
        a2.set_ylabel("share of summed allocation time")
        a2.legend(fontsize=7, loc="lower right")
        png = _save(fig, os.path.join(args.out, "megha-size.png"))
    md_path = os.path.join(args.out, "megha-size.md")
    reading = keep_reading(md_path)
    lines = [
        "# Megha: allocation time vs cluster size (seed 001 Figs 6 and 8, reduced scale)\n",
        f"Model cell in virtual time (the unchanged GM/LM/NodeAgent and sampling code, `cellbed/model/megha.py`). "
        f"Megha {args.gms} GMs x {args.lms} LMs at every size (the paper's Fig. 8 holds 10 x 10), central 1 x 1, "
        f"sampling d = 2 with {args.gms} schedulers. Nodes 4 cores / 16 GiB; one-way message delay 0.5 ms; LM updates "
        f"every 10 s; modelled processing (CostModel defaults: GM match 20 µs + 10 ns per node scanned, LM validation 30 µs).\n",
        f"Workload, scaled to the cell: seed {args.seed}, {WORKLOAD_SHAPE}; jobs arrive at "
        f"{args.base_job_rate:g}/s per {args.base_nodes:,} nodes (so {args.base_job_rate / args.base_nodes * 1000:g}/s "
        f"per 1,000 nodes) for {args.duration_s:g} s; every node starts {args.fill:.0%} full on average (background "
        f"tasks ending within {2 * args.duration_s:g} s). The offered load per node and the fill are the same at every "
        f"size; the task count grows with the cell. Drain: up to {args.drain_s:g} s of virtual time after the last arrival.\n",
        "| nodes | front-end | tasks | offered load | placed | pending | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | "
        "queueing | processing | worker queue | communication | wall s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['nodes']:,} | {r['frontend']} | {r['tasks']:,} | {r['offered_load']:.1%} | {r['placed']:,} | "
                     f"{r['pending']} | {_ms(r['p50'])} | {_ms(r['p90'])} | {_ms(r['p99'])} | {_ms(r['p99.9'])} | "
                     f"{_ms(r['max'])} | " + " | ".join(_pct(r[f'{p}_share']) for p in PARTS) + f" | {r['wall_s']:.0f} |")
    lines.append("\nParts: share of the summed allocation time of placed tasks (queueing = framework queueing: GM "
                 "queue and LM lock; worker queue = sampling's reservation queue). Median of each part, ms:\n")
    lines.append("| nodes | front-end | framework queueing | processing | worker queueing | communication |\n"
                 "|---:|---|---:|---:|---:|---:|")
    for r in rows:
        lines.append(f"| {r['nodes']:,} | {r['frontend']} | " + " | ".join(f"{r[f'{p}_p50']:.3f}" for p in PARTS) + " |")
    lines.append("\nCounters (GM side; inconsistencies are refusals by an LM of a stale request, internal = in the "
                 "GM's own partition, external = a repartition):\n")
    lines.append("| nodes | front-end | launch requests | repartitions | inconsistency internal | inconsistency "
                 "external | requeued | probes | claims refused |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        own = ("probes", "claims_refused") if r["frontend"] == "sampling" else COUNTER_KEYS[:5]
        lines.append(f"| {r['nodes']:,} | {r['frontend']} | "
                     + " | ".join(str(r[k]) if k in own else "–" for k in COUNTER_KEYS) + " |")
    lines.append("\n" + accounting_line(rows) + "\n")
    cmd = (f"scripts/bench_megha.py sweep-size --sizes {args.sizes} --gms {args.gms} --lms {args.lms} "
           f"--duration-s {args.duration_s:g} --base-job-rate {args.base_job_rate:g} --seed {args.seed}")
    lines += _sweep_md_tail(rows, png, "allocation time vs cluster size", cmd, "megha-size.csv", "point")
    return "\n".join(lines) + reading


def bench_sweep_gmlm(args) -> str:
    gms_list = [int(x) for x in args.gms.split(",")]
    lms_list = [int(x) for x in args.lms.split(",")]
    rows = _sweep_rows(args, "megha-gmlm.csv", lambda on_row: sweep_gmlm(
        args.nodes, gms_list, lms_list, job_rate=args.job_rate, duration_s=args.duration_s, fill=args.fill,
        seed=args.seed, drain_s=args.drain_s, on_row=on_row))
    png = ""
    plt = _pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        for ax, q in zip(axes, ("p50", "p99")):
            for g in gms_list:
                rs = [r for r in rows if r["gms"] == g]
                ax.plot([str(r["lms"]) for r in rs], [r[q] for r in rs], "-o", ms=4, label=f"{g} GM")
            ax.set_xlabel("LMs")
            ax.set_ylabel(f"{q} allocation time, ms")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"Megha, {args.nodes:,} nodes: allocation time vs GMs x LMs", fontsize=9)
        png = _save(fig, os.path.join(args.out, "megha-gmlm.png"))
    md_path = os.path.join(args.out, "megha-gmlm.md")
    reading = keep_reading(md_path)
    r0 = rows[0]
    lines = [
        f"# Megha: allocation time vs GM x LM counts (seed 001 Fig. 9, reduced scale: {args.nodes:,} nodes)\n",
        "Model cell in virtual time (the unchanged GM/LM/NodeAgent code). One user queue per GM, jobs round-robin "
        "over the users, so every configuration gets the same tasks at the same times. Each LM owns an equal block "
        "of nodes, cut into one partition per GM. Nodes 4 cores / 16 GiB; one-way message delay 0.5 ms; LM updates "
        "every 10 s; modelled processing (GM match 20 µs + 10 ns per node scanned, LM validation 30 µs). "
        "1 GM x 1 LM is the `central` baseline.\n",
        f"Workload: seed {args.seed}, {WORKLOAD_SHAPE}; {r0['tasks']:,} tasks, jobs at {args.job_rate:g}/s for "
        f"{args.duration_s:g} s (offered load {r0['offered_load']:.1%} of the cell's CPU), the cell {args.fill:.0%} full "
        f"on average at the start.\n",
        "| GMs | LMs | placed | pending | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | queueing | processing | "
        "communication | launch req. | repartitions | incons. internal | incons. external | requeued | wall s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['gms']} | {r['lms']} | {r['placed']:,} | {r['pending']} | {_ms(r['p50'])} | {_ms(r['p90'])} | "
                     f"{_ms(r['p99'])} | {_ms(r['p99.9'])} | {_ms(r['max'])} | "
                     f"{_pct(r['framework_queue_ms_share'])} | {_pct(r['processing_ms_share'])} | "
                     f"{_pct(r['communication_ms_share'])} | {r['launch_requests']:,} | {r['repartitions']} | "
                     f"{r['inconsistency_internal']} | {r['inconsistency_external']} | {r['requeued']} | "
                     f"{r['wall_s']:.0f} |")
    lines.append("\nqueueing / processing / communication: share of the summed allocation time of placed tasks "
                 "(worker queueing is 0 for Megha: the LM validated the node). Inconsistencies are counted by the GMs "
                 f"(refused requests) and by the LMs (refusals): {inconsistency_agreement(rows)}. requeued: tasks "
                 "sent back to the tail of their queue because nothing fitted in the GM's view.\n")
    lines.append(accounting_line(rows) + "\n")
    cmd = (f"scripts/bench_megha.py sweep-gmlm --nodes {args.nodes} --gms {args.gms} --lms {args.lms} "
           f"--job-rate {args.job_rate:g} --duration-s {args.duration_s:g} --seed {args.seed}")
    lines += _sweep_md_tail(rows, png, "allocation time vs GMs x LMs", cmd, "megha-gmlm.csv", "configuration")
    return "\n".join(lines) + reading


def _sweep_md_tail(rows: list[dict], png: str, alt: str, cmd: str, csv_name: str, row_is: str) -> list[str]:
    """The end of a sweep's markdown: plot, box line, how to regenerate."""
    out = [f"![{alt}]({os.path.basename(png)})\n"] if png else []
    out.append(_box_line(rows) + "\n")
    out.append(f"Regenerate (tables, CSV and plot; the Reading section below is kept): `.venv/bin/python {cmd}` "
               f"(CSV: {csv_name}, one row per {row_is} with every percentile, part and counter).\n")
    return out


# --- grpc: sustained placement rate -----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_grpc(args) -> str:
    from cellbed.domain import wire
    from cellbed.runtime.clock import RealClock
    from cellbed.runtime.grpc_transport import GrpcTransport
    from cellbed.v1 import megha_pb2 as mpb, node_pb2 as npb
    tmp = tempfile.mkdtemp(prefix="megha-bench-")
    gm, lm = _free_port(), _free_port()
    cfg = os.path.join(tmp, "controller.toml")
    with open(cfg, "w") as f:
        f.write(f'cell = "bench"\nstate_dir = "{tmp}/state"\nqueue_fsync = {"true" if args.fsync else "false"}\n\n[agents]\ngm1 = "127.0.0.1:{gm}"\nlm1 = "127.0.0.1:{lm}"\n'
                f'\n[[gm]]\nname = "gm1"\n[[lm]]\nname = "lm1"\n[[queue]]\nuser = "u"\nshare = 1.0\ngm = "gm1"\n'
                f'[model]\nhosts = {args.hosts}\ncpu_cores = 64.0\nmem_mib = 1048576\n'
                f'[gm_params]\nrecords_kept = 100000\n[lm_params]\nupdate_period_s = 10.0\n')
    procs = []
    out = []
    try:
        for name in ("lm1", "gm1"):
            log = open(os.path.join(tmp, f"{name}.log"), "w")
            procs.append(subprocess.Popen([sys.executable, "-m", "cellbed.controller.main", "--config", cfg, "--only",
                                           name, "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT))
            time.sleep(0.2)

        async def main():
            t = GrpcTransport(lambda n: n, RealClock())
            target = f"127.0.0.1:{gm}"
            deadline = time.monotonic() + 60
            while True:                                    # wait until the GM has the LM's state
                try:
                    await t.request(target, "GlobalMaster/Submit", mpb.SubmitRequest(task=mpb.MeghaTask(
                        name="warm", user="u", request=wire.resources(0.001, 1),
                        workload=npb.Workload(cpu_load=0.0))), timeout=5)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
            sem = asyncio.Semaphore(args.concurrency)

            async def one(i):
                async with sem:
                    await t.request(target, "GlobalMaster/Submit", mpb.SubmitRequest(task=mpb.MeghaTask(
                        name=f"b{i}", user="u", request=wire.resources(0.01, 1), duration_s=args.duration_s,
                        workload=npb.Workload(cpu_load=0.0))), timeout=30)
            t0 = time.perf_counter()
            subs = asyncio.gather(*(one(i) for i in range(args.tasks)))
            placed_at = []
            while True:
                await asyncio.sleep(0.1)
                v = await t.request(target, "GlobalMaster/GetView", mpb.GetViewRequest(), timeout=10)
                placed_at.append((time.perf_counter() - t0, v.counters.get("placed", 0) - 1))
                if placed_at[-1][1] >= args.tasks:
                    break
            await subs
            t_submit = time.perf_counter() - t0
            await t.close()
            return t_submit, placed_at
        t_submit, placed_at = asyncio.run(main())
        total_t = placed_at[-1][0]
        # sustained: the rate between 10% and 90% of the tasks placed
        lo = next(tt for tt, n in placed_at if n >= 0.1 * args.tasks)
        hi = next(tt for tt, n in placed_at if n >= 0.9 * args.tasks)
        sustained = 0.8 * args.tasks / (hi - lo) if hi > lo else float("nan")
        out.append(f"## Sustained placement rate, 1 GM + 1 LM over gRPC (model backend)\n\n"
                   f"Two cellbed-controller processes (GM; LM with {args.hosts} in-process model hosts) and this "
                   f"client on the same {os.cpu_count()}-core box; {args.tasks} tasks submitted with up to "
                   f"{args.concurrency} Submit calls in flight, each task running {args.duration_s:g} s; the GM journals "
                   f"every accepted task ({'fsync, group commit' if args.fsync else 'no fsync'}) and waits for each "
                   f"LM answer; the LM process also runs the model NodeAgents (their StartVm/StopVm work).\n\n"
                   f"| tasks | all submitted s | all placed s | sustained (10%-90%) tasks/s | overall tasks/s |\n"
                   f"|---:|---:|---:|---:|---:|\n"
                   f"| {args.tasks} | {t_submit:.2f} | {total_t:.2f} | {sustained:.0f} | {args.tasks / total_t:.0f} |\n"
                   f"\nAnchor: kube-scheduler's e2e cap of 100 pods/s; goal ≥ 300 tasks/s.\n")
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=20)
    return "".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for CSV/markdown/PNG (default docs/bench, sweeps: docs/results)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("match")
    p.add_argument("--n", type=int, default=20000)
    p = sub.add_parser("model")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--gms", type=int, default=4)
    p.add_argument("--lms", type=int, default=10)
    p.add_argument("--duration-s", type=float, default=10.0, help="arrivals over this long, s")
    p.add_argument("--job-rate", type=float, default=100.0, help="job arrivals per s")
    p.add_argument("--fill", type=float, default=0.8, help="mean initial fill of the nodes (0..0.95)")
    p.add_argument("--drain-s", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--frontends", default="megha,central,sampling")
    p.add_argument("--tag", default="", help="suffix of the output files (several loads side by side)")
    p = sub.add_parser("grpc")
    p.add_argument("--tasks", type=int, default=3000)
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--duration-s", type=float, default=2.0, help="each task runs this long (the LM stops it)")
    p.add_argument("--no-fsync", dest="fsync", action="store_false", help="journal without fsync")
    p = sub.add_parser("sweep-size", help="allocation time vs cluster size (seed 001 Figs 6, 8)")
    p.add_argument("--sizes", default="1000,2500,5000,10000,20000", help="node counts, comma-separated")
    p.add_argument("--frontends", default="megha,central,sampling")
    p.add_argument("--gms", type=int, default=10, help="Megha GMs at every size (sampling: schedulers)")
    p.add_argument("--lms", type=int, default=10, help="Megha LMs at every size")
    p.add_argument("--base-nodes", type=int, default=10000)
    p.add_argument("--base-job-rate", type=float, default=100.0, help="job arrivals per s at --base-nodes nodes; "
                   "scaled in proportion to the node count")
    p.add_argument("--duration-s", type=float, default=20.0, help="arrivals over this long, s")
    p.add_argument("--fill", type=float, default=0.8, help="mean initial fill of the nodes (0..0.95)")
    p.add_argument("--drain-s", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("sweep-gmlm", help="allocation time vs GM x LM counts (seed 001 Fig. 9)")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--gms", default="1,2,4,8", help="GM counts, comma-separated")
    p.add_argument("--lms", default="1,2,5,10", help="LM counts, comma-separated")
    p.add_argument("--job-rate", type=float, default=100.0, help="job arrivals per s")
    p.add_argument("--duration-s", type=float, default=20.0, help="arrivals over this long, s")
    p.add_argument("--fill", type=float, default=0.8, help="mean initial fill of the nodes (0..0.95)")
    p.add_argument("--drain-s", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    for p in (sub.choices["sweep-size"], sub.choices["sweep-gmlm"]):
        p.add_argument("--render-only", action="store_true",
                       help="re-render the markdown and plot from the CSV written by an earlier run (no simulation)")
    args = ap.parse_args(argv)
    sweep = args.cmd.startswith("sweep-")
    if args.out is None:
        args.out = os.path.join(ROOT, "docs", "results" if sweep else "bench")
    os.makedirs(args.out, exist_ok=True)
    text = {"match": bench_match, "model": bench_model, "grpc": bench_grpc, "sweep-size": bench_sweep_size,
            "sweep-gmlm": bench_sweep_gmlm}[args.cmd](args)
    print(text)
    name = f"megha-{args.cmd[len('sweep-'):]}.md" if sweep else f"megha_{args.cmd}{getattr(args, 'tag', '')}.md"
    path = write(args.out, name, text)
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
