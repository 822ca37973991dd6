"""Issue 16, acceptance 1: the model cell's fast paths against the per-node path.

The fast path (``cell.sampling = "event"``: a host whose tasks kept their use since its last two
samples skips the sample, and reports again only when that changes or before its brokers' entry
expires; ``policy.san.pool_sampling = "draw"``: the broker draws the head of its random scan
order instead of permuting every fresh node) is not exact: it changes when agents run and which
random numbers they draw, so a seeded run takes another trajectory. It must be statistically
indistinguishable. The MASB Table 3 scenario, seeds 1–3, one run per path and seed:

* tasks: none lost or duplicated, in any run;
* ASR class shares (idle, overloaded, STA, TA, PA, DA: the tick-mean share of nodes per run) and
  the overloaded share: the mean over the 3 seeds of the paired difference (fast - per-node, same
  seed) within an equivalence margin, a two-sided equivalence (TOST-style margin) test with the
  seeds as the replicates;
* tasks waiting for a placement (the tick-mean share of live tasks): mean paired difference
  within a margin;
* migrations (succeeded, summed over the 3 seeds): |fast - per-node| ≤ 3·sqrt(fast + per-node),
  a 3σ bound for two independent Poisson counts (after the first differing decision the two
  trajectories are independent draws from the same workload); this bound scales by itself.

Sizes (issue 27: long campaigns belong in benchmarks, with a short version in CI). The reference
is a 2,000-node cell for 60 simulated minutes, margins 1 percentage point per class, 0.2 point for
overloaded (the paper's target being ≤ 0.5 %), 0.5 point for the waiting share:
``scripts/bench_scale_equivalence.py`` runs it (250–800 CPU-s by the box's load) with the
functions below and prints the figures, for seeds 1–3 and other triples (``--seeds``). This test
runs them on CI_NODES = 300 nodes for CI_MINUTES = 30 simulated minutes (~15 CPU-s a run), with
two changes:

* the scenario's initial_scan_limit (200) is scaled with the cell (``scan_limit``: 30 at 300
  nodes), so the drawn head (2 x limit) is 20 % of the fresh nodes as at 2,000. Unscaled, a cell
  of ≤ 400 nodes never takes the draw branch (fresh ≤ 2 x limit: the broker permutes), and the
  fast path would be event sampling alone (at 400 nodes, 20 min, unscaled: per-seed migrations
  within ±9 of the per-node path's, the trajectories hardly parting);
* the ASR class margins (idle, STA, TA, PA, DA) are the reference's times sqrt(2,000 / nodes)
  (2.58 points at 300 nodes; ``margins``): a class share is a mean over nodes, so the paired
  difference's seed-to-seed noise grows as the cell shrinks. Measured over seeds 1–12 at 300
  nodes, 30 min: the per-seed paired difference of PA has sd 0.0164 (DA 0.0159, TA 0.0039), so
  a 3-seed mean has se 0.0095 and the margin is 2.7 se. The reference on this code (the
  benchmark, seeds 1–3) gives PA differences -0.0040, +0.0027, -0.0015 (sd 0.0034; DA sd
  0.0050): its 1-point margin is 5.1 se (DA 3.4 se). So the CI margin is wider in points and
  narrower in standard errors than the reference's; the small cell is noisier than the square
  root alone predicts (a 3-seed sd is itself uncertain by a factor of ~2). The overloaded margin
  stays 0.2 point (the paper's absolute target; measured sd 0.0001 per seed at 300 nodes) and
  the waiting margin 0.5 point (no task waited at the end of any run, at either size). At 300
  nodes, 30 min, each triple passes; mean paired PA difference, then migrations fast - per-node
  against the bound: 1–3 +0.0000, -5 of ±98; 4–6 +0.0032, +31 of ±97; 7–9 -0.0029, +69 of ±94;
  10–12 +0.0153, -19 of ±106 (0 lost, duplicated or waiting in all 24 runs;
  ``scripts/bench_scale_equivalence.py --nodes 300 --minutes 30 --seeds 1,2,3 --seeds 4,5,6 ...``).

Both paths are checked to be what they claim: the per-node runs skip no sample, the fast runs
skip some, and the cell has more fresh nodes than the drawn head.

``cell.arrival_window`` (the warm start in waves, for memory) is not part of the fast path: this
test, run with it, failed (window 2,000: PA +2.1 points in each seed, migrations -10 %, beyond both
margins; docs/results/scale-benchmark.md), so it is a knob that changes behaviour, like
``cell.retry_backoff``. The exact optimisations (report checks, sync checks, the counters) are covered by the golden runs
(tests/component/test_golden_runs.py: byte-identical ticks/migrations/allocations on the per-node
path) and by tests/unit/test_scale_fastpaths.py. The runs print their figures (-s).
"""
from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from cellbed.experiment.runner import model_cell_params
from cellbed.experiment.scenario.file import load_scenario
from cellbed.model.cell import ModelCell
from cellbed.runtime.clock import run_virtual

