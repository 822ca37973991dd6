"""The Megha reproduction sweeps of scripts/bench_megha.py (`sweep-size`, `sweep-gmlm`; seed 001
Figs 6, 8 and 9) at tiny size. Structure only: every task is accounted for, one row per
configuration, percentiles ordered, parts and counters consistent, the model cell's
no-double-allocation check held. Nothing here depends on the speed of the machine."""
from __future__ import annotations

import importlib.util
import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("bench_megha", os.path.join(ROOT, "scripts", "bench_megha.py"))
bench = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_megha", bench)          # dataclasses look their module up
_spec.loader.exec_module(bench)

QUANTILES = ("p50", "p90", "p99", "p99.9", "max")
PARTS = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms")
MEGHA_COUNTERS = ("launch_requests", "repartitions", "inconsistency_internal", "inconsistency_external", "requeued")


def check_row(r: dict) -> None:
    where = f"{r['frontend']} {r['nodes']} nodes {r['gms']}x{r['lms']}"
    assert r["tasks"] > 0, where
    # every task placed, or pending at the drain deadline, exactly once
    assert r["placed"] + r["pending"] + r["rejected"] == r["tasks"], where
    assert r["unaccounted"] == 0 and r["duplicate_records"] == 0, where
    assert r["double_allocation_check"] == "ok", where
    assert r["placed"] > 0, where
    q = [r[k] for k in QUANTILES]
    assert all(math.isfinite(x) and x >= 0 for x in q), (where, q)
    assert q == sorted(q), (where, q)                       # p50 <= p90 <= p99 <= p99.9 <= max
    # the four parts add up to the allocation time of every task, so their shares sum to 1
    shares = [r[f"{p}_share"] for p in PARTS]
    assert all(s >= 0 for s in shares) and sum(shares) == pytest.approx(1.0, abs=1e-6), (where, shares)
    for k in MEGHA_COUNTERS + ("probes", "claims_refused", "lm_inconsistency_internal", "lm_inconsistency_external"):
        assert r[k] >= 0, (where, k)
    if r["frontend"] == "sampling":
        assert r["probes"] >= r["placed"], where            # d = 2 probes per task
        assert r["worker_queue_ms_share"] >= 0
    else:
        # a stale request is counted once by the GM that sent it and once by the LM that refused it
        assert r["inconsistency_internal"] == r["lm_inconsistency_internal"], where
        assert r["inconsistency_external"] == r["lm_inconsistency_external"], where
        assert r["launch_requests"] + r["repartitions"] >= r["placed"], where
        assert r["worker_queue_ms_share"] == 0, where       # the LM validated the node


def test_sweep_size_one_row_per_size_and_frontend():
    sizes, fes = [150, 300], ("megha", "central", "sampling")
    rows = bench.sweep_size(sizes, fes, gms=2, lms=3, base_nodes=150, base_job_rate=3.0, duration_s=4.0,
                            drain_s=60.0, quiet=True)
    assert [(r["nodes"], r["frontend"]) for r in rows] == [(n, fe) for n in sizes for fe in fes]
    for r in rows:
        check_row(r)
        assert r["job_rate"] == pytest.approx(3.0 * r["nodes"] / 150)   # the workload scales with the cell
        if r["frontend"] == "central":
            assert (r["gms"], r["lms"]) == (1, 1)
        elif r["frontend"] == "megha":
            assert (r["gms"], r["lms"]) == (2, 3)
    for n in sizes:                                         # one seeded workload per size, for every front-end
        assert len({r["tasks"] for r in rows if r["nodes"] == n}) == 1


def test_sweep_gmlm_one_row_per_configuration_and_pending_accounted():
    rows = bench.sweep_gmlm(200, [1, 2], [1, 4], job_rate=4.0, duration_s=4.0, drain_s=60.0, quiet=True)
    assert [(r["gms"], r["lms"]) for r in rows] == [(1, 1), (1, 4), (2, 1), (2, 4)]
    assert len({r["tasks"] for r in rows}) == 1             # the same tasks for every configuration
    for r in rows:
        assert r["frontend"] == "megha" and r["nodes"] == 200
        check_row(r)
    # stopped right after the last arrival: the tasks not started yet are pending, and still accounted for
    cut = bench.sweep_gmlm(200, [2], [2], job_rate=4.0, duration_s=4.0, drain_s=0.0, quiet=True)
    assert len(cut) == 1 and cut[0]["pending"] > 0
    check_row(cut[0])


def test_sweep_cli_writes_outputs_and_keeps_the_reading(tmp_path):
    args = ["--out", str(tmp_path), "sweep-gmlm", "--nodes", "150", "--gms", "1,2", "--lms", "2", "--job-rate", "3",
            "--duration-s", "3", "--drain-s", "60"]
    bench.main(args)
    for f in ("megha-gmlm.md", "megha-gmlm.csv", "megha-gmlm.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    md = tmp_path / "megha-gmlm.md"
    assert "| 1 | 2 |" in md.read_text() and "| 2 | 2 |" in md.read_text()
    assert "Regenerate" in md.read_text()
    md.write_text(md.read_text() + "\n## Reading\n\nhand-written.\n")
    bench.main(args + ["--render-only"])                    # tables again from the CSV, the reading kept
    text = md.read_text()
    assert text.count("## Reading") == 1 and text.rstrip().endswith("hand-written.")
    assert "| 2 | 2 |" in text
