"""`cellctl sweep` on a Dask LocalCluster (issue 16), at the smoke scale (5–10 simulated minutes of
60–100 nodes, a few seconds a run, most of it the run's process starting; the smoke runs still
migrate, so the comparison covers migrations.csv):

- a sweep of 2 scenarios × 2 seeds on 2 worker processes gives, seed for seed, the results files
  of a plain `cellctl run` of the same scenario, overrides and seed (``wall_s`` apart), and
  `cellctl report SWEEPDIR` summarises it per configuration;
- a sweep stopped by SIGTERM after its first completed run leaves no process behind, and the same
  command then runs only the missing runs (completed folders untouched, interrupted ones replaced);
- a run that fails is retried once, reported, and the sweep finishes the others and exits 1; a
  folder that is not a previous run is never overwritten.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cellbed.experiment.report.summary import summarize
from cellbed.experiment.results.writer import load_run
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "scenarios" / "smoke.toml"
BESTFIT = REPO / "scenarios" / "masb-table3-bestfit.toml"
FILES = ("ticks.csv", "migrations.csv", "allocations.csv")


def cellctl(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellbed.cli.main", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def without_wall(path: Path) -> str:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if rows and "wall_s" in rows[0]:
        i = rows[0].index("wall_s")
        rows = [r[:i] + r[i + 1:] for r in rows]
    return "".join(",".join(r) + "\n" for r in rows)


def last_kind(folder: Path) -> str | None:
    ev = folder / "events.jsonl"
    if not ev.is_file():
        return None
    lines = [x for x in ev.read_text().splitlines() if x.strip()]
    return json.loads(lines[-1])["kind"] if lines else None


def run_folders(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*/*/seed-*") if p.is_dir())


def test_sweep_equals_plain_runs_seed_for_seed_and_reports(tmp_path):
    spec = tmp_path / "cmp.toml"
    spec.write_text(f'name = "cmp"\nscenarios = ["{SMOKE}", "{BESTFIT}"]\nseeds = [1, 2]\n'
                    '[set]\n"run.duration_s" = 300\n"cell.nodes" = 60\n')
    out = tmp_path / "sweep"
    tmp = tmp_path / "tmp"            # the sweep's TMPDIR: Dask's scratch space goes there unless told otherwise
    tmp.mkdir()
    p = cellctl("sweep", str(spec), "--out", str(out), "--workers", "2", "--no-report", "--json",
                env={**os.environ, "TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in tmp.iterdir()) == []     # the cluster's scratch space went with it
    res = json.loads(p.stdout)
    assert (res["total"], res["ran"], res["skipped"], res["failed"]) == (4, 4, 0, [])
    assert res["cluster"].startswith("a LocalCluster of 2 worker processes")
    assert len({r["worker"] for r in res["runs"].values()}) == 2          # both processes ran runs
    assert "4/4 done" in p.stderr                                          # the progress line
    for scen in (SMOKE, BESTFIT):
        for seed in (1, 2):
            mine = out / scen.stem / "default" / f"seed-{seed}"
            plain = tmp_path / "plain" / f"{scen.stem}-{seed}"
            q = cellctl("run", str(scen), "--set", "run.duration_s=300", "--set", "cell.nodes=60",
                        "--set", f"run.seed={seed}", "--out", str(plain), "--no-report", "--quiet")
            assert q.returncode == 0, q.stderr
            for f in FILES:
                assert without_wall(mine / f) == without_wall(plain / f), f"{scen.stem} seed {seed}: {f} differs"
            m1, m2 = (json.loads((d / "manifest.json").read_text()) for d in (mine, plain))
            assert m1["scenario"] == m2["scenario"] and m1["seed"] == seed
    # the two seeds differ (a sweep that ran one seed twice would pass the comparison above)
    assert without_wall(out / "smoke/default/seed-1/ticks.csv") != without_wall(out / "smoke/default/seed-2/ticks.csv")
    # and the smoke runs migrate, so the comparison covers migrations.csv too (bestfit has no SAN)
    assert all(len((out / f"smoke/default/seed-{s}/migrations.csv").read_text().splitlines()) > 1 for s in (1, 2))

    r = cellctl("report", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["report"] == str(out / "sweep.md")
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert [(x["scenario"], x["point"], x["seeds_done"]) for x in rows] == [("smoke", "default", "2"),
                                                                           ("masb-table3-bestfit", "default", "2")]
    want = [summarize(load_run(out / "smoke/default" / f"seed-{s}")).tasks_running_mean for s in (1, 2)]
    assert float(rows[0]["tasks_running_mean_mean"]) == sum(want) / 2
    assert (float(rows[0]["tasks_running_mean_min"]), float(rows[0]["tasks_running_mean_max"])) == (min(want), max(want))
    md = (out / "sweep.md").read_text()
    assert "2 configurations × 2 seeds: 4 of 4 runs complete" in md and "| C2 | masb-table3-bestfit |" in md
    assert cellctl("report", "--sweep", str(out), "--out", str(tmp_path / "rep")).returncode == 0
    assert (tmp_path / "rep" / "sweep.csv").read_text() == (out / "sweep.csv").read_text()


def processes_naming(text: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


async def test_sigterm_then_rerun_runs_only_the_missing_runs(tmp_path):
    spec = tmp_path / "res.toml"
    spec.write_text(f'name = "res"\nscenarios = ["{SMOKE}"]\nseeds = [1, 2]\n[grid]\n"cell.nodes" = [60, 100]\n'
                    '[set]\n"run.duration_s" = 600\n')
    n = 4                                  # 2 points x 2 seeds
    out = tmp_path / "sweep"
    argv = [sys.executable, "-m", "cellbed.cli.main", "sweep", str(spec), "--out", str(out), "--workers", "1",
            "--no-report"]
    p = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        async def one_done_one_started():
            kinds = [last_kind(f) for f in run_folders(out)]
            return "run_completed" in kinds and any(k != "run_completed" for k in kinds)
        await wait_until(one_done_one_started, 300, "one completed run and the next one started")
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "stopped by signal 15" in err and "Traceback" not in err, err

    async def no_run_left():
        return not processes_naming(str(out))
    await wait_until(no_run_left, 30, "no process of the stopped sweep")
    done = {f for f in run_folders(out) if last_kind(f) == "run_completed"}
    stopped = {f for f in run_folders(out) if last_kind(f) != "run_completed"}
    assert 1 <= len(done) < n and len(stopped) <= 1                      # one worker: one run in flight
    assert all(last_kind(f) == "run_failed" for f in stopped)
    print(f"\nafter SIGTERM: {len(done)} completed, {len(stopped)} interrupted")
    before = {f: ((f / "events.jsonl").stat().st_mtime_ns, (f / "ticks.csv").stat().st_mtime_ns,
                  hashlib.sha256((f / "ticks.csv").read_bytes()).hexdigest()) for f in done}

    q = subprocess.run(argv + ["--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert q.returncode == 0, q.stderr
    res = json.loads(q.stdout)
    assert (res["skipped"], res["ran"], res["failed"]) == (len(done), n - len(done), [])
    ran = {out / k for k in res["runs"]}
    assert ran == set(run_folders(out)) - done and stopped <= ran
    assert f"{n - len(done)} of {n} runs to do ({len(done)} already done)" in q.stderr
    for f, stamp in before.items():             # the completed runs were not touched
        assert ((f / "events.jsonl").stat().st_mtime_ns, (f / "ticks.csv").stat().st_mtime_ns,
                hashlib.sha256((f / "ticks.csv").read_bytes()).hexdigest()) == stamp, f
    assert all(last_kind(f) == "run_completed" for f in run_folders(out)) and len(run_folders(out)) == n
    # a third time: nothing to do, and no cluster started
    r = cellctl("sweep", str(spec), "--out", str(out), "--no-report", "--json")
    assert r.returncode == 0 and (json.loads(r.stdout)["skipped"], json.loads(r.stdout)["ran"]) == (n, 0), r.stderr
    assert json.loads(r.stdout)["cluster"] == ""


async def test_a_failed_run_is_retried_once_reported_and_the_others_finish(tmp_path):
    spec = tmp_path / "fail.toml"
    spec.write_text(f'name = "fail"\nscenarios = ["{SMOKE}"]\nseeds = [1, 2, 3]\n'
                    '[set]\n"run.duration_s" = 300\n"cell.nodes" = 60\n')
    out = tmp_path / "sweep"
    logs = out / "sweep-logs" / "smoke" / "default"
    p = subprocess.Popen([sys.executable, "-m", "cellbed.cli.main", "sweep", str(spec), "--out", str(out),
                          "--workers", "1", "--no-report"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        async def started():
            return logs.is_dir() and any(logs.glob("*.log"))
        await wait_until(started, 120, "the first run to start")
        # a run that has not started yet finds its folder holding someone else's file
        victim = next(s for s in (3, 2) if not (logs / f"seed-{s}.log").exists())
        folder = out / "smoke" / "default" / f"seed-{victim}"
        folder.mkdir(parents=True)
        (folder / "notes.txt").write_text("mine")
        outs, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    key = f"smoke/default/seed-{victim}"
    assert p.returncode == 1, err
    assert f"{key} failed (attempt 1/2" in err and "retrying" in err
    assert f"cellctl sweep: {key} failed twice (exit 2)" in err and "not a Cellbed run" in err
    assert "2 ran, 0 skipped, 1 failed of 3 runs" in outs
    assert sorted(os.listdir(folder)) == ["notes.txt"] and (folder / "notes.txt").read_text() == "mine"
    for s in {1, 2, 3} - {victim}:
        assert last_kind(out / "smoke" / "default" / f"seed-{s}") == "run_completed"
    assert "not a Cellbed run" in (logs / f"seed-{victim}.log").read_text()
    assert "not a Cellbed run" in (logs / f"seed-{victim}.retry.log").read_text()
    last = json.loads((out / "sweep.json").read_text())["last"]
    assert [f["key"] for f in last["failed"]] == [key] and last["ran"] == 2
