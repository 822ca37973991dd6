"""Trace replay that loses nothing (issue 14, part 3): a GCD-2011 sample (tests/component/
gcd_sample.py, written line by line, not by cellbed's TraceWriter) read through `cellctl run` on
the MASB and the Megha model cells, and bad trace files refused before anything is written.

The sample's story is in gcd_sample.py: rows out of time order in every table, machine m1
removed at 300 s while it runs tasks (the trace LOSTs one and EVICTs and resubmits another),
m3 grown at 200 s, constraint and request updates, usage for a task never submitted, missing
fields."""
from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import pytest

from cellbed.cli.main import main as cellctl
from cellbed.daemon.san import SanConfig
from cellbed.model.cell import ModelCell, ModelCellParams
from cellbed.runtime.clock import run_virtual
from cellbed.workload import events as ev
from cellbed.workload.generator import GeneratorConfig, WorkloadGenerator
from cellbed.workload.trace import TraceReader
from tests.component import gcd_sample as gs

SCENARIO = """
[cell]
kind = "model"
nodes = 4
[workload]
source = "trace"
[workload.trace]
path = "{path}"
[policy]
frontend = "{frontend}"
[policy.san]
enabled = false
[run]
duration_s = 1800.0
tick_s = 60.0
seed = 3
"""
MEGHA_SETS = ["--set", "policy.megha.gms=2", "--set", "policy.megha.lms=2"]
# the host standing for each machine: MASB names hosts after the machine, Megha numbers the
# stream's machines in the order they appear
HOST = {"masb": {m: f"n{m}" for m in range(1, 5)}, "megha": {m: f"h{m:05d}" for m in range(1, 5)}}
HOST["sampling"] = HOST["megha"]
COUNTERS = {"masb": "cell", "megha": "stream", "sampling": "stream"}


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_scenario(d: Path, trace: Path, frontend: str) -> Path:
    p = d / f"{frontend}.toml"
    p.write_text(SCENARIO.format(path=trace, frontend=frontend))
    return p


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> gs.Sample:
    return gs.write_sample(tmp_path_factory.mktemp("gcd") / "trace")


@pytest.fixture(scope="module", params=["masb", "megha", "sampling"])
def replay(request, sample, tmp_path_factory):
    """(frontend, results folder, run_completed, manifest, allocations, ticks) of one cellctl run."""
    fe = request.param
    d = tmp_path_factory.mktemp(fe)
    out = d / "out"
    cellctl(["run", str(write_scenario(d, sample.root, fe)), "--out", str(out), "--quiet",
             *(MEGHA_SETS if fe == "megha" else [])])
    done = json.loads((out / "events.jsonl").read_text().splitlines()[-1])
    manifest = json.loads((out / "manifest.json").read_text())
    return fe, out, done, manifest, rows(out / "allocations.csv"), rows(out / "ticks.csv")


def placed(allocs: list[dict], prefix: str) -> list[dict]:
    """The placed rows of a task's runs (its name, a resubmission's -r<k>, a move's -m<k>)."""
    return sorted((a for a in allocs if a["outcome"] == "placed" and (a["task"] == prefix or
                                                                        a["task"].startswith(prefix + "-"))),
                  key=lambda a: float(a["start_s"]))


def test_the_node_count_drops_when_the_trace_removes_a_machine(replay):
    fe, _, done, _, _, ticks = replay
    nodes = {float(t["t_s"]): int(t["nodes"]) for t in ticks}
    assert len(nodes) == 30
    assert all(n == 4 for t, n in nodes.items() if t < gs.REMOVE_S)
    assert all(n == 3 for t, n in nodes.items() if t > gs.REMOVE_S)
    assert done["tasks"]["lost"] == 0 and done["tasks"]["duplicated"] == 0


def test_the_removed_machines_tasks_end_as_the_trace_says(replay):
    fe, _, done, _, allocs, _ = replay
    c = done[COUNTERS[fe]]
    assert c["tasks_ended_lost"] == 1 and c["tasks_ended_evict"] == 1
    # LOST: its one run, never placed again
    assert len(placed(allocs, gs.LOST)) == 1
    # EVICTed and submitted again at 320 s: the evicted run counts, the new one is placed after 320 s
    runs = placed(allocs, gs.EVICTED)
    assert len(runs) == 2 and float(runs[0]["start_s"]) < gs.REMOVE_S
    assert float(runs[1]["arrival_s"]) == pytest.approx(gs.RESUBMIT_S, abs=0.01)
    assert float(runs[1]["start_s"]) >= gs.RESUBMIT_S


