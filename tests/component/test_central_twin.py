"""The model twin of a real jobs run (cellbed/experiment/twin/central.py; cellctl compare's model
side for policy.frontend = "central"): the real run's tasks on model hosts of the real hosts'
sizes, through the GM and LM with the real cell's settings and the outside package's plugins, its
guests booting for the fitted time, two at a time per host, as the real LM lets them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellbed.controller.megha.workload import arrivals
from cellbed.domain import errors
from cellbed.domain.overhead import GuestOverhead
from cellbed.experiment.compare.run import twin_of
from cellbed.experiment.real.jobs_plan import jobs_plan
from cellbed.experiment.report.summary import job_metrics_of
from cellbed.experiment.results.reader import load_run
from cellbed.experiment.runner import driver_for, run_scenario
from cellbed.experiment.scenario.file import load_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIO = str(REPO / "scenarios" / "refarch-real.toml")


def twin_run(out, *sets, guest=None):
    sc = twin_of(load_scenario(SCENARIO, list(sets)))
    drv = driver_for(sc)
    if guest is not None:
        drv.fit(guest, None)
    return load_run(run_scenario(sc, out, progress=None, driver=drv, report=False).path), sc


def test_the_twin_runs_the_real_runs_tasks_on_the_real_hosts_with_the_plugins(tmp_path):
    run, sc = twin_run(tmp_path / "twin", "policy.task_order=refarch.srtf", "policy.allocation=refarch.bestfit")
    plan = jobs_plan(sc, ("u1",))
    want = arrivals(plan.arrivals)
    a = run.allocations(["task", "outcome", "start_s", "arrival_s", "host"])
    assert sorted(a["task"]) == sorted(x.task.name for x in want)         # every task, once
    assert set(a["outcome"]) == {"placed"}
    assert all(s >= r for s, r in zip(a["start_s"], a["arrival_s"]))
    m = json.loads((run.path / "manifest.json").read_text())
    assert m["extra"]["driver"] == "twin"
    assert m["extra"]["model_cell"]["megha"]["node_classes"] == [[1.0, 4.0, 1024], [1.0, 2.0, 512], [1.0, 2.0, 512]]
    pol = {x["key"]: x for x in m["policies"]}
    assert (pol["policy.task_order"]["name"], pol["policy.allocation"]["name"]) == ("SRTF", "BESTFIT")
    assert pol["policy.task_order"]["dist"] == "refarch-policies"
    j = job_metrics_of(run)
    assert j["jobs"] == len({x.job for x in want}) and j["jobs_unfinished"] == 0
    assert j["njsl_mean"] >= 1.0                   # a job lasts at least its longest task


def test_a_fitted_boot_holds_one_of_two_boot_slots_per_host(tmp_path):
    """A guest boot of 6 wall s is 24 simulated s at compression 4. The LM starts at most 2 guests
    at once per host (the real LM's max_starting_per_host): a third task placed on a host within a
    boot waits for a slot (worker queue), at most one boot long; without a boot none waits."""
    fast, _ = twin_run(tmp_path / "fast", "workload.time_compression=4")
    slow, _ = twin_run(tmp_path / "slow", "workload.time_compression=4", guest=GuestOverhead(boot_s=6.0, boot_cpu_cores=0.5))
    m = json.loads((slow.path / "manifest.json").read_text())
    assert m["extra"]["model_cell"]["guest"]["boot_s"] == 24.0
    wq_fast = fast.allocations(["worker_queue_ms"])["worker_queue_ms"]
    wq_slow = slow.allocations(["worker_queue_ms"])["worker_queue_ms"]
    assert wq_fast.max() == 0.0
    assert (wq_slow > 0).sum() >= 1
    assert wq_slow.max() <= 24_000 * 1.05          # one boot, plus the LM's messages


def test_a_boot_longer_than_a_model_nodes_default_wait_still_starts(tmp_path):
    """A CI run fitted a 15.8-s boot at compression 4: 63 simulated s, beyond the 60 s a model
    node waits for its guest by default, so every StartVm failed and the twin placed nothing. The
    twin's nodes wait what a real node waits (120 wall s) × the compression: 480 simulated s."""
    run, _ = twin_run(tmp_path / "twin", "workload.time_compression=4",
                      guest=GuestOverhead(boot_s=15.83, boot_cpu_cores=0.37))
    m = json.loads((run.path / "manifest.json").read_text())
    assert m["extra"]["model_cell"]["boot_timeout_s"] == 480.0
    assert set(run.allocations(["outcome"])["outcome"]) == {"placed"}
    assert job_metrics_of(run)["jobs_unfinished"] == 0


def test_central_runs_the_jobs_workload_only_and_says_so():
    sc = load_scenario(str(REPO / "scenarios" / "real-3host.toml"), ["policy.frontend=central", "policy.san.enabled=false",
                                                                               "policy.megha.gms=1", "policy.megha.lms=1"])
    with pytest.raises(errors.FailedPrecondition, match="policy.frontend='central' with workload.source='generator'"):
        driver_for(sc)
