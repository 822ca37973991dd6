#!/usr/bin/env python3
"""Megha benchmarks (issue 4): print figures, assert nothing.

  bench_megha.py match [--n 20000]                GM match (bit-vector AND + first-fit scan) on a
                                                  1,000-node partition with 21 constraints: p50/p99
  bench_megha.py model [--nodes 10000] [...]      Megha (4 GMs x 10 LMs) vs central (1 x 1) vs sampling
                                                  (d = 2) on one seeded workload in virtual time:
                                                  p50/p90/p99/p99.9, the four parts, CSV + markdown + CDF
  bench_megha.py grpc [--tasks 3000]              sustained placement rate of 1 GM + 1 LM over gRPC
                                                  (cellbed-controller processes, model hosts), tasks/s

The Megha paper's figures (allocation time vs cluster size, vs GM x LM counts) are sweeps of
scenarios now: scripts/reproduce_megha.py (`cellctl sweep`, 3 seeds).
The real-cell figure (submit -> VM running, with the VM boot separately) is printed by
tests/integration/test_megha_cell.py. Outputs go to docs/bench/, or --out.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))      # megha_bench_lib, beside this script
# megha_bench_lib puts the repository on the path before it imports cellbed: import it first.
from megha_bench_lib import ROOT, SUMMARY_KEYS, counters_line, pct, pyplot, run_model_point, write  # noqa: E402

from cellbed.controller.megha.alloc import PARTS, summarize  # noqa: E402
from cellbed.domain import wire  # noqa: E402
from cellbed.domain.constraints import Constraint, ConstraintOp  # noqa: E402
from cellbed.policy.megha.match import HostBits, PartitionBits, match_partition  # noqa: E402
from cellbed.runtime.clock import RealClock  # noqa: E402
from cellbed.runtime.grpc_transport import GrpcTransport  # noqa: E402
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb  # noqa: E402


# --- match --------------------------------------------------------------------------------------------
def bench_match(args) -> str:
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


# `model` runs points of one kind (megha_bench_lib.run_model_point):
# one front-end on one model cell with one seeded arrival process.

# --- model: 10k nodes, three front-ends -------------------------------------------------------------------
def bench_model(args) -> str:
    points = {fe: run_model_point(fe, args.nodes, args.gms, args.lms, seed=args.seed, duration_s=args.duration_s,
                                  job_rate=args.job_rate, fill=args.fill, drain_s=args.drain_s)
              for fe in args.frontends.split(",")}
    results = {fe: p.res for fe, p in points.items()}
    n_tasks = next(iter(points.values())).tasks
    load = next(iter(points.values())).offered_load
    os.makedirs(args.out, exist_ok=True)
    _model_csvs(args, results)
    png = _model_plot(args, results, n_tasks)
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


def _model_csvs(args, results: dict) -> None:
    """megha_model<tag>_allocations.csv (one row per task) and megha_model<tag>_summary.csv."""
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


def _model_plot(args, results: dict, n_tasks: int) -> str:
    """megha_model<tag>_cdf.png: the CDF of allocation times per front-end ("" without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return ""
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
    png = os.path.join(args.out, f"megha_model{args.tag}_cdf.png")
    fig.savefig(png, dpi=110)
    return png


# --- grpc: sustained placement rate -----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_grpc(args) -> str:
    tmp = tempfile.mkdtemp(prefix="megha-bench-")
    gm, lm = _free_port(), _free_port()
    cfg = os.path.join(tmp, "controller.toml")
    with open(cfg, "w") as f:
        # Loopback only, model hosts: plaintext by explicit choice (a secure cell needs certificates).
        f.write(f'cell = "bench"\ninsecure = true\nstate_dir = "{tmp}/state"\nqueue_fsync = {"true" if args.fsync else "false"}\n\n[agents]\ngm1 = "127.0.0.1:{gm}"\nlm1 = "127.0.0.1:{lm}"\n'
                f'\n[[gm]]\nname = "gm1"\n[[lm]]\nname = "lm1"\n[[queue]]\nuser = "u"\nshare = 1.0\ngm = "gm1"\n'
                f'[model]\nhosts = {args.hosts}\ncpu_cores = 64.0\nmem_mib = 1048576\n'
                f'[gm_params]\nrecords_kept = 100000\n[lm_params]\nupdate_period_s = 10.0\n')
    procs = []
    try:
        for name in ("lm1", "gm1"):
            log = open(os.path.join(tmp, f"{name}.log"), "w")
            procs.append(subprocess.Popen([sys.executable, "-m", "cellbed.controller.main", "--config", cfg, "--only",
                                           name, "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT))
            time.sleep(0.2)
        t_submit, placed_at = asyncio.run(_grpc_submit_all(args, f"127.0.0.1:{gm}"))
        return _grpc_text(args, t_submit, placed_at)
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=20)


async def _grpc_submit_all(args, target: str) -> tuple[float, list[tuple[float, int]]]:
    """Submit args.tasks tasks to the GM at *target*; returns the time all were submitted and the
    (time, placed) samples until all were placed."""
    t = GrpcTransport(lambda n: n, RealClock())
    deadline = time.monotonic() + 60
    while True:                                    # wait until the GM has the LM's state
        try:
            await t.request(target, "GlobalMaster/Submit", meghapb.SubmitRequest(task=meghapb.MeghaTask(
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
            await t.request(target, "GlobalMaster/Submit", meghapb.SubmitRequest(task=meghapb.MeghaTask(
                name=f"b{i}", user="u", request=wire.resources(0.01, 1), duration_s=args.duration_s,
                workload=npb.Workload(cpu_load=0.0))), timeout=30)
    t0 = time.perf_counter()
    subs = asyncio.gather(*(one(i) for i in range(args.tasks)))
    placed_at = []
    while True:
        await asyncio.sleep(0.1)
        v = await t.request(target, "GlobalMaster/GetView", meghapb.GetViewRequest(), timeout=10)
        placed_at.append((time.perf_counter() - t0, v.counters.get("placed", 0) - 1))
        if placed_at[-1][1] >= args.tasks:
            break
    await subs
    t_submit = time.perf_counter() - t0
    await t.close()
    return t_submit, placed_at


def _grpc_text(args, t_submit: float, placed_at: list[tuple[float, int]]) -> str:
    total_t = placed_at[-1][0]
    # sustained: the rate between 10% and 90% of the tasks placed
    lo = next(tt for tt, n in placed_at if n >= 0.1 * args.tasks)
    hi = next(tt for tt, n in placed_at if n >= 0.9 * args.tasks)
    sustained = 0.8 * args.tasks / (hi - lo) if hi > lo else float("nan")
    return (f"## Sustained placement rate, 1 GM + 1 LM over gRPC (model backend)\n\n"
            f"Two cellbed-controller processes (GM; LM with {args.hosts} in-process model hosts) and this "
            f"client on the same {os.cpu_count()}-core box; {args.tasks} tasks submitted with up to "
            f"{args.concurrency} Submit calls in flight, each task running {args.duration_s:g} s; the GM journals "
            f"every accepted task ({'fsync, group commit' if args.fsync else 'no fsync'}) and waits for each "
            f"LM answer; the LM process also runs the model NodeAgents (their StartVm/StopVm work).\n\n"
            f"| tasks | all submitted s | all placed s | sustained (10%-90%) tasks/s | overall tasks/s |\n"
            f"|---:|---:|---:|---:|---:|\n"
            f"| {args.tasks} | {t_submit:.2f} | {total_t:.2f} | {sustained:.0f} | {args.tasks / total_t:.0f} |\n"
            f"\nAnchor: kube-scheduler's e2e cap of 100 pods/s; goal ≥ 300 tasks/s.\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for CSV/markdown/PNG (default docs/bench)")
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
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = os.path.join(ROOT, "docs", "bench")
    os.makedirs(args.out, exist_ok=True)
    text = {"match": bench_match, "model": bench_model, "grpc": bench_grpc}[args.cmd](args)
    print(text)
    name = f"megha_{args.cmd}{getattr(args, 'tag', '')}.md"
    path = write(args.out, name, text)
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