def test_tasks_the_trace_keeps_running_are_placed_again_not_lost(replay):
    """Every task the model had on m1 at 300 s and the trace does not end then is placed again
    on another host, and the displaced count says how many."""
    fe, _, done, _, allocs, _ = replay
    gone = HOST[fe][1]
    ended_by_trace = {gs.LOST, gs.EVICTED, gs.SHORT}
    on_m1 = {a["task"] for a in allocs if a["outcome"] == "placed" and a["host"] == gone
             and a["task"] not in ended_by_trace}
    assert gs.BIG in on_m1                        # 0.6 CPU fits only m1 until m3 grows
    for task in on_m1:
        later = [a for a in placed(allocs, task) if float(a["arrival_s"]) >= gs.REMOVE_S - 0.01]
        assert later and all(a["host"] != gone for a in later), task
    assert done[COUNTERS[fe]]["tasks_displaced"] == len(on_m1)


def test_a_capacity_update_changes_the_host(replay):
    fe, _, done, _, allocs, _ = replay
    big = placed(allocs, gs.BIG)
    assert [a["host"] for a in big] == [HOST[fe][1], HOST[fe][3]]     # m3 holds it only once grown
    assert float(big[1]["start_s"]) >= gs.REMOVE_S > gs.GROW_S


def test_request_and_constraint_updates_change_the_task(replay):
    fe, _, done, _, allocs, _ = replay
    (e,) = placed(allocs, gs.CONSTRAINED)          # rack z (nowhere) until the update at 100 s: rack b
    assert e["host"] == HOST[fe][2] and float(e["start_s"]) >= 100.0
    (f,) = placed(allocs, gs.SHRUNK)               # 0.3 CPU on rack b (m2: 0.25) until 0.1 at 150 s
    assert f["host"] == HOST[fe][2] and float(f["start_s"]) >= 150.0
    c = done[COUNTERS[fe]]
    if fe == "masb":
        assert (c["task_request_updates"], c["task_constraint_updates"], c["task_updates_applied_on_host"]) == \
            (2, 1, 1)                              # F waiting, G running; E waiting; G on its host
    else:
        assert (c["request_updates"], c["constraints_updates"], c["request_updates_resized"]) == (2, 1, 1)


def test_every_constraint_row_is_applied(replay, sample):
    fe, _, _, manifest, allocs, _ = replay
    tr = manifest["trace"]
    assert tr["rows"]["task_constraints"] == sample.constraint_rows
    assert "constraints_unknown_task" not in tr["anomalies"]
    # H's row comes after a row at 100 s although H ran from 10 s to 50 s: it still reached H
    (h,) = placed(allocs, gs.SHORT)
    assert h["host"] == HOST[fe][1] and float(h["start_s"]) < 50.0     # rack a: only m1
    assert tr["reorder"]["task_constraints"] == {"rows": 4, "out_of_order": 1, "late": 0, "max_distance_us": 90 * gs.S}


def test_the_manifest_and_the_report_hold_every_anomaly_count(replay, sample):
    fe, out, done, manifest, _, _ = replay
    want = {k: {"count": n, "first": first} for k, (n, first) in gs.EXPECTED_ANOMALIES.items()}
    assert manifest["trace"]["anomalies"] == want
    reader = TraceReader(sample.root)
    list(reader)
    assert reader.report()["anomalies"] == want                     # what a full read finds
    assert done["trace_anomalies"] == {k: n for k, (n, _) in gs.EXPECTED_ANOMALIES.items()}
    report = (out / "report.md").read_text()
    assert "## Trace" in report
    for k, (n, first) in gs.EXPECTED_ANOMALIES.items():
        assert f"| {k} | {n} | {first} |" in report


# --- bad trace files -----------------------------------------------------------------------------

def _part(root: Path, table: str, name: str = "part-00000-of-00001.csv.gz") -> Path:
    return root / table / name


