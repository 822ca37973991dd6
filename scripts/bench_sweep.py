#!/usr/bin/env python3
"""Sweep throughput (issue 16): runs per minute of `cellctl sweep` on a LocalCluster of 1 and of 2
worker processes, at the smoke scale. Prints figures, asserts nothing.

  bench_sweep.py [--runs 8] [--nodes 100] [--duration-s 600] [--workers 1,2] [--report]

Each sweep is the smoke scenario with seeds 1..RUNS, into a fresh temporary folder, timed from
the command's start to its exit (cluster start and stop included); the mean run (a `cellctl run`
child, from its start to its exit) comes from the sweep's own record.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(workers: int, runs: int, nodes: int, duration_s: float, report: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="cellbed-bench-sweep-") as d:
        spec = Path(d) / "bench.toml"
        spec.write_text(f'name = "bench"\nscenarios = ["{REPO / "scenarios" / "smoke.toml"}"]\n'
                        f'seeds = {list(range(1, runs + 1))}\n'
                        f'[set]\n"cell.nodes" = {nodes}\n"run.duration_s" = {duration_s}\n')
        argv = [sys.executable, "-m", "cellbed.cli.main", "sweep", str(spec), "--out", os.path.join(d, "out"),
                "--workers", str(workers), "--json", "--quiet"] + ([] if report else ["--no-report"])
        t0 = time.perf_counter()
        p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"sweep with {workers} workers failed (exit {p.returncode}): {p.stderr[-2000:]}")
        res = json.loads(p.stdout)
        per_run = [r["wall_s"] for r in res["runs"].values() if "wall_s" in r]
        return {"workers": workers, "runs": res["ran"], "wall_s": wall,
                "runs_per_min": res["ran"] / (wall / 60.0), "mean_run_s": statistics.mean(per_run)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--duration-s", type=float, default=600.0)
    ap.add_argument("--workers", default="1,2", help="comma list of LocalCluster sizes")
    ap.add_argument("--report", action="store_true", help="each run also writes report.md and its plots")
    a = ap.parse_args()
    rows = [one(int(w), a.runs, a.nodes, a.duration_s, a.report) for w in a.workers.split(",")]
    print(f"sweep throughput: smoke scenario, {a.nodes} nodes, {a.duration_s / 60:g} simulated min per run, "
          f"{a.runs} runs, per-run reports {'on' if a.report else 'off'}, {os.cpu_count()} cores")
    print("| workers | runs | sweep wall | runs per minute | mean run (child process) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workers']} | {r['runs']} | {r['wall_s']:.1f} s | {r['runs_per_min']:.1f} | {r['mean_run_s']:.2f} s |")
    if len(rows) > 1:
        print(f"speed-up {rows[-1]['workers']} vs {rows[0]['workers']} workers: "
              f"{rows[-1]['runs_per_min'] / rows[0]['runs_per_min']:.2f}x")


if __name__ == "__main__":
    main()
