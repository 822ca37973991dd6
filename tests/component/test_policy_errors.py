"""Bad plugins get a clear answer and lose nothing (issue 28, item 5): a table of bad plugins,
each run through ``cellctl run`` on a small model cell, with its documented outcome.

* before anything runs: an unknown reference, a wrong signature, bad parameters -> exit 2, one
  line naming the key, nothing written;
* at run time (a model run is strict by default): a plugin that raises, answers NaN, picks a host
  that was not offered, returns a non-permutation or does not answer within its budget -> exit 1,
  one line naming the stage, the plugin and its input's digest; the results so far are kept,
  events.jsonl ends with run_failed, stages.csv counts the error.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BAD = REPO / "tests" / "fixtures" / "bad_policies.py"
BASE = ["scenarios/smoke.toml", "--set", "cell.nodes=16", "--set", "run.duration_s=900", "--set", "run.tick_s=60"]

ROWS = [
    # id, extra --set, exit code, words of the one line (stderr), stage with errors (at run time)
    ("unknown", ["policy.overload=no_such_policy"], 2, ["policy.overload='no_such_policy' is not allowed",
                                                        "choose one of masb"], None),
    ("wrong signature", [f"policy.overload={BAD}:wrong_signature"], 2,
     ["policy.overload", "wrong signature (load, extra, more)", "called as f(load)"], None),
    ("bad parameters", ["policy.params.overload.max_util=7"], 2,
     ["policy.params.overload.max_util", "allowed 0.05..1.0, got 7"], None),
    ("raises", [f"policy.overload={BAD}:raising_overload"], 1,
     ["policy overload", "raising_overload", "raised RuntimeError: plugin bug", "input digest"], "overload"),
    ("NaN", [f"policy.initial_score={BAD}:nan_initial"], 1,
     ["policy score", "nan_initial", "is not finite", "input digest"], "score"),
    ("host not offered", ["policy.frontend=bestfit", "policy.san=false", f"policy.allocation={BAD}:not_offered"], 1,
     ["policy allocation", "not_offered", "which was not offered", "input digest"], "allocation"),
    ("non-permutation", [f"policy.overload={BAD}:half_overloaded", f"policy.target_order={BAD}:repeats_first"], 1,
     ["policy target_order", "repeats_first", "not a permutation", "input digest"], "target_order"),
    # one simulated minute: the run goes on sampling after the stop until its end, and every host's
    # every sample waits out the budget (900 s: 240 calls, ~20 s; 60 s: 16 calls, ~1 s)
    ("over budget", [f"policy.overload={BAD}:slow_overload", "policy.budget_ms=50", "run.duration_s=60"], 1,
     ["policy overload", "slow_overload", "did not answer within its budget of 50 ms", "input digest"], "overload"),
]


def cellctl(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellbed.cli.main", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("sets, code, words, stage", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_bad_plugin_gets_its_documented_outcome(tmp_path, sets, code, words, stage):
    out = tmp_path / "run"
    args = list(BASE)
    for s in sets:
        args += ["--set", s]
    r = cellctl(["run", *args, "--out", str(out), "--quiet", "--no-report"])
    err = r.stderr.strip()
    assert r.returncode == code, (r.returncode, err[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)
    if code == 2:
        assert not out.exists()                 # refused before anything was written
        return
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_failed"
    assert "policy" in events[-1]["detail"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["policy_errors"] >= 1 and m["policy_mode"] == "strict"
    with open(out / "stages.csv", newline="") as f:
        rows = {(r["stage"], r["policy"].split(" (")[0]): r for r in csv.DictReader(f)}
    assert any(s == stage and int(row["errors"]) >= 1 for (s, _), row in rows.items()), rows


def test_isolate_mode_refuses_the_decision_and_the_run_goes_on(tmp_path):
    out = tmp_path / "run"
    r = cellctl(["run", *BASE, "--set", f"policy.overload={BAD}:raising_overload", "--set", "policy.errors=isolate",
                 "--out", str(out), "--quiet", "--no-report"])
    assert r.returncode == 0, r.stderr[-2000:]
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    done = events[-1]
    assert done["kind"] == "run_completed" and done["tasks"]["lost"] == 0 and done["tasks"]["duplicated"] == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["policy_errors"] > 0 and m["policy_mode"] == "isolate"