pytestmark = pytest.mark.slow       # six model runs: the full suite, not --quick

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "masb-table3-masb.toml"
SEEDS = (1, 2, 3)
REF_NODES, REF_MINUTES = 2000, 60       # the reference (scripts/bench_scale_equivalence.py)
CI_NODES, CI_MINUTES = 300, 30          # this test
CLASSES = ("idle", "overloaded", "sta", "ta", "pa", "da")
REF_MARGIN = {c: 0.01 for c in CLASSES} | {"overloaded": 0.002}
REF_WAITING_MARGIN = 0.005   # tasks waiting for a placement, share of live tasks: mean paired difference
REF_SCAN_LIMIT = 200     # the scenario's policy.san.initial_scan_limit
PATHS = {"per-node": [], "fast": ["cell.sampling=event", "policy.san.pool_sampling=draw"]}


def margins(nodes: int) -> tuple[dict[str, float], float]:
    """The class margins and the waiting margin for a cell of *nodes*: the reference's, the ASR
    classes' scaled by sqrt(REF_NODES / nodes) (the standard error of a share over nodes); the
    overloaded and the waiting margins as they are (see the module's docstring)."""
    k = math.sqrt(REF_NODES / nodes)
    return ({c: m if c == "overloaded" else m * k for c, m in REF_MARGIN.items()}, REF_WAITING_MARGIN)


def scan_limit(nodes: int) -> int:
    """The scenario's initial_scan_limit (200 at 2,000 nodes) scaled with the cell: the drawn head
    (2 x the limit) stays the same fraction of the fresh nodes (20 %). Unscaled, a cell of 400 nodes
    or fewer never takes the draw branch (the broker permutes whenever fresh ≤ 2 x limit)."""
    return max(1, round(REF_SCAN_LIMIT * nodes / REF_NODES))


def run_one(path: str, seed: int, nodes: int, minutes: int) -> dict:
    """One model run of SCENARIO on *path*; its per-run figures."""
    sets = [f"cell.nodes={nodes}", f"run.duration_s={minutes * 60}", f"run.seed={seed}",
            f"policy.san.initial_scan_limit={scan_limit(nodes)}", *PATHS[path]]
    sc = load_scenario(SCENARIO, sets)
    w, c = time.perf_counter(), time.process_time()
    cell = ModelCell(model_cell_params(sc))
    s = run_virtual(cell.run())
    out = {"lost": len(s.lost), "duplicated": len(s.duplicated),
           "samples_skipped": sum(san.node.samples_skipped for san in cell.frontend.sans.values()),
           "wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c,
           "migrations": sum(t.migrations_succeeded for t in s.ticks), "pending_end": s.ticks[-1].tasks_pending,
           "waiting": sum(t.tasks_pending / max(1, t.tasks_running + t.tasks_pending) for t in s.ticks) / len(s.ticks)}
    for cl in CLASSES:
        out[cl] = sum(getattr(t, cl) / t.nodes for t in s.ticks) / len(s.ticks)
    return out


def run_all(seeds, nodes: int, minutes: int, workers: int | None = None) -> dict[str, list[dict]]:
    """Both paths for every seed, in as many processes as there are cores (each run is
    single-threaded): {path: [run per seed, in the order of *seeds*]}."""
    jobs = [(p, seed) for p in PATHS for seed in seeds]
    ctx = multiprocessing.get_context("spawn")       # a fresh interpreter: no event loop inherited
    n = len(jobs)
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(n, workers or os.cpu_count() or 1),
                                                mp_context=ctx) as pool:
        done = dict(zip(jobs, pool.map(run_one, *zip(*jobs), [nodes] * n, [minutes] * n)))
    return {p: [done[(p, seed)] for seed in seeds] for p in PATHS}


