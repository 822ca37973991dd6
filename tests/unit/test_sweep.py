"""`cellctl sweep` without Dask (issue 16): the spec and its plan (scenarios × grid × seeds, folder
names, overrides), bad specs refused in one line with exit 2 before anything is created, what a
run's folder holds for resume, the LocalCluster's size, and the progress estimate."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cellbed.domain.errors import AlreadyExists, FailedPrecondition
from cellbed.experiment.results.files import RESULTS_FORMAT
from cellbed.experiment.scenario.file import Scenario, load_scenario
from cellbed.experiment.scenario.keys import parse_value
from cellbed.experiment.sweep.plan import (NO_GRID, load_spec, plan_sweep, point_name, resolved, run_state, scenario_hash,
                                      toml_value)
from cellbed.experiment.sweep.progress import SweepProgress
from cellbed.experiment.sweep.run import SweepLoop, SweepOutcome, classify, local_workers, write_sweep_file
from cellbed.experiment.sweep.worker import RunTask
from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "scenarios" / "smoke.toml"
BESTFIT = REPO / "scenarios" / "masb-table3-bestfit.toml"


def spec(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


GOOD = f"""
name = "t3"
scenarios = ["{SMOKE}", "{BESTFIT}"]
seeds = [1, 2, 3]
[grid]
"cell.nodes" = [100, 60]
policy.san.max_util = [0.9, 0.8]
[set]
"run.duration_s" = 600
"""


# --- the spec and the plan ----------------------------------------------------------------
def test_plan_is_scenarios_times_grid_times_seeds_seed_major(tmp_path):
    plan = plan_sweep(load_spec(spec(tmp_path, GOOD)))
    assert plan.spec.name == "t3" and len(plan.runs) == 2 * 4 * 3
    keys = [r.key for r in plan.runs]
    assert len(set(keys)) == len(keys)
    # seed-major: every configuration's seed 1 before any seed 2
    assert [r.seed for r in plan.runs] == [1] * 8 + [2] * 8 + [3] * 8
    first = plan.runs[0]
    assert first.key == "smoke/cell.nodes=100,policy.san.max_util=0.9/seed-1"
    assert first.folder(tmp_path / "o") == tmp_path / "o" / "smoke" / "cell.nodes=100,policy.san.max_util=0.9" / "seed-1"
    assert first.overrides == ("run.duration_s=600", "cell.nodes=100", "policy.san.max_util=0.9", "run.seed=1")
    assert plan.configurations()[:2] == [("smoke", "cell.nodes=100,policy.san.max_util=0.9"),
                                         ("smoke", "cell.nodes=100,policy.san.max_util=0.8")]
    assert len(plan.configurations()) == 8
    # the hash is the resolved scenario's: the same run of the same scenario has the same hash,
    # another seed or another override another one
    again = load_scenario(SMOKE, first.overrides)
    assert first.scenario_hash == scenario_hash(again) and resolved(again)["run"]["seed"] == 1
    assert first.scenario_hash != scenario_hash(load_scenario(SMOKE, (*first.overrides[:-1], "run.seed=2")))
    hashes = {r.scenario_hash for r in plan.runs}
    assert len(hashes) == len(plan.runs)


def test_same_spec_same_hashes_and_relative_paths_from_the_spec_folder(tmp_path):
    d = tmp_path / "sweeps"
    d.mkdir()
    rel = spec(d, 'scenarios = ["../sc/smoke.toml"]\nseeds = [4]\n')
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "smoke.toml").write_text(SMOKE.read_text())
    a = plan_sweep(load_spec(rel))
    assert a.spec.scenarios == ((tmp_path / "sc" / "smoke.toml").resolve(),)
    assert a.runs[0].key == f"smoke/{NO_GRID}/seed-4" and a.runs[0].overrides == ("run.seed=4",)
    b = plan_sweep(load_spec(rel))
    assert a.runs[0].scenario_hash == b.runs[0].scenario_hash


def test_point_names_are_one_folder_each_and_distinct():
    assert point_name({}) == NO_GRID
    assert point_name({"b": 1, "a": "x/y"}) == "a=x%2Fy,b=1"
    names = {point_name({"k": v}) for v in ("a,b", "a%2Cb", "a b", "1", 1.0, True, [1, 2], "x/y")}
    assert len(names) == 8 and all("/" not in n for n in names)


@pytest.mark.parametrize("v", [7, -3, 0.1, 1e-7, 2.5e300, True, False, "masb", 'a "q" \\ é', [1, 2], ["x"]])
def test_toml_value_reads_back_as_the_same_value(v):
    assert parse_value("k", toml_value(v), type(v)) == v


# --- refusals ------------------------------------------------------------------------------
BAD = [
    ('scenarios = ["S"]\nseeds = [1]\nwhat = 1\n', ["unknown key what", "scenarios"]),
    ('scenarios = ["S"]\n', ["seeds"]),
    ('scenarios = ["S"]\nseeds = [1, 1]\n', ["seeds", "1 is given twice"]),
    ('scenarios = ["S"]\nseeds = [1.5]\n', ["seeds", "1.5"]),
    ('scenarios = ["S"]\nseeds = []\n', ["seeds", "1..1000"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"cell.nodez" = [1]\n', ["[grid]", "cell.nodez", "allowed in cell"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"cell.nodes" = 5\n', ["[grid] cell.nodes", "array"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"cell.nodes" = [5, 5]\n', ["cell.nodes", "5 is given twice"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"run.name" = ["1", 1]\n', ["run.name", "share the folder run.name=1"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"run.seed" = [1, 2]\n', ["run.seed", "seeds = [...]"]),
    ('scenarios = ["S"]\nseeds = [1]\n[set]\n"cell.nodes" = -5\n', ["--set cell.nodes=-5", "out of range"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"cell.nodes" = [100, 0]\n', ["cell.nodes=0", "out of range"]),
    ('scenarios = ["S"]\nseeds = [1]\n[set]\n"policy.frontend" = "nope"\n', ["policy.frontend", "nope", "choose"]),
    ('scenarios = ["S"]\nseeds = [1]\n[grid]\n"cell.nodes" = [1]\n[set]\n"cell.nodes" = 2\n', ["both"]),
    ('scenarios = ["S"]\nseeds = [-1]\n', ["run.seed=-1"]),
    ('scenarios = ["S", "S"]\nseeds = [1]\n', ["same stem"]),
    ('scenarios = ["nowhere.toml"]\nseeds = [1]\n', ["nowhere.toml"]),
    ('scenarios = ["S"]\nseeds = [1]\n[set]\n"cell.kind" = "real"\n', ["cell.kind='real'", "model cells only"]),
    ('scenarios = ["S"\n', ["not valid TOML"]),
    ('name = "a b"\nscenarios = ["S"]\nseeds = [1]\n', ["name='a b'"]),
]


@pytest.mark.parametrize("body,words", BAD, ids=[b.replace("\n", " ")[-40:] for b, _ in BAD])
def test_bad_spec_is_one_line_rc2_and_creates_nothing(body, words, tmp_path):
    p = spec(tmp_path, body.replace('"S"', f'"{SMOKE}"'))
    out = tmp_path / "out"
    rc, _, err = run_cli(["sweep", str(p), "--out", str(out)])
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    assert not out.exists()


def test_tls_flags_are_checked(tmp_path):
    p = spec(tmp_path, f'scenarios = ["{SMOKE}"]\nseeds = [1]\n')
    rc, _, err = run_cli(["sweep", str(p), "--out", str(tmp_path / "o"), "--scheduler", "tls://127.0.0.1:9",
                          "--tls-ca-file", str(p)])
    assert rc == 2 and "--tls-cert, --tls-key" in err and err.count("\n") == 1, err
    rc, _, err = run_cli(["sweep", str(p), "--out", str(tmp_path / "o"), "--tls-cert", str(p)])
    assert rc == 2 and "only with --scheduler tls://" in err, err
    assert not (tmp_path / "o").exists()


# --- resume: what a run's folder holds -----------------------------------------------------
def fake_run(folder: Path, sc: Scenario, last: str = "run_completed") -> None:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": RESULTS_FORMAT, "scenario": resolved(sc)}))
    (folder / "events.jsonl").write_text(json.dumps({"t_s": 0.0, "kind": "run_started"}) + "\n"
                                         + json.dumps({"t_s": 600.0, "kind": last}) + "\n")


def test_run_state_skips_only_a_completed_run_of_the_same_scenario(tmp_path):
    plan = plan_sweep(load_spec(spec(tmp_path, f'scenarios = ["{SMOKE}"]\nseeds = [1, 2]\n'
                                                '[set]\n"run.duration_s" = 600\n')))
    r1, r2 = plan.runs
    f = r1.folder(tmp_path / "o")
    assert run_state(f, r1.scenario_hash) == ("new", "")
    f.mkdir(parents=True)
    assert run_state(f, r1.scenario_hash) == ("new", "")
    f.rmdir()
    fake_run(f, load_scenario(SMOKE, r1.overrides))
    assert run_state(f, r1.scenario_hash)[0] == "done"
    # the same folder against another seed's or another override's scenario: not skipped
    assert run_state(f, r2.scenario_hash)[0] == "stale"
    other = load_scenario(SMOKE, ("run.duration_s=1200", "run.seed=1"))
    st, why = run_state(f, scenario_hash(other), resolved(other))
    assert st == "stale" and "run.duration_s: 600.0 here, 1200.0 planned" in why
    # a run that failed or was stopped: replaced
    g = r2.folder(tmp_path / "o")
    fake_run(g, load_scenario(SMOKE, r2.overrides), last="run_failed")
    assert run_state(g, r2.scenario_hash)[0] == "incomplete"
    # anything else: refused
    h = tmp_path / "o" / "x"
    h.mkdir()
    (h / "notes.txt").write_text("mine")
    assert run_state(h, r1.scenario_hash)[0] == "foreign"


def test_classify_refuses_stale_without_overwrite_and_foreign_always(tmp_path):
    plan = plan_sweep(load_spec(spec(tmp_path, f'scenarios = ["{SMOKE}"]\nseeds = [1, 2]\n')))
    r1, r2 = plan.runs
    out = tmp_path / "o"
    fake_run(r1.folder(out), load_scenario(SMOKE, r1.overrides))
    fake_run(r2.folder(out), load_scenario(SMOKE, ("run.seed=2", "cell.nodes=50")))
    with pytest.raises(AlreadyExists, match=r"cell.nodes: 50 here, 200 planned.*1 such run.*--overwrite"):
        classify(plan, out, overwrite=False)
    assert classify(plan, out, overwrite=True) == {r1.key: "done", r2.key: "stale"}
    (r2.folder(out) / "manifest.json").unlink()
    with pytest.raises(FailedPrecondition, match="not a Cellbed run.*move it away"):
        classify(plan, out, overwrite=True)


def test_stale_run_is_refused_by_the_cli_before_any_cluster(tmp_path):
    p = spec(tmp_path, f'name = "t"\nscenarios = ["{SMOKE}"]\nseeds = [1]\n')
    plan = plan_sweep(load_spec(p))
    out = tmp_path / "o"
    out.mkdir()
    write_sweep_file(out, plan, {})
    fake_run(plan.runs[0].folder(out), load_scenario(SMOKE, ("run.seed=9",)))
    rc, _, err = run_cli(["sweep", str(p), "--out", str(out)])
    assert rc == 2 and "ALREADY_EXISTS" in err and "run.seed: 9 here, 1 planned" in err and err.count("\n") == 1, err
    # another sweep's folder, or a folder of other things: refused
    rc, _, err = run_cli(["sweep", str(spec(tmp_path, p.read_text().replace('"t"', '"u"'), "u.toml")),
                          "--out", str(out)])
    assert rc == 2 and "holds sweep 't', not 'u'" in err, err
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.txt").write_text("x")
    rc, _, err = run_cli(["sweep", str(p), "--out", str(tmp_path / "junk")])
    assert rc == 2 and "no sweep.json" in err, err


def test_dry_run_shows_each_state(tmp_path):
    p = spec(tmp_path, f'scenarios = ["{SMOKE}"]\nseeds = [1, 2]\n')
    plan = plan_sweep(load_spec(p))
    out = tmp_path / "o"
    fake_run(plan.runs[0].folder(out), load_scenario(SMOKE, plan.runs[0].overrides))
    rc, text, err = run_cli(["sweep", str(p), "--out", str(out), "--dry-run", "--json"])
    assert rc == 0, err
    assert [(r["key"], r["state"]) for r in json.loads(text)["runs"]] == [
        (f"smoke/{NO_GRID}/seed-1", "done"), (f"smoke/{NO_GRID}/seed-2", "new")]


def test_overwrite_only_for_a_folder_that_holds_a_previous_run(tmp_path):
    plan = plan_sweep(load_spec(spec(tmp_path, f'scenarios = ["{SMOKE}"]\nseeds = [1, 2, 3]\n')))
    out = tmp_path / "o"
    r1, r2, r3 = plan.runs
    fake_run(r1.folder(out), load_scenario(SMOKE, r1.overrides), last="run_failed")
    r2.folder(out).mkdir(parents=True)
    (r2.folder(out) / "notes.txt").write_text("mine")
    sw = SweepLoop(plan, out, SweepOutcome("s", out, 3), "tok", report=False)
    t1 = sw.task(r1, 2)
    assert isinstance(t1, RunTask) and t1.overwrite and t1.log.endswith("seed-1.retry.log")
    assert "--overwrite" in t1.argv() and "--no-report" in t1.argv()
    assert not sw.task(r2, 1).overwrite and not sw.task(r3, 1).overwrite
    assert sw.task(r3, 1).argv() == ["run", str(SMOKE), "--out", str(r3.folder(out)), "--quiet", "--set", "run.seed=3",
                                     "--no-report"]


# --- the LocalCluster's size and the progress line -----------------------------------------
def test_local_workers_by_cores_and_memory():
    assert local_workers([100] * 8, cores=2, available_mib=20000)[0] == 2
    assert local_workers([100], cores=2, available_mib=20000)[0] == 1             # one run
    n, why = local_workers([12500] * 4, cores=8, available_mib=24000)              # ~10 GiB a run
    assert n == 1 and "memory for 1" in why
    assert local_workers([100] * 4, cores=8, available_mib=24000, mem_per_run_mib=6000)[0] == 3
    assert local_workers([100] * 4, workers=5, cores=2)[0] == 5


def test_progress_counts_and_estimate():
    buf = io.StringIO()
    p = SweepProgress(buf, "t", total=10, skipped=2, slots=2)
    assert "ETA after the first run" in p.line() and p.waiting == 8
    p.set_running({"a": 100.0, "b": 100.0})
    p.finished("a", 10.0)
    p.finished("b", 30.0)                       # mean 20 s
    p.set_running({"c": 105.0})
    p.attempt_failed("x", final=True)
    assert (p.done, p.failed, len(p.running), p.waiting) == (2, 1, 1, 4)
    # (4 waiting × 20 s + (20 − 10) s left of c) / 2 slots = 45 s
    assert p.eta_s(now=115.0) == pytest.approx(45.0)
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("sweep t: 4/10 done (2 skipped), 1 running, 1 failed, 4 waiting")
    assert len(lines) == len(set(lines))        # one line per change
