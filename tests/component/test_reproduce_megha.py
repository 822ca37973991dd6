"""scripts/reproduce_megha.py summarize (issue 16, item 5): the Megha figures' pages from a sweep's
run folders. A tiny sweep (2 front-ends x 2 sizes x 2 seeds) is run into the folders its plan
names, as `cellctl sweep` would; the page must show each configuration's mean (min–max) of the
seeds' own numbers, account for every task, name a missing run, and keep the hand-written
reading."""
from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from cellbed.experiment import load_scenario
from cellbed.experiment.runner import run_scenario
from cellbed.experiment.sweep.plan import load_spec, plan_sweep

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
_spec = importlib.util.spec_from_file_location("reproduce_megha", REPO / "scripts" / "reproduce_megha.py")
rm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rm)

SPEC = f"""name = "tiny-size"
scenarios = ["{REPO}/scenarios/megha-jobs-megha.toml", "{REPO}/scenarios/megha-jobs-sampling.toml"]
seeds = [1, 2]
[grid]
"cell.nodes" = [200, 300]
[set]
"workload.jobs.arrivals_s" = 5.0
"run.duration_s" = 60.0
"policy.megha.gms" = 2
"policy.megha.lms" = 2
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    spec = root / "tiny-size.toml"
    spec.write_text(SPEC)
    results = root / "results"
    for r in plan_sweep(load_spec(spec)).runs:
        run_scenario(load_scenario(r.scenario, list(r.overrides)), r.folder(results), progress=None, report=False)
    return spec, results


def test_the_page_shows_mean_and_range_of_each_configuration(sweep, tmp_path):
    spec, results = sweep
    md = rm.summarize_figure("size", spec, results, tmp_path)
    rows = list(csv.DictReader(open(tmp_path / "megha-size.csv")))
    assert len(rows) == 8
    assert {(r["frontend"], r["nodes"], r["seed"]) for r in rows} == {
        (fe, n, s) for fe in ("megha", "sampling") for n in ("200", "300") for s in ("1", "2")}
    for r in rows:
        assert int(r["placed"]) + int(r["pending"]) == int(r["tasks"]) > 0
    text = md.read_text()
    for fe in ("megha", "sampling"):
        for n in (200, 300):
            g = [r for r in rows if r["frontend"] == fe and r["nodes"] == str(n)]
            p50 = np.array([float(r["p50"]) for r in g])
            cell = f"{p50.mean():.2f} ({p50.min():.2f}–{p50.max():.2f})"
            line = next(x for x in text.splitlines() if x.startswith(f"| {n} | {fe} | 2 |"))
            assert cell in line, (line, cell)
    assert "accounted for every task exactly once" in text and "Missing runs" not in text
    # the two front-ends' seeds differ (the seed reaches the workload), and sampling's tail is long
    assert len({r["tasks"] for r in rows if r["nodes"] == "300"}) == 2
    worst = {fe: max(float(r["p99"]) for r in rows if r["frontend"] == fe) for fe in ("megha", "sampling")}
    assert worst["sampling"] > worst["megha"]


def test_a_missing_run_is_named_and_the_reading_is_kept(sweep, tmp_path):
    spec, results = sweep
    md = rm.summarize_figure("size", spec, results, tmp_path)
    md.write_text(md.read_text() + "\n## Reading\n\nhand-written.\n")
    run = plan_sweep(load_spec(spec)).runs[-1]
    events = run.folder(results) / "events.jsonl"
    kept = events.read_text()
    try:
        events.write_text(kept.splitlines()[0] + "\n")          # as if the run had been cut short
        rm.summarize_figure("size", spec, results, tmp_path)
    finally:
        events.write_text(kept)
    text = md.read_text()
    assert f"**Missing runs** (not completed, left out): {run.key}." in text
    assert text.count("## Reading") == 1 and text.rstrip().endswith("hand-written.")
    assert len(list(csv.DictReader(open(tmp_path / "megha-size.csv")))) == 7


def test_spread_reads_mean_min_max_and_one_seed_plainly():
    from sweep_tables import spread
    assert spread([1.0, 2.0, 6.0], 1) == "3.0 (1.0–6.0)"
    assert spread([4.0], 2) == "4.00"
    assert spread([float("nan"), 2.0], 0) == "2 (2–2)"
    assert spread([None, None], 1) == "n/a"
