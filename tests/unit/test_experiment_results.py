"""The results folder (DESIGN §12): ResultsWriter round-trips through load_run; incomplete runs are refused."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cellbed.domain.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from cellbed.experiment.results.writer import (
    ALLOCATION_COLUMNS,
    MIGRATION_COLUMNS,
    TICK_COLUMNS,
    AllocationRow,
    IncompleteRun,
    MigrationRow,
    ResultsWriter,
    TickRow,
    build_manifest,
    load_run,
    read_table,
)
from cellbed.experiment.scenario.file import parse_scenario

SCENARIO = parse_scenario("[cell]\nnodes = 10\n[run]\nduration_s = 600\nseed = 5\nname = 'rt'")


def manifest(**kw):
    return build_manifest(SCENARIO, git_revision="0" * 40, versions={"python": "3.11.2", "qemu": None},
                          created_unix_s=1.0, **kw)


def tick(t_s, **kw):
    base = dict(t_s=t_s, nodes=10, idle=1, overloaded=1, sta=1, ta=2, pa=3, da=2, used_cpu=0.45, used_mem=0.65,
                req_cpu=0.8, req_mem=0.7, tasks_running=100, tasks_pending=2)
    base.update(kw)
    return TickRow(**base)


def placed(task, arrival_s, parts, **kw):
    total = sum(parts)
    base = dict(task=task, user="u1", frontend="masb", arrival_s=arrival_s, start_s=arrival_s + total / 1000,
                host="n3", framework_queue_ms=parts[0], processing_ms=parts[1], worker_queue_ms=parts[2],
                communication_ms=parts[3], total_ms=total, attempts=1, outcome="placed")
    base.update(kw)
    return AllocationRow(**base)


def test_columns_are_the_documented_ones():
    assert ",".join(TICK_COLUMNS) == (
        "t_s,nodes,idle,overloaded,sta,ta,pa,da,used_cpu,used_mem,req_cpu,req_mem,tasks_running,tasks_pending,"
        "migrations_attempted,migrations_succeeded,migrations_refused,migrations_failed,bytes_moved,"
        "alloc_p50_ms,alloc_p99_ms,wall_s")
    assert ",".join(MIGRATION_COLUMNS) == "t_s,vm,src,dst,outcome,forced,san_id,time_ms,downtime_ms,bytes"
    assert ",".join(ALLOCATION_COLUMNS) == (
        "task,user,frontend,arrival_s,start_s,host,framework_queue_ms,processing_ms,worker_queue_ms,"
        "communication_ms,total_ms,attempts,outcome")


def test_round_trip(tmp_path):
    out = tmp_path / "run"
    with ResultsWriter(out, manifest(stages={"T11": "requeue"}, extra={"cell": "c1"})) as w:
        w.event(0.0, "run_started", nodes=10, hosts=["a", "b"])
        w.allocation(placed("j1-0", 1.5, (1.0, 2.0, 3.0, 4.0)))
        w.allocation(task="j1-1", user="u2", frontend="masb", arrival_s=2.0, start_s=math.nan, host="",
                     framework_queue_ms=math.nan, processing_ms=math.nan, worker_queue_ms=math.nan,
                     communication_ms=math.nan, total_ms=math.nan, attempts=3, outcome="pending")
        w.migration(MigrationRow(t_s=30.0, vm="j1-0", src="n3", dst="n4", outcome="succeeded", forced=True,
                                 san_id="san-1", time_ms=812.5, downtime_ms=12.25, bytes=123_456_789))
        w.migration(t_s=31.0, vm="j1-0", src="n3", dst="n5", outcome="refused", san_id="san-1")
        w.tick(tick(60.0, migrations_attempted=2, migrations_succeeded=1, migrations_refused=1,
                    bytes_moved=123_456_789, alloc_p50_ms=10.0, alloc_p99_ms=10.0))
        w.event(61.0, "node_removed", node=np.int64(4), load=np.float64(0.5), nan=math.nan)
        w.tick(tick(120.0))
        w.complete({"wall_s": 2.5})
    run = load_run(out)

    assert run.name == "rt"
    m = run.manifest
    assert (m["seed"], m["git_revision"], m["versions"]["qemu"]) == (5, "0" * 40, None)
    assert m["stages"]["T11"] == "requeue" and m["stages"]["R5"].startswith("highest initial_score sias")
    assert m["scenario"]["cell"]["nodes"] == 10 and m["extra"] == {"cell": "c1"}
    assert "stages" not in m["scenario"]  # written once, at the top

    t = run.ticks
    assert list(t) == list(TICK_COLUMNS)
    assert t["t_s"].tolist() == [60.0, 120.0]
    assert t["bytes_moved"].tolist() == [123_456_789, 0] and t["bytes_moved"].dtype == np.int64
    assert t["alloc_p50_ms"][0] == 10.0 and math.isnan(t["alloc_p50_ms"][1])  # not measured → NaN

    mg = run.migrations()
    assert mg["outcome"].tolist() == ["succeeded", "refused"]
    assert mg["forced"].tolist() == [True, False]
    assert mg["time_ms"][0] == 812.5 and math.isnan(mg["time_ms"][1])
    assert mg["bytes"].tolist() == [123_456_789, 0]

    a = run.allocations()
    assert a["task"].tolist() == ["j1-0", "j1-1"]
    assert a["total_ms"][0] == 10.0 and math.isnan(a["total_ms"][1])
    assert a["start_s"][0] == 1.5 + 10.0 / 1000  # floats survive exactly (repr)
    assert a["attempts"].tolist() == [1, 3]

    ev = list(run.events())
    assert [e["kind"] for e in ev] == ["run_started", "node_removed", "run_completed"]
    assert ev[1] == {"t_s": 61.0, "kind": "node_removed", "node": 4, "load": 0.5, "nan": None}
    assert ev[-1]["t_s"] == 120.0 and ev[-1]["wall_s"] == 2.5
    assert ev[-1]["rows"] == {"events": 2, "ticks": 2, "migrations": 2, "allocations": 2}
    assert run.completed == ev[-1]


def test_rows_reach_disk_at_each_tick_before_the_end(tmp_path):
    w = ResultsWriter(tmp_path / "r", manifest())
    w.allocation(placed("a", 0.0, (1, 1, 1, 1)))
    w.migration(t_s=1.0, vm="a", src="x", dst="y", outcome="failed", bytes=10)
    w.event(1.0, "x")
    w.tick(tick(60.0))
    # read with separate handles while the writer is still open
    assert (tmp_path / "r" / "allocations.csv").read_text().count("\n") == 2
    assert (tmp_path / "r" / "migrations.csv").read_text().count("\n") == 2
    assert (tmp_path / "r" / "ticks.csv").read_text().count("\n") == 2
    assert json.loads((tmp_path / "r" / "events.jsonl").read_text())["kind"] == "x"
    # ... and an open (or crashed) run is not loadable
    with pytest.raises(IncompleteRun):
        load_run(tmp_path / "r")
    w.complete()
    assert load_run(tmp_path / "r").completed["t_s"] == 60.0


def test_a_run_without_run_completed_is_refused(tmp_path):
    with pytest.raises(RuntimeError):
        with ResultsWriter(tmp_path / "crash", manifest()) as w:
            w.tick(tick(60.0))
            raise RuntimeError("the runner crashed")
    with pytest.raises(IncompleteRun, match="does not end with a run_completed"):
        load_run(tmp_path / "crash")


def test_run_completed_must_be_the_last_line(tmp_path):
    with ResultsWriter(tmp_path / "r", manifest()) as w:
        w.tick(tick(60.0))
        w.complete()
    load_run(tmp_path / "r")  # fine
    with open(tmp_path / "r" / "events.jsonl", "a") as f:
        f.write(json.dumps({"t_s": 61.0, "kind": "late"}) + "\n")
    with pytest.raises(IncompleteRun):
        load_run(tmp_path / "r")


def test_a_truncated_last_line_is_refused(tmp_path):
    with ResultsWriter(tmp_path / "r", manifest()) as w:
        w.tick(tick(60.0))
        w.complete()
    p = tmp_path / "r" / "events.jsonl"
    p.write_text(p.read_text()[:-10])  # torn write
    with pytest.raises(IncompleteRun):
        load_run(tmp_path / "r")


def test_missing_files_and_folders(tmp_path):
    with pytest.raises(NotFound):
        load_run(tmp_path / "nothing")
    with ResultsWriter(tmp_path / "r", manifest()) as w:
        w.complete()
    (tmp_path / "r" / "ticks.csv").unlink()
    with pytest.raises(IncompleteRun, match="ticks.csv is missing"):
        load_run(tmp_path / "r")


def test_a_changed_header_is_refused(tmp_path):
    with ResultsWriter(tmp_path / "r", manifest()) as w:
        w.tick(tick(60.0))
        w.complete()
    p = tmp_path / "r" / "ticks.csv"
    p.write_text(p.read_text().replace("idle,overloaded", "overloaded,idle"))
    with pytest.raises(FailedPrecondition, match="header"):
        load_run(tmp_path / "r")


def test_an_existing_run_is_not_overwritten(tmp_path):
    with ResultsWriter(tmp_path / "r", manifest()) as w:
        w.complete()
    with pytest.raises(AlreadyExists, match="already holds a run"):
        ResultsWriter(tmp_path / "r", manifest())
    ResultsWriter(tmp_path / "r", manifest(), overwrite=True).close()


def test_run_completed_only_by_complete_and_nothing_after(tmp_path):
    w = ResultsWriter(tmp_path / "r", manifest())
    with pytest.raises(InvalidArgument, match="only by ResultsWriter.complete"):
        w.event(1.0, "run_completed")
    w.complete({"x": 1})
    for call in (lambda: w.event(2.0, "x"), lambda: w.tick(tick(120.0)), lambda: w.complete()):
        with pytest.raises(FailedPrecondition, match="closed"):
            call()


BAD_ROWS = [
    # (row factory, substring of the error)
    (lambda: tick(60.0, idle=2), "every node is in exactly one class"),  # 2+1+1+2+3+2 = 11 ≠ 10
    (lambda: tick(60.0, pa=-1, idle=5), "TickRow.pa=-1"),
    (lambda: tick(60.0, used_cpu=math.nan), "TickRow.used_cpu is NaN"),
    (lambda: tick(-1.0), "TickRow.t_s=-1.0"),
    (lambda: tick(60.0, nodes=10.0), "TickRow.nodes=10.0"),
    (lambda: MigrationRow(t_s=1.0, vm="v", src="a", dst="b", outcome="ok"), "succeeded, refused, failed"),
    (lambda: MigrationRow(t_s=1.0, vm="v", src="a", dst="b", outcome="failed", bytes=-5), "MigrationRow.bytes"),
    (lambda: MigrationRow(t_s=1.0, vm="v", src="a", dst="b", outcome="failed", forced="yes"), "forced"),
    (lambda: MigrationRow(t_s=1.0, vm=3, src="a", dst="b", outcome="failed"), "MigrationRow.vm=3"),
    (lambda: placed("t", 0.0, (1, 2, 3, 4), total_ms=11.0), "the four parts sum to 10"),
    (lambda: placed("t", 5.0, (1, 2, 3, 4), start_s=4.0), "start_s=4.0 < arrival_s=5.0"),
    (lambda: placed("t", 0.0, (1, 2, 3, 4), host=""), "placed but host is empty"),
    (lambda: placed("t", 0.0, (1, 2, 3, 4), outcome="done"), "placed, pending, rejected"),
    (lambda: placed("t", 0.0, (1, 2, 3, 4), framework_queue_ms=math.nan), "framework_queue_ms is NaN"),
]


@pytest.mark.parametrize("make,needle", BAD_ROWS, ids=[b[1][:40] for b in BAD_ROWS])
def test_bad_rows_are_refused_naming_the_column(make, needle):
    with pytest.raises(InvalidArgument) as ei:
        make()
    assert needle in str(ei.value)


def test_writer_checks_tick_order_and_keyword_columns(tmp_path):
    w = ResultsWriter(tmp_path / "r", manifest())
    w.tick(tick(60.0))
    with pytest.raises(InvalidArgument, match="after the previous tick"):
        w.tick(tick(60.0))
    with pytest.raises(InvalidArgument, match="columns: t_s, vm"):
        w.migration(t_s=1.0, vm="v", src="a", dst="b", outcome="failed", colour="red")
    with pytest.raises(InvalidArgument, match="expected a TickRow"):
        w.tick(MigrationRow(t_s=1.0, vm="v", src="a", dst="b", outcome="failed"))
    w.close()


def test_read_table_chunks_and_columns(tmp_path):
    with ResultsWriter(tmp_path / "r", manifest()) as w:
        for i in range(25):
            w.allocation(placed(f"t{i}", float(i), (i, 0.0, 0.0, 1.0)))
        w.complete()
    a = read_table(tmp_path / "r" / "allocations.csv", AllocationRow, ["task", "total_ms"], chunk_rows=7)
    assert list(a) == ["task", "total_ms"]
    assert a["total_ms"].tolist() == [i + 1.0 for i in range(25)]
    with pytest.raises(InvalidArgument, match="no column 'colour'"):
        read_table(tmp_path / "r" / "allocations.csv", AllocationRow, ["colour"])


def test_manifest_accepts_a_plain_dict_and_has_the_format():
    m = build_manifest({"run": {"name": "n", "seed": 3}, "stages": {"J1": "x"}}, created_unix_s=0.0)
    assert m["format"] == "cellbed-results/1"
    assert (m["name"], m["seed"], m["stages"]) == ("n", 3, {"J1": "x"})


def test_versions_are_obtained_when_asked_and_missing_ones_are_none(tmp_path):
    import platform

    from cellbed.experiment.results.writer import runtime_versions

    v = runtime_versions(qemu_binary=str(tmp_path / "no-such-qemu"))
    assert v["python"] == platform.python_version() and v["kernel"] == platform.release()
    assert v["qemu"] is None


def test_git_revision_marks_uncommitted_changes(tmp_path):
    import subprocess

    from cellbed.experiment.results.writer import git_revision

    assert git_revision(tmp_path) is None  # not a repository
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(git + ["init", "-q"], check=True)
    (tmp_path / "f").write_text("a\n")
    subprocess.run(git + ["add", "f"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    rev = git_revision(tmp_path)
    assert rev is not None and len(rev) == 40 and int(rev, 16) >= 0
    (tmp_path / "f").write_text("b\n")
    assert git_revision(tmp_path) == f"{rev}-dirty"


def test_a_folder_written_before_wall_s_still_loads(tmp_path):
    """ticks.csv of runs made before the wall_s column (docs/results/real-3host) still read;
    the missing trailing column reads as NaN; any other header mismatch is refused."""
    old_cols = [c for c in TICK_COLUMNS if c != "wall_s"]
    p = tmp_path / "ticks.csv"
    p.write_text(",".join(old_cols) + "\n" + ",".join(["60", "3"] + ["1"] * (len(old_cols) - 2)) + "\n")
    t = read_table(p, TickRow)
    assert t["t_s"].tolist() == [60.0] and t["nodes"].tolist() == [3] and np.isnan(t["wall_s"]).all()
    p.write_text(",".join(old_cols[1:]) + "\n")
    with pytest.raises(FailedPrecondition, match="header"):
        read_table(p, TickRow)
