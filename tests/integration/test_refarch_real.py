"""Issue 29, the §V-B experiment on real VMs, short: `cellctl compare` of
scenarios/refarch-real.toml (Megha 1 GM x 1 LM on a real 3-host cell: one host of 4 cores, two of
2; the GM loading the outside package's SRTF task order and Best-Fit allocation) at 18 tasks in 8
jobs over 60 wall seconds, beside its model twin. The four full-size runs are
scripts/refarch_real.py (docs/results/refarch.md).

Asserted: every task was submitted once, started once on a host of the cell and is in
allocations.csv with the GM's own stamps; tasks that ran their duration were stopped by the LM
and the end census found no VM lost, duplicated or left over; the GM (not the runner) loaded the
plugins, as the manifest says; the job metrics of both sides come from their own folders; the
cell is gone afterwards."""
import csv
import json
import pytest

from cellbed.experiment import load_run
from cellbed.experiment.report.summary import job_metrics_of
from tests.integration.conftest import cell_leftovers, cellctl_real

pytestmark = pytest.mark.integration

# seed 6: 18 tasks in 8 jobs; 240 simulated s of arrivals at compression 4 = 60 wall s; tasks of
# 80-240 simulated s (20-60 wall, longer than a TCG boot of 15-30 s, so the twin's boot time can be
# fitted): the first three end at 30-33 wall s, the last task arrives at 57 s, so some are stopped
# by the LM before the run ends (at the last start)
SETS = [f"{k}={v}" for k, v in {
    "run.seed": 6, "workload.time_compression": 4, "workload.jobs.arrivals_s": 240, "workload.jobs.task_min_s": 80,
    "workload.jobs.task_max_s": 240, "workload.jobs.job_rate_per_1k_nodes": 15, "run.duration_s": 1200, "policy.task_order": "refarch.srtf",
    "policy.allocation": "refarch.bestfit"}.items()]


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    return cellctl_real(tmp_path_factory, "compare", "refarch-real.toml", SETS)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_every_task_started_once_through_the_gm_and_nothing_was_left(compared):
    out, _ = compared
    real = load_run(out / "real")
    assert cell_leftovers(real.manifest["extra"]["real_cell"]["name"]) == (set(), set())     # the real cell is gone again
    s = real.completed
    assert s["ok"] and s["driver"] == "real"
    t = s["tasks"]
    assert (t["lost"], t["duplicated"], t["stray"], t["in_flight"]) == (0, 0, 0, 0), t
    tasks = rows(out / "real" / "tasks.csv")
    assert len(tasks) == t["added"] == 18
    alloc = rows(out / "real" / "allocations.csv")
    assert sorted(a["task"] for a in alloc) == sorted(x["task"] for x in tasks)     # once each
    assert {a["outcome"] for a in alloc} == {"placed"}
    assert {a["host"] for a in alloc} <= {"h1", "h2", "h3"}
    for a in alloc:
        assert float(a["start_s"]) >= float(a["arrival_s"]) and float(a["total_ms"]) >= 0
    assert "tasks_rejected" not in s["runner"] and "placement_invalid" not in s["runner"], s["runner"]
    assert s["runner"]["vms_stopped"] >= 1                     # tasks that ran their duration, stopped by the LM


def test_the_gm_loaded_the_outside_plugins(compared):
    out, _ = compared
    m = json.loads((out / "real" / "manifest.json").read_text())
    pol = {x["key"]: x for x in m["policies"]}
    order, alloc = pol["policy.task_order"], pol["policy.allocation"]
    assert (order["name"], alloc["name"]) == ("SRTF", "BESTFIT")
    assert order["dist"] == alloc["dist"] == "refarch-policies"
    agents = {a for x in m["policies"] for a in x.get("agents", [])}
    assert "gm1" in agents, m["policies"]


def test_both_sides_have_the_job_metrics_from_their_own_files(compared):
    out, _ = compared
    real, model = load_run(out / "real"), load_run(out / "model")
    jr, jm = job_metrics_of(real), job_metrics_of(model)
    assert jr["jobs"] == jm["jobs"] == 8 and jr["jobs_unfinished"] == jm["jobs_unfinished"] == 0
    assert jr["njsl_mean"] >= 1.0 and jm["njsl_mean"] >= 1.0
    body = json.loads((out / "compare.json").read_text())
    got = {r["metric"]: r for r in body["metrics"]}
    assert got["TRT mean"]["real"] == pytest.approx(jr["trt_mean_s"])
    assert got["TRT mean"]["model"] == pytest.approx(jm["trt_mean_s"])
    assert body["fit"]["boots"] >= 1                           # the twin's guests boot for the real cell's time
