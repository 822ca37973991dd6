"""`cellctl run` on model cells (issue 5, item 4): the smoke scenario end to end through the CLI,
--set overrides reaching the manifest, bad keys refused by name, and the Megha front-ends
dispatched to the Megha model cell."""
import csv
import json
from pathlib import Path

import pytest

from cellbed.domain import errors
from cellbed.cli.main import main as cellctl
from cellbed.experiment import load_run, load_scenario
from cellbed.experiment.runner import Progress, driver_for, run_scenario

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "scenarios" / "smoke.toml"
STAGES = ("J1", "J2", "J3", "T1", "T2", "M4", "M5", "R3", "R4", "R5", "T10", "T11", "T12", "B1")


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke scenario through `cellctl run`, shortened to 20 simulated minutes for CI time."""
    out = tmp_path_factory.mktemp("smoke") / "run"
    cellctl(["run", str(SMOKE), "--out", str(out), "--set", "run.duration_s=1200", "--quiet"])
    return out


def test_smoke_results_folder_is_complete(smoke):
    for name in ("manifest.json", "events.jsonl", "ticks.csv", "migrations.csv", "allocations.csv", "report.md",
                 "asr.png", "overloaded.png", "migrations.png", "alloc_cdf.png"):
        assert (smoke / name).is_file(), name
    for png in smoke.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, png
    run = load_run(smoke)                       # refuses runs without run_completed
    events = [json.loads(x) for x in (smoke / "events.jsonl").read_text().splitlines()]
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_completed"
    done = events[-1]
    assert done["ok"] and done["tasks"]["lost"] == 0 and done["tasks"]["duplicated"] == 0
    assert done["tasks"]["added"] > 1000 and done["peak_rss_mib"] > 0 and done["wall_s"] > 0
    assert done["san"]["reports"] > 0 and done["broker"]["allocations"] > 0
    ticks = rows(smoke / "ticks.csv")
    assert [float(t["t_s"]) for t in ticks] == [60.0 * k for k in range(1, 21)]
    assert all(int(t["nodes"]) == 200 for t in ticks)
    assert len(run.ticks["t_s"]) == 20
    allocs = rows(smoke / "allocations.csv")
    placed = [a for a in allocs if a["outcome"] == "placed"]
    assert len(placed) > 1000 and all(a["host"] for a in placed)
    # a task is allocated at most once; pending rows are tasks still waiting at the end
    assert len({a["task"] for a in allocs}) == len(allocs)
    assert sum(a["outcome"] == "pending" for a in allocs) == done["tasks"]["pending_rows"]
    migs = rows(smoke / "migrations.csv")
    assert migs, "SAN moved nothing in 20 minutes of a GCD-shaped cell"
    ok = [m for m in migs if m["outcome"] == "succeeded"]
    assert sum(int(t["migrations_succeeded"]) for t in ticks) == len(ok) == done["san"]["migrations_succeeded"]
    assert sum(int(t["bytes_moved"]) for t in ticks) == sum(int(m["bytes"]) for m in ok)
    refused = [m for m in migs if m["outcome"] == "refused"]
    assert len(refused) == done["san"].get("collisions", 0) + done["san"].get("process_errors", 0)
    report = (smoke / "report.md").read_text()
    assert "![ASR over time](asr.png)" in report and "## Policy at each stage" in report


def test_manifest_writes_down_every_stage_policy(smoke):
    m = json.loads((smoke / "manifest.json").read_text())
    for k in STAGES:
        assert m["stages"].get(k), f"stage {k} has no policy in the manifest"
    assert "SIAS" in m["stages"]["R5"].upper() and "SRAS" in m["stages"]["T12"].upper()
    sc = m["scenario"]
    assert sc["policy"]["frontend"] == "masb" and sc["policy"]["san"]["enabled"] is True
    assert sc["run"]["duration_s"] == 1200.0 and m["seed"] == 1
    assert sc["workload"]["generator_resolved"]["nodes"] == 200
    cellp = m["extra"]["model_cell"]
    assert cellp["nodes"] == 200 and cellp["san"]["max_util"] == 0.9 and cellp["broker"]["initial_scan_limit"] == 200
    assert m["versions"]["python"] and m["git_revision"]


def test_set_overrides_reach_the_manifest_and_the_run(tmp_path):
    out = tmp_path / "o"
    cellctl(["run", str(SMOKE), "--out", str(out), "--quiet", "--no-report", "--set", "run.duration_s=180",
             "--set", "run.seed=7", "--set", "cell.nodes=30", "--set", "policy.san.enabled=false",
             "--set", "policy.frontend=bestfit", "--set", "run.name=tiny"])
    m = json.loads((out / "manifest.json").read_text())
    sc = m["scenario"]
    assert (m["name"], m["seed"]) == ("tiny", 7)
    assert sc["cell"]["nodes"] == 30 and sc["run"]["duration_s"] == 180.0
    assert sc["policy"]["frontend"] == "bestfit" and sc["policy"]["san"]["enabled"] is False
    assert m["extra"]["model_cell"]["seed"] == 7 and m["extra"]["model_cell"]["san"]["enabled"] is False
    assert m["stages"]["T12"].startswith("none") and "best fit" in m["stages"]["R5"]
    assert all(int(t["nodes"]) == 30 for t in rows(out / "ticks.csv"))
    assert rows(out / "migrations.csv") == []          # best fit without SAN never migrates
    assert not (out / "report.md").exists()             # --no-report
    assert load_run(out).completed["tasks"]["added"] > 0


@pytest.mark.parametrize("override, named", [
    ("run.sede=3", "run.sede"),
    ("policy.san.max_utl=0.8", "policy.san.max_utl"),
    ("cell.nodes=0", "cell.nodes"),
    ("policy.frontend=borg", "policy.frontend"),
])
def test_a_bad_override_fails_naming_the_key_and_writes_nothing(tmp_path, capsys, override, named):
    out = tmp_path / "bad"
    with pytest.raises(SystemExit) as e:
        cellctl(["run", str(SMOKE), "--out", str(out), "--quiet", "--set", override])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "InvalidArgument" in err and named in err
    assert not out.exists()


def test_an_unsupported_combination_is_refused_before_writing(tmp_path):
    sc = load_scenario(SMOKE, ["policy.frontend=megha", "policy.san.enabled=true"])
    with pytest.raises(errors.FailedPrecondition, match="policy.san.enabled"):
        run_scenario(sc, tmp_path / "x", progress=None)
    assert not (tmp_path / "x").exists()
    sc = load_scenario(REPO / "scenarios" / "real-3host.toml", ["policy.frontend=sampling",
                                                                 "policy.san.enabled=false"])
    with pytest.raises(errors.FailedPrecondition, match="sampling.*real"):
        driver_for(sc)


@pytest.mark.parametrize("frontend", ["megha", "central", "sampling"])
def test_megha_frontends_run_on_the_megha_model_cell(tmp_path, frontend):
    sets = ["cell.nodes=60", "run.duration_s=300", f"policy.frontend={frontend}", "policy.san.enabled=false"]
    sets += ["policy.megha.gms=1", "policy.megha.lms=1"] if frontend == "central" else \
        ["policy.megha.gms=2", "policy.megha.lms=3"]
    res = run_scenario(load_scenario(REPO / "scenarios" / "megha-10k.toml", sets), tmp_path / frontend,
                       progress=None, report=False)
    run = load_run(res.path)
    assert run.manifest["extra"]["driver"] == "model-megha"
    assert run.manifest["extra"]["model_cell"]["frontend"] == frontend
    assert list(run.ticks["t_s"]) == [60.0, 120.0, 180.0, 240.0, 300.0]
    a = run.allocations(["outcome", "frontend", "total_ms"])
    placed = a["outcome"] == "placed"
    assert placed.sum() > 0 and set(a["frontend"]) == {frontend}
    assert res.summary["tasks"]["placed"] == placed.sum()
    assert (a["total_ms"][placed] > 0).all()     # allocation takes messages, so time, even in a model


def test_progress_bar_shows_time_tasks_and_overloaded_share():
    import io
    s = io.StringIO()
    p = Progress(s, 3600.0, "x", log_interval_s=0.0)
    p.update(900.0, 1234, 0.0125)
    line = s.getvalue().strip()
    assert "15.0/60.0 min sim" in line and "1,234 tasks" in line and "overloaded 1.25%" in line
    assert "[######..................]  25%" in line


def test_a_bar_past_its_end_says_why_instead_of_an_eta():
    import io
    s = io.StringIO()
    p = Progress(s, 300.0, "jobs", log_interval_s=0.0, past_end="arrivals over: placing the last tasks")
    p.update(150.0, 10, 0.0)
    p.update(330.0, 12, 0.0)
    first, second = s.getvalue().strip().splitlines()
    assert "ETA" in first and "placing" not in first
    assert "100%" in second and "5.5/5.0 min sim" in second and "arrivals over: placing the last tasks" in second
    assert "ETA" not in second


def test_profile_window_profiles_only_that_window_and_ticks_carry_wall_time(tmp_path):
    out = tmp_path / "prof"
    cellctl(["run", str(SMOKE), "--out", str(out), "--quiet", "--no-report", "--set", "cell.nodes=40",
             "--set", "run.duration_s=600", "--profile", "4:7"])
    meta = json.loads((out / "profile.json").read_text())
    assert (meta["from_s"], meta["to_s"]) == (240.0, 420.0)
    assert meta["wall_s"] > 0 and meta["cpu_s"] > 0
    import pstats
    st = pstats.Stats(str(out / "profile.pstats"))
    assert any(fn[0].endswith("monitor.py") and fn[2] == "run" for fn in st.stats)   # the nodes sampled in the window
    assert "cumulative" in (out / "profile.txt").read_text()
    wall = [float(r["wall_s"]) for r in rows(out / "ticks.csv")]
    assert len(wall) == 10 and all(b >= a for a, b in zip(wall, wall[1:]))
    assert meta["wall_s"] <= wall[-1]


@pytest.mark.parametrize("window, named", [("7:4", "FROM < TO"), ("x", "FROM:TO"), ("-1:3", "FROM < TO")])
def test_a_bad_profile_window_is_refused(tmp_path, capsys, window, named):
    with pytest.raises(SystemExit) as e:
        cellctl(["run", str(SMOKE), "--out", str(tmp_path / "p"), "--quiet", f"--profile={window}"])
    assert e.value.code == 2
    assert named in capsys.readouterr().err and not (tmp_path / "p").exists()


def test_profile_window_works_for_every_front_end_of_the_one_model_cell(tmp_path):
    """One model cell for every front-end: a Megha scenario profiles its window like a MASB one."""
    sc = load_scenario(REPO / "scenarios" / "megha-10k.toml",
                       ["cell.nodes=60", "policy.san.enabled=false", "run.duration_s=600"])
    run_scenario(sc, tmp_path / "m", progress=None, report=False, profile=(60.0, 300.0))
    prof = json.loads((tmp_path / "m" / "profile.json").read_text())
    assert (prof["from_s"], prof["to_s"]) == (60.0, 300.0) and prof["cpu_s"] > 0
