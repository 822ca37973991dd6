"""``workload.source = "jobs"`` (issue 16, item 5): the Megha paper's Poisson-jobs experiment as a
scenario run, so the Megha figures go through `cellctl run` and `cellctl sweep`.

The run must be the experiment scripts/bench_megha.py measured before: the same cell, the same
arrivals, the same placements, task for task (the library path, :func:`simulate`, is the
reference). Every arrival is accounted for once, and bad [workload.jobs] values are refused by
name before anything is written."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from cellbed.controller.megha.workload import ArrivalConfig
from cellbed.domain import errors
from cellbed.experiment import load_run, load_scenario
from cellbed.experiment.model import jobs_workload, model_cell_params
from cellbed.experiment.runner import run_scenario
from cellbed.experiment.sweep.plan import load_spec, plan_sweep
from cellbed.model.megha import megha_cell, megha_users
from cellbed.model.simulate import simulate

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = {fe: REPO / "scenarios" / f"megha-jobs-{fe}.toml" for fe in ("megha", "central", "sampling")}
SMALL = ["cell.nodes=300", "run.seed=2", "workload.jobs.arrivals_s=10", "run.duration_s=100"]


def reference(frontend: str, nodes: int, seed: int, arrivals_s: float, drain_s: float):
    """The experiment as scripts/megha_bench_lib.run_model_point builds it."""
    gms = lms = 1 if frontend == "central" else 10
    cfg = megha_cell(frontend=frontend, nodes=nodes, gms=gms, lms=lms, background_fill=0.8,
                     background_s=(5.0, 2 * arrivals_s), seed=seed)
    arr = ArrivalConfig(seed=seed, duration_s=arrivals_s, job_rate_per_s=10.0 * nodes / 1000, task_min_s=2,
                        task_max_s=60, users=megha_users(cfg))
    return simulate(cfg, arr, drain_s=drain_s, check=True)


@pytest.mark.parametrize("frontend", ["megha", "central", "sampling"])
def test_a_jobs_run_places_every_task_as_the_megha_bench_does(tmp_path, frontend):
    res = run_scenario(load_scenario(SCENARIOS[frontend], SMALL), tmp_path / frontend, progress=None, report=False)
    run = load_run(res.path)
    a = run.allocations(["task", "outcome", "host", "total_ms"])
    ref = reference(frontend, 300, 2, 10.0, 90.0)
    want = {r.task: (r.outcome, r.host, r.total_ms) for r in ref.records}
    got = {t: (o, h, ms) for t, o, h, ms in zip(a["task"], a["outcome"], a["host"], a["total_ms"])}
    assert len(got) == len(a["task"]) == len(want) > 50      # every arrival once, none twice
    assert got.keys() == want.keys()
    assert {t: v[0] for t, v in got.items()} == {t: v[0] for t, v in want.items()}     # placed or pending
    if frontend == "sampling":
        # late binding: the tasks of one job probe at the same instant, and which of them a
        # freed worker claims follows the order of same-time timers, which the run's ticker
        # (one more timer) changes. The allocation times are the same, task for task in sum.
        times = sorted(round(v[2], 6) for v in got.values() if v[0] == "placed")
        assert times == sorted(round(v[2], 6) for v in want.values() if v[0] == "placed")
    else:
        for task, (_, h, ms) in want.items():
            _, gh, gms = got[task]
            assert gh == h, task
            assert (math.isnan(ms) and math.isnan(gms)) or gms == pytest.approx(ms, abs=1e-6), task
    s = res.summary["tasks"]
    assert s["arrivals"] == len(want) and s["placed"] + s["pending"] == s["arrivals"]
    assert s["prefilled"] > 300                               # the warm cell: ~6 background tasks per node
    assert run.manifest["scenario"]["workload"]["jobs"]["job_rate_per_1k_nodes"] == 10.0
    assert "Poisson jobs" in run.manifest["stages"]["J1"]
    # the run ended when every task had started: its simulated time says so, and ticks.csv ends there
    end = res.summary["simulated_s"]
    assert s["pending"] > 0 or end < 100.0
    assert float(run.ticks["t_s"][-1]) == pytest.approx(end)


def test_the_job_rate_follows_the_cell_size():
    sc = load_scenario(SCENARIOS["megha"], ["cell.nodes=2500"])
    p = model_cell_params(sc)
    assert (p.megha.node_cpu, p.megha.node_mem_mib, p.megha.background_fill) == (4.0, 16384, 0.8)
    assert p.megha.background_s == (5.0, 40.0)
    w = jobs_workload(sc)
    assert w.arrivals.job_rate_per_s == pytest.approx(25.0) and w.drain_s == pytest.approx(120.0)


def test_other_sources_keep_their_manifest_and_sweep_hash():
    """[workload.jobs] is written down only when it is read: the MASB tables' finished sweep runs
    keep matching their scenario hash (a resumed sweep does not rerun them)."""
    masb = load_scenario(REPO / "scenarios" / "masb-table3-masb.toml")
    assert "jobs" not in masb.as_manifest()["workload"]
    assert "jobs" in load_scenario(SCENARIOS["megha"]).as_manifest()["workload"]


@pytest.mark.parametrize("sets, named", [
    (["policy.frontend=masb", "policy.san.enabled=true"], "workload.source='jobs'"),
    (["cell.kind=real"], "workload.source='jobs'"),
    (["workload.jobs.arrivals_s=140"], "workload.jobs.arrivals_s=140"),
    (["workload.jobs.task_min_s=61"], "workload.jobs.task_min_s=61"),
    (["workload.jobs.fill=0.96"], "workload.jobs.fill"),
    (["workload.jobs.job_rate_per_1k_nodes=0"], "workload.jobs.job_rate_per_1k_nodes"),
])
def test_bad_jobs_settings_are_refused_by_name(sets, named):
    with pytest.raises(errors.InvalidArgument) as e:
        load_scenario(SCENARIOS["megha"], sets)
    assert named in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("spec, runs", [("megha-size", 54), ("megha-gmlm", 48)])
def test_the_megha_figure_sweeps_plan(spec, runs):
    plan = plan_sweep(load_spec(REPO / "sweeps" / f"{spec}.toml"))
    assert len(plan.runs) == runs
    assert {r.seed for r in plan.runs} == {1, 2, 3}
    sc = load_scenario(plan.runs[-1].scenario, plan.runs[-1].overrides)
    assert sc.workload.source == "jobs"


def test_jobs_runs_are_reproducible_seed_for_seed(tmp_path):
    a = run_scenario(load_scenario(SCENARIOS["megha"], SMALL), tmp_path / "a", progress=None, report=False)
    b = run_scenario(load_scenario(SCENARIOS["megha"], SMALL), tmp_path / "b", progress=None, report=False)
    c = run_scenario(load_scenario(SCENARIOS["megha"], [*SMALL, "run.seed=3"]), tmp_path / "c", progress=None,
                     report=False)
    cols = ["task", "host", "total_ms"]
    ra, rb, rc = (load_run(x.path).allocations(cols) for x in (a, b, c))
    assert all(list(ra[k]) == list(rb[k]) for k in cols)
    assert list(ra["task"]) != list(rc["task"]) or list(ra["host"]) != list(rc["host"])
