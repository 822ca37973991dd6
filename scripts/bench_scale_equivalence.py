#!/usr/bin/env python3
"""The scale equivalence at full size (issue 16, acceptance 1; issue 27): prints figures.

tests/component/test_scale_equivalence.py runs a CI-sized cell; this runs the same code
(its run_all and check_* functions) on the reference cell, 2,000 nodes for 60 simulated
minutes with the reference margins, or any other size (initial_scan_limit and the ASR class
margins scaled as the test's docstring says):

  bench_scale_equivalence.py                                   2,000 nodes, 60 min, seeds 1,2,3
  bench_scale_equivalence.py --seeds 1,2,3 --seeds 4,5,6       several seed triples (all runs in one pool)
  bench_scale_equivalence.py --nodes 300 --minutes 30 --seeds 4,5,6 --seeds 7,8,9
                                                               the CI size on other seeds

For each triple: the test's checks (lost/duplicated, both paths exercised, ASR class shares,
migrations, waiting share) with PASS/FAIL; then, over all seeds, the standard deviation of the
per-seed paired difference (fast - per-node) of each share and the standard error of a 3-seed
mean against its margin. The test's docstring has the figures for the CI size.
Exit status 1 if any check failed. The full size takes 250–800 CPU-s by the box's load (2 cores:
2–7 min wall).
--json FILE writes every run's figures.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.component import test_scale_equivalence as eq  # noqa: E402 (after ROOT is on the path)


def _seeds(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(","))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=eq.REF_NODES)
    ap.add_argument("--minutes", type=int, default=eq.REF_MINUTES)
    ap.add_argument("--seeds", type=_seeds, action="append",
                    help="a seed triple, e.g. 4,5,6 (repeatable; default 1,2,3)")
    ap.add_argument("--workers", type=int, default=None, help="processes (default: one per core)")
    ap.add_argument("--json", default=None, help="write every run's figures here")
    args = ap.parse_args(argv)
    triples = args.seeds or [eq.SEEDS]
    seeds = tuple(dict.fromkeys(s for t in triples for s in t))
    w = time.perf_counter()
    runs = eq.run_all(seeds, args.nodes, args.minutes, args.workers)
    wall = time.perf_counter() - w
    by_seed = {p: dict(zip(seeds, rs)) for p, rs in runs.items()}
    cpu = sum(r["cpu_s"] for rs in runs.values() for r in rs)
    print(f"scale equivalence: {args.nodes} nodes, {args.minutes} simulated min, {len(seeds)} seeds x 2 paths; "
          f"{wall:.0f} s wall, {cpu:.0f} CPU-s in the runs ({cpu / len(seeds) / 2:.1f} per run)")
    failed = 0
    for t in triples:
        sub = {p: [by_seed[p][s] for s in t] for p in runs}
        checks = [eq.check_lost(sub, t), eq.check_paths(sub, args.nodes), eq.check_classes(sub, args.nodes),
                  eq.check_migrations(sub), eq.check_waiting(sub, args.nodes)]
        print(f"\n## seeds {','.join(map(str, t))}")
        for ok, text in checks:
            failed += not ok
            print(f"[{'PASS' if ok else 'FAIL'}] {text}")
    if len(seeds) >= 3:
        margin, wmargin = eq.margins(args.nodes)
        print(f"\n## per-seed paired differences over {len(seeds)} seeds (fast - per-node)")
        for key, m in [*margin.items(), ("waiting", wmargin)]:     # the spread of what the margins bound
            d = [by_seed["fast"][s][key] - by_seed["per-node"][s][key] for s in seeds]
            sd = statistics.stdev(d)
            se3 = sd / math.sqrt(3)
            print(f"{key}: mean {statistics.fmean(d):+.4f} sd {sd:.4f} max |d| {max(map(abs, d)):.4f}; "
                  f"se of a 3-seed mean {se3:.4f}, margin {m:.4f} = {m / se3 if se3 else math.inf:.1f} se")
        mig = [by_seed["fast"][s]["migrations"] - by_seed["per-node"][s]["migrations"] for s in seeds]
        print(f"migrations per seed, fast - per-node: {mig}")
    if args.json:
        with open(args.json, "w") as f:
            runs_out = {p: {str(s): r for s, r in d.items()} for p, d in by_seed.items()}
            json.dump({"nodes": args.nodes, "minutes": args.minutes, "runs": runs_out}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
