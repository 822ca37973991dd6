#!/usr/bin/env python3
"""What the per-stage timing costs a large model run (issue 28, item 6; goal <= 3 %).

Runs the same seeded model run (default: scenarios/smoke.toml at 2,000 nodes for 10 simulated
minutes) with every stage call timed (as every run is) and with the timing switched off
(``PolicyEnv.timed = False``: the policies are still called through their guards, only the two
clock reads and the table update go), in alternation, each in a process of its own, and prints
the CPU seconds of the run itself (the model cell's ``cpu_s``, imports and setup excluded) and the
ratio timed / untimed pair by pair, with its median; then what timing adds to one call, measured
alone, times the run's stage calls, as a share of its CPU time. These machines are shared and
noisy: the pairs' ratios spread by several per cent either way, far more than timing costs.

    .venv/bin/python scripts/bench_policy_overhead.py --pairs 5
    .venv/bin/python scripts/bench_policy_overhead.py --nodes 2000 --minutes 10 --pairs 7 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cellbed.experiment.runner import ModelDriver, run_scenario
from cellbed.experiment.scenario.file import load_scenario

REPO = Path(__file__).resolve().parents[1]


def child(mode: str, nodes: int, minutes: float, seed: int) -> None:
    sc = load_scenario(REPO / "scenarios" / "smoke.toml", [f"cell.nodes={nodes}", f"run.duration_s={minutes * 60}",
                                                           f"run.seed={seed}"])
    drv = ModelDriver(sc)
    drv.book.env.timed = mode == "timed"
    with tempfile.TemporaryDirectory(prefix="bench-policy-") as d:
        res = run_scenario(sc, Path(d) / "run", progress=None, report=False, driver=drv)
        calls = sum(a.calls for a in drv.book.env.stats.accs.values())
    print(json.dumps({"mode": mode, "cpu_s": res.summary["cpu_s"], "wall_s": res.summary["wall_s"],
                      "stage_calls_timed": calls}))


def per_call_ns(n: int = 1_000_000, repeat: int = 5) -> float:
    """What timing adds to one stage call, measured alone: the two clock reads and the table update
    of the guard's timed path (cellbed/runtime/plugins/guard.py) around a trivial policy, minus the
    bare call; the best of *repeat* rounds of *n* calls. Multiplied by a run's stage calls and set
    against its CPU time, it bounds the overhead far below the run-to-run noise of the A/B pairs."""
    import time
    import timeit
    from cellbed.runtime.plugins.stats import Acc
    acc, pc, fn = Acc(), time.perf_counter_ns, (lambda: None)

    def timed():
        t0 = pc()
        out = fn()
        acc.add(pc() - t0, 3)
        return out

    def bare():
        return fn()
    t1 = min(timeit.repeat(timed, number=n, repeat=repeat)) / n * 1e9
    t0 = min(timeit.repeat(bare, number=n, repeat=repeat)) / n * 1e9
    return t1 - t0


def one(mode: str, args) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", mode, "--nodes", str(args.nodes), "--minutes",
                        str(args.minutes), "--seed", str(args.seed)], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONHASHSEED": "0"})
    if r.returncode != 0:
        raise SystemExit(f"bench_policy_overhead: the {mode} run failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json", default="", help="also write the figures here")
    ap.add_argument("--child", choices=["timed", "untimed"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.nodes, args.minutes, args.seed)
        return
    rows = []
    for i in range(args.pairs):
        order = ("timed", "untimed") if i % 2 == 0 else ("untimed", "timed")    # A B, B A: drift cancels
        got = {m: one(m, args) for m in order}
        ratio = got["timed"]["cpu_s"] / got["untimed"]["cpu_s"]
        rows.append({"pair": i + 1, "timed_cpu_s": got["timed"]["cpu_s"], "untimed_cpu_s": got["untimed"]["cpu_s"],
                     "ratio": ratio, "stage_calls": got["timed"]["stage_calls_timed"]})
        print(f"pair {i + 1}: timed {got['timed']['cpu_s']:.2f} CPU s, untimed {got['untimed']['cpu_s']:.2f} CPU s, "
              f"ratio {ratio:.4f} ({got['timed']['stage_calls_timed']:,} stage calls timed)", flush=True)
    ratios = [r["ratio"] for r in rows]
    med = statistics.median(ratios)
    print(f"\n{args.nodes} nodes, {args.minutes:g} simulated min, {args.pairs} pairs: timing overhead median "
          f"{(med - 1) * 100:+.2f} % (ratio min {min(ratios):.4f}, median {med:.4f}, max {max(ratios):.4f}); "
          f"goal <= 3 %")
    ns, calls = per_call_ns(), rows[0]["stage_calls"]
    base = statistics.median(r["untimed_cpu_s"] for r in rows)
    print(f"timing per stage call, measured alone: {ns:.0f} ns; x {calls:,} calls = {ns * calls / 1e6:.1f} ms "
          f"of the untimed run's median {base:.2f} CPU s = {ns * calls / 1e9 / base * 100:.3f} % (the pairs' "
          f"spread, {(min(ratios) - 1) * 100:+.1f} % to {(max(ratios) - 1) * 100:+.1f} %, is the box's noise)")
    if args.json:
        Path(args.json).write_text(json.dumps({"nodes": args.nodes, "minutes": args.minutes, "pairs": rows,
                                               "median_ratio": med, "per_call_ns": ns}, indent=1) + "\n")


if __name__ == "__main__":
    main()
