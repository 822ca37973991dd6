#!/usr/bin/env python3
"""The model cell's speed and memory at scale (issue 16, acceptance 2): the MASB Table 3 scenario
(GCD-shaped generator, SAN on) at N nodes, on the per-node path and on the fast path. Figures
are printed; nothing is asserted (wall time depends on the box).

    scripts/bench_scale.py [--nodes 2000 12500] [--minutes 30] [--paths per-node fast]
                           [--profile FROM:TO] [--max-wall-s S] [--max-rss-gib G] [--out DIR]

Each (nodes, path) runs in its own process (its peak RSS is its own). Per run: the warm start
(wall and CPU seconds until the first tick, i.e. the initial population placed; and until no
task waits), the steady simulated minutes per wall minute and per CPU minute (median over the
ticks after the first, the profiled window left out), peak RSS, tasks, migrations, and with
--profile a cProfile of simulated minutes FROM..TO (profile.txt, and a breakdown by part).
--max-wall-s / --max-rss-gib stop a run early (its figures so far are printed, marked "cut").

Paths: ``per-node`` is the scenario as it is (every node sampled and reported every minute, the
broker permuting every fresh node); ``fast`` adds ``cell.sampling=event`` and
``policy.san.pool_sampling=draw`` (statistically equivalent: tests/component/test_scale_equivalence.py);
``fast+window`` adds ``cell.arrival_window=10000`` (the warm start in waves, which bounds memory
but changes behaviour: see docs/results/scale-benchmark.md); ``fast+backoff`` adds
``cell.retry_backoff=true`` (changes behaviour too).
RSS is printed at the first tick (the warm start's end) and at its peak.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cellbed.experiment.profiling import ProfileWindow, parse_window  # noqa: E402 (after the path)
from cellbed.experiment.runner import model_cell_params  # noqa: E402
from cellbed.experiment.scenario.file import load_scenario  # noqa: E402
from cellbed.model.cell import ModelCell  # noqa: E402
from cellbed.experiment.profiling import parts_table  # noqa: E402
from cellbed.runtime.clock import run_virtual  # noqa: E402

SCENARIO = REPO / "scenarios" / "masb-table3-masb.toml"
FAST = ["cell.sampling=event", "policy.san.pool_sampling=draw"]
PATHS = {"per-node": [], "fast": FAST, "fast+window": [*FAST, "cell.arrival_window=10000"],
         "fast+backoff": [*FAST, "cell.retry_backoff=true"]}


class Cut(Exception):
    """A run stopped early by --max-wall-s or --max-rss-gib."""


def rss_gib() -> float:
    """This process's resident set now (Linux /proc), GiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 30


def one(nodes: int, minutes: float, path: str, profile: str, out: Path, max_wall_s: float, max_rss: float) -> dict:
    sets = [f"cell.nodes={nodes}", f"run.duration_s={minutes * 60:g}", *PATHS[path]]
    sc = load_scenario(SCENARIO, sets)
    window = ProfileWindow(*parse_window(profile), out) if profile else None
    ticks: list[tuple[float, float, float, int]] = []
    first_rss: list[float] = []
    w0, c0 = time.perf_counter(), time.process_time()

    def on_tick(t) -> None:
        ticks.append((t.t_s, time.perf_counter() - w0, time.process_time() - c0, t.tasks_pending))
        if len(ticks) == 1:
            first_rss.append(rss_gib() * 1024)
        if window is not None:
            window.on_tick(t.t_s)
        if (max_wall_s and ticks[-1][1] > max_wall_s) or (max_rss and rss_gib() > max_rss):
            raise Cut(f"stopped at {t.t_s / 60:g} simulated min")

    cut = ""
    s = None
    cell = ModelCell(model_cell_params(sc), on_tick=on_tick)
    try:
        s = run_virtual(cell.run())
    except Cut as e:
        cut = str(e)
    if window is not None:
        window.close(ticks[-1][0] if ticks else 0.0)
    lo, hi = (parse_window(profile) if profile else (-1.0, -1.0))
    steady = [(b[0], b[1] - a[1], b[2] - a[2]) for a, b in zip(ticks, ticks[1:]) if not lo < b[0] <= hi]
    calm = next((x for x in ticks if x[3] == 0), None)
    res = {"nodes": nodes, "path": path, "minutes": ticks[-1][0] / 60 if ticks else 0.0, "cut": cut,
           "warm_wall_s": ticks[0][1] if ticks else None, "warm_cpu_s": ticks[0][2] if ticks else None,
           "no_task_waiting_wall_s": calm[1] if calm else None,
           "steady_sim_min_per_wall_min": statistics.median(60.0 / d for _, d, _ in steady) if steady else None,
           "steady_sim_min_per_cpu_min": statistics.median(60.0 / c for _, _, c in steady) if steady else None,
           "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
           "rss_first_tick_mib": first_rss[0] if first_rss else None,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if s is not None:
        res.update(lost=len(s.lost), duplicated=len(s.duplicated), tasks_live=s.tasks_live,
                   pending=s.tasks_pending, migrations=len(s.migrations),
                   overloaded_mean=statistics.fmean(t.overloaded / t.nodes for t in s.ticks),
                   no_room={k: v for k, v in sorted(s.broker_counters.items()) if k.startswith("allocations_no_room")},
                   deferred={k: v for k, v in sorted(cell.frontend.counters.items())
                             if k.startswith("placement_deferred")})
    return res


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 10 else f"{v:,.1f}"
    return "-" if v is None else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[2000])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--paths", nargs="+", default=["per-node", "fast"], choices=sorted(PATHS))
    ap.add_argument("--profile", default="", help="FROM:TO simulated minutes to cProfile")
    ap.add_argument("--max-wall-s", type=float, default=0.0)
    ap.add_argument("--max-rss-gib", type=float, default=0.0)
    ap.add_argument("--out", type=Path, default=REPO / "results" / "bench-scale")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.nodes[0], a.minutes, a.paths[0], a.profile, a.out, a.max_wall_s, a.max_rss_gib)))
        return
    rows = []
    for n in a.nodes:
        for p in a.paths:
            out = a.out / f"{n}-{p}"
            out.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, __file__, "--one", "--nodes", str(n), "--minutes", str(a.minutes), "--paths", p,
                   "--out", str(out), "--max-wall-s", str(a.max_wall_s), "--max-rss-gib", str(a.max_rss_gib)]
            if a.profile:
                cmd += ["--profile", a.profile]
            print(f"$ {' '.join(cmd)}", flush=True)
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                          cwd=REPO).stdout.strip().splitlines()[-1])
            (out / "bench.json").write_text(json.dumps(r, indent=1) + "\n")
            print(json.dumps(r), flush=True)
            if a.profile and (out / "profile.pstats").exists():
                print("\n".join(parts_table(out / "profile.pstats")), flush=True)
            rows.append(r)
    keys = ["nodes", "path", "minutes", "warm_wall_s", "warm_cpu_s", "steady_sim_min_per_wall_min",
            "steady_sim_min_per_cpu_min", "peak_rss_mib", "migrations", "overloaded_mean", "lost", "duplicated", "cut"]
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(_fmt(r.get(k)) for k in keys) + " |")


if __name__ == "__main__":
    main()