def _mean_diff(runs: dict[str, list[dict]], key: str) -> float:
    diffs = [f[key] - s[key] for f, s in zip(runs["fast"], runs["per-node"])]
    return sum(diffs) / len(diffs)


def check_lost(runs, seeds) -> tuple[bool, str]:
    bad = [(p, seed, r["lost"], r["duplicated"]) for p, rs in runs.items() for seed, r in zip(seeds, rs)
           if r["lost"] or r["duplicated"]]
    return not bad, f"lost/duplicated: {'none' if not bad else bad}"


def check_paths(runs, nodes: int) -> tuple[bool, str]:
    """The per-node runs skipped no sample, the fast runs did; the cell is big enough for the
    drawn scan order (fresh nodes > 2 x initial_scan_limit)."""
    per_node = [r["samples_skipped"] for r in runs["per-node"]]
    fast = [r["samples_skipped"] for r in runs["fast"]]
    ok = all(n == 0 for n in per_node) and all(n > 0 for n in fast) and nodes > 2 * scan_limit(nodes)
    return ok, (f"samples skipped: per-node {per_node}, fast {fast}; {nodes} nodes, drawn head "
                f"{2 * scan_limit(nodes)} (initial_scan_limit {scan_limit(nodes)})")


def check_classes(runs, nodes: int) -> tuple[bool, str]:
    margin, _ = margins(nodes)
    ok, lines = True, []
    for cl in CLASSES:
        mean = _mean_diff(runs, cl)
        ok = ok and abs(mean) <= margin[cl]
        lines.append(f"{cl}: per-node {[round(r[cl], 4) for r in runs['per-node']]} "
                     f"fast {[round(r[cl], 4) for r in runs['fast']]} mean diff {mean:+.4f} "
                     f"(margin {margin[cl]:.4f}){'' if abs(mean) <= margin[cl] else '  FAIL'}")
    return ok, "\n".join(lines)


def check_migrations(runs) -> tuple[bool, str]:
    a = sum(r["migrations"] for r in runs["per-node"])
    b = sum(r["migrations"] for r in runs["fast"])
    return (a > 0 and abs(a - b) <= 3 * math.sqrt(a + b),
            f"migrations: per-node {[r['migrations'] for r in runs['per-node']]} = {a}, "
            f"fast {[r['migrations'] for r in runs['fast']]} = {b}, diff {b - a:+d}, bound {3 * math.sqrt(a + b):.0f}; "
            f"CPU s per-node {[round(r['cpu_s'], 1) for r in runs['per-node']]} "
            f"fast {[round(r['cpu_s'], 1) for r in runs['fast']]}")


def check_waiting(runs, nodes: int) -> tuple[bool, str]:
    _, margin = margins(nodes)
    mean = _mean_diff(runs, "waiting")
    return (abs(mean) <= margin,
            f"waiting share: per-node {[round(r['waiting'], 4) for r in runs['per-node']]} "
            f"fast {[round(r['waiting'], 4) for r in runs['fast']]} mean diff {mean:+.4f} (margin {margin:.4f}); "
            f"waiting at the end: per-node {[r['pending_end'] for r in runs['per-node']]} "
            f"fast {[r['pending_end'] for r in runs['fast']]}")


@pytest.fixture(scope="module")
def runs() -> dict[str, list[dict]]:
    """The six runs (CI_NODES nodes, CI_MINUTES simulated minutes)."""
    return run_all(SEEDS, CI_NODES, CI_MINUTES)


def test_no_task_is_lost_or_duplicated_on_either_path(runs):
    ok, text = check_lost(runs, SEEDS)
    assert ok, text


def test_both_paths_are_what_they_claim(runs):
    ok, text = check_paths(runs, CI_NODES)
    print("\n" + text)
    assert ok, text


def test_asr_class_shares_are_equivalent(runs):
    ok, text = check_classes(runs, CI_NODES)
    print("\n" + text)
    assert ok, text


def test_migration_counts_are_equivalent(runs):
    ok, text = check_migrations(runs)
    print("\n" + text)
    assert ok, text


def test_tasks_waiting_for_a_placement_are_equivalent(runs):
    """Event sampling changes when the brokers hear of free room; the share of live tasks waiting
    for a placement (tick mean) must not move by more than the waiting margin."""
    ok, text = check_waiting(runs, CI_NODES)
    print("\n" + text)
    assert ok, text