def damage_missing(root: Path) -> Path:
    p = _part(root, "task_events")
    p.rename(p.with_name("part-00000-of-00002.csv.gz"))
    return _part(root, "task_events", "part-00001-of-00002.csv.gz")


def damage_empty(root: Path) -> Path:
    p = _part(root, "machine_attributes")
    p.write_bytes(b"")
    return p


def damage_not_gzip(root: Path) -> Path:
    p = _part(root, "task_constraints")
    p.write_bytes(gzip.decompress(p.read_bytes()))
    return p


def damage_truncated(root: Path) -> Path:
    p = _part(root, "task_usage")
    data = p.read_bytes()
    p.write_bytes(data[:len(data) - 12])           # the end of the deflate stream and its trailer
    return p


def damage_columns(root: Path) -> Path:
    p = _part(root, "task_events")
    lines = gzip.decompress(p.read_bytes()).decode().splitlines()
    lines[6] = ",".join(lines[6].split(",")[:gs.TASK_EVENT_COLUMNS - 2])
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return p


@pytest.mark.parametrize("damage, problem", [
    (damage_missing, "missing"),
    (damage_empty, "empty"),
    (damage_not_gzip, "not a gzip file"),
    (damage_truncated, "truncated"),
    (damage_columns, ":7: 11 columns"),
])
@pytest.mark.parametrize("frontend", ["masb", "megha"])
def test_a_bad_trace_file_fails_before_anything_is_written(tmp_path, capsys, sample, damage, problem, frontend):
    root = tmp_path / "trace"
    shutil.copytree(sample.root, root)
    bad = damage(root)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        cellctl(["run", str(write_scenario(tmp_path, root, frontend)), "--out", str(out), "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert str(bad) in err and problem in err and "InvalidArgument" in err
    assert not (out / "manifest.json").exists() and not (out / "ticks.csv").exists() and not out.exists()


def test_a_trace_folder_that_does_not_exist_is_one_line_too(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cellctl(["run", str(write_scenario(tmp_path, tmp_path / "nowhere", "masb")), "--out", str(tmp_path / "o"),
                 "--quiet"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "no such trace folder" in err and "nowhere" in err
    assert not (tmp_path / "o").exists()


# --- node churn in a generated stream ---------------------------------------------------------------

def test_a_node_that_leaves_and_comes_back_under_the_generator_loses_nothing():
    """The generator's churn (RemoveNode, then AddNode of the same machine): the host leaves,
    its tasks are placed again elsewhere, and it comes back empty, as a new host."""
    g = list(WorkloadGenerator(GeneratorConfig.from_mapping({"nodes": 40, "duration_s": 900, "seed": 3})))
    t0, node = g[0].time_us, g[0]
    churn = [ev.RemoveNode(t0 + 330 * gs.S, node.node_id),
             ev.AddNode(t0 + 630 * gs.S, node.node_id, node.cpu, node.mem, node.platform)]
    allocs: list = []
    p = ModelCellParams(frontend="masb", nodes=40, duration_s=900, tick_s=60, seed=3,
                        san=SanConfig(enabled=False, window_s=30.0, report_period_s=60.0))
    cell = ModelCell(p, list(ev.merge(g, churn)), on_allocation=allocs.append)
    s = run_virtual(cell.run())
    name = f"n{node.node_id}"
    assert [t.nodes for t in s.ticks] == [40] * 5 + [39] * 5 + [40] * 5
    assert not s.lost and not s.duplicated
    there = {a.task for a in allocs if a.host == name and a.start_s < 330}
    again = {a.task: a for a in sorted(allocs, key=lambda a: -a.start_s) if a.task in there and a.start_s >= 330}
    assert again and all(a.host != name for a in again.values() if a.start_s < 630)   # elsewhere while it is gone
    assert cell.frontend.counters["tasks_displaced"] >= len(again)
    assert all(a.start_s >= 630 for a in allocs if a.host == name and a.start_s >= 330)
    # it came back empty: what it holds now was placed there after 630 s, nothing from before
    assert set(cell.hosts[name].agent.view().vm_names) <= {a.task for a in allocs if a.host == name and a.start_s >= 630}
