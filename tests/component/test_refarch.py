"""The reference architecture's experiment in CI (issue 29, acceptance 5): a 2 x 2 of its sweep
(FIFO and SRTF x First- and Best-Fit of the outside package examples/refarch-policies), short, on
a Dask LocalCluster; the job metrics in each run's summary and in the sweep's report are the ones
computed from the run's own files; each run's manifest records the plugins it loaded."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from cellbed.experiment.report.jobs import job_metrics
from cellbed.experiment.report.summary import summarize
from cellbed.experiment.results.writer import load_run

REPO = Path(__file__).resolve().parents[2]


def test_a_2x2_refarch_sweep_with_the_outside_package(tmp_path):
    out = tmp_path / "sweep"
    p = subprocess.run([sys.executable, "-m", "cellbed.cli.main", "sweep", str(REPO / "sweeps" / "refarch-ci.toml"),
                        "--out", str(out), "--workers", "2", "--json"], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert (res["total"], res["ran"], res["failed"]) == (4, 4, [])
    runs = sorted(out.glob("refarch/*/seed-1"))
    assert len(runs) == 4
    trt = {}
    for d in runs:
        run = load_run(d)
        with open(d / "tasks.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        tasks = {"task": [r["task"] for r in rows], "job": [int(r["job"]) for r in rows],
                 "arrival_s": [float(r["arrival_s"]) for r in rows], "duration_s": [float(r["duration_s"]) for r in rows]}
        al = run.allocations(["task", "outcome", "start_s"])
        starts = {t: s for t, o, s in zip(al["task"], al["outcome"], al["start_s"]) if o == "placed"}
        want = job_metrics(tasks, starts)
        got = summarize(run).jobs
        assert got == want and got["jobs"] > 20
        m = json.loads((d / "manifest.json").read_text())
        pol = {x["key"]: x for x in m["policies"]}
        order, alloc = pol["policy.task_order"], pol["policy.allocation"]
        assert order["dist"] == "refarch-policies" and order["origin"] == "entry-point" and order["sha256"]
        assert alloc["origin"] in ("entry-point", "file") and alloc["name"] in ("FIRSTFIT", "BESTFIT")
        if alloc["origin"] == "file":
            assert alloc["target"].endswith("allocation.py:best_fit") and alloc["dist"] == ""
        trt[(order["name"], alloc["name"])] = got["trt_mean_s"]
        assert (d / "stages.csv").exists()
    assert set(trt) == {("FIFO", "FIRSTFIT"), ("FIFO", "BESTFIT"), ("SRTF", "FIRSTFIT"), ("SRTF", "BESTFIT")}
    r = subprocess.run([sys.executable, "-m", "cellbed.cli.main", "report", str(out)], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    report = list(csv.DictReader(open(out / "sweep.csv")))
    assert len(report) == 4 and all(float(r["jobs.trt_mean_s_mean"]) > 0 for r in report)
    assert "stage_us.task_order_mean" in report[0] and "stage_us.allocation_mean" in report[0]
