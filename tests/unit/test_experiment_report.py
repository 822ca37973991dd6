"""report.md and its plots, from synthetic run folders written by ResultsWriter (DESIGN §12).

The synthetic run (110 nodes, three 60-s ticks):

    tick  idle over sta ta pa da | active  PA share  DA share
    60      9    1   5   5 60 30 |   100     .60       .30
    120    60    0   0   5 40  5 |    50     .80       .10
    180   110    0   0   0  0  0 |     0   (excluded: no active node)

    ASR PA = (.60 + .80)/2 = 70 %, DA = (.30 + .10)/2 = 20 %  → PA:DA = 3.50:1
    (pooling the counts instead would give 100/35 = 2.86:1 — the report uses the mean of shares)
    STA = (.05 + 0)/2 = 2.5 %, TA = (.05 + .10)/2 = 7.5 %
    overloaded: 1/110 = 0.91 %, 0, 0 → mean 0.30 %, max 0.91 %, ticks above 0.5 %: 1/3 = 33.33 %

Migrations: succeeded 100 MiB, succeeded 50 MiB, refused 0, failed 10 MiB
    → 2 migrations, 4 attempts, 160 MiB, 80.00 MiB per migration, refusal rate 25.00 %.
Allocations: 100 placed tasks with totals 1..100 ms, split 7 % / 2 % / 1 % / 90 %
(framework queue / processing / worker queue / communication), one pending, one rejected.
    numpy linear percentiles of 1..100: p50 = 50.5, p90 = 90.1, p99 = 99.01, p99.9 = 99.901.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cellbed.cli.main import main as cellctl
from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.report.write import summarize, write_report
from cellbed.experiment.results.writer import (
    AllocationRow,
    IncompleteRun,
    MigrationRow,
    ResultsWriter,
    TickRow,
    build_manifest,
    load_run,
)
from cellbed.experiment.scenario.file import parse_scenario

MiB = 2**20
TICKS = [  # t_s, idle, overloaded, sta, ta, pa, da
    (60.0, 9, 1, 5, 5, 60, 30),
    (120.0, 60, 0, 0, 5, 40, 5),
    (180.0, 110, 0, 0, 0, 0, 0),
]
MIGRATIONS = [("succeeded", 100 * MiB), ("succeeded", 50 * MiB), ("refused", 0), ("failed", 10 * MiB)]


def write_run(path, name="synthetic", ticks=TICKS, migrations=MIGRATIONS, n_alloc=100, tick_bytes=None,
              complete=True):
    sc = parse_scenario(f"[cell]\nnodes = 110\n[run]\nduration_s = 180\nname = '{name}'")
    w = ResultsWriter(path, build_manifest(sc, git_revision="deadbeef", versions={"python": "3.11"},
                                           created_unix_s=0.0))
    for i in range(1, n_alloc + 1):
        total = float(i)
        parts = (0.07 * total, 0.02 * total, 0.01 * total, 0.90 * total)
        w.allocation(AllocationRow(task=f"t{i}", user="u", frontend="masb", arrival_s=float(i), start_s=i + sum(parts)
                                   / 1000, host="n1", framework_queue_ms=parts[0], processing_ms=parts[1],
                                   worker_queue_ms=parts[2], communication_ms=parts[3], total_ms=sum(parts),
                                   attempts=1, outcome="placed"))
    for outcome in ("pending", "rejected"):
        w.allocation(AllocationRow(task=outcome, user="u", frontend="masb", arrival_s=1.0, start_s=math.nan,
                                   host="", framework_queue_ms=math.nan, processing_ms=math.nan,
                                   worker_queue_ms=math.nan, communication_ms=math.nan, total_ms=math.nan,
                                   attempts=2, outcome=outcome))
    for k, (outcome, b) in enumerate(migrations):
        w.migration(MigrationRow(t_s=30.0 + k, vm=f"v{k}", src="n1", dst="n2", outcome=outcome, san_id="s1",
                                 time_ms=500.0 if outcome != "refused" else math.nan, downtime_ms=20.0, bytes=b))
    ok = sum(1 for o, _ in migrations if o == "succeeded")
    total_bytes = sum(b for _, b in migrations) if tick_bytes is None else tick_bytes
    for j, (t, idle, over, sta, ta, pa, da) in enumerate(ticks):
        first = j == 0
        w.tick(TickRow(t_s=t, nodes=110, idle=idle, overloaded=over, sta=sta, ta=ta, pa=pa, da=da,
                       used_cpu=0.45, used_mem=0.65, req_cpu=0.85, req_mem=0.70, tasks_running=1000 - j,
                       tasks_pending=1, migrations_attempted=len(migrations) if first else 0,
                       migrations_succeeded=ok if first else 0,
                       migrations_refused=sum(o == "refused" for o, _ in migrations) if first else 0,
                       migrations_failed=sum(o == "failed" for o, _ in migrations) if first else 0,
                       bytes_moved=total_bytes if first else 0))
    if complete:
        w.complete({"wall_s": 0.1})
    else:
        w.close()
    return path


def png_is_nontrivial(path, min_bytes=10_000):
    from matplotlib import image

    assert path.is_file(), f"{path} missing"
    assert path.stat().st_size > min_bytes, f"{path} is only {path.stat().st_size} bytes"
    img = image.imread(path)
    assert img.ndim == 3 and img.shape[0] >= 300 and img.shape[1] >= 500
    colours = np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 20, f"{path}: only {len(colours)} colours, the plot is (nearly) blank"
    return img


def test_summary_numbers_match_the_hand_computation(tmp_path):
    s = summarize(load_run(write_run(tmp_path / "r")))
    assert s.asr_pa == pytest.approx(0.70) and s.asr_da == pytest.approx(0.20)
    assert s.asr_sta == pytest.approx(0.025) and s.asr_ta == pytest.approx(0.075)
    assert s.pa_da_ratio == pytest.approx(3.5)  # not the pooled 100/35
    assert s.overloaded_mean == pytest.approx(1 / 110 / 3) and s.overloaded_max == pytest.approx(1 / 110)
    assert s.ticks_over_threshold == pytest.approx(1 / 3)
    assert s.idle_mean == pytest.approx((9 + 60 + 110) / 330)
    assert (s.migration_attempts, s.migrations, s.migrations_refused, s.migrations_failed) == (4, 2, 1, 1)
    assert s.migration_bytes == 160 * MiB and s.bytes_per_migration == pytest.approx(80 * MiB)
    assert s.refusal_rate == pytest.approx(0.25)
    assert (s.tasks_placed, s.tasks_pending, s.tasks_rejected) == (100, 1, 1)
    assert (s.alloc_p50_ms, s.alloc_p90_ms) == (pytest.approx(50.5), pytest.approx(90.1))
    assert (s.alloc_p99_ms, s.alloc_p999_ms) == (pytest.approx(99.01), pytest.approx(99.901))
    assert s.part_share["communication_ms"] == pytest.approx(0.90)
    assert s.part_share["framework_queue_ms"] == pytest.approx(0.07)
    assert s.part_median_ms["processing_ms"] == pytest.approx(0.02 * 50.5)
    assert s.duration_s == 180.0 and s.placed_per_min == pytest.approx(100 / 3)


def test_single_run_report(tmp_path):
    run = write_run(tmp_path / "r")
    md = write_report([run])
    assert md == run / "report.md"
    text = md.read_text()
    for row in ("| ASR PA | 70.00 % |", "| ASR DA | 20.00 % |", "| ASR STA+TA | 10.00 % |", "| PA:DA | 3.50:1 |",
                "| overloaded nodes (mean) | 0.30 % |", "| overloaded nodes (max) | 0.91 % |",
                "| ticks with overloaded > 0.5 % | 33.33 % |",
                "| migrations (succeeded) | 2 |", "| migration attempts | 4 |", "| refusal rate | 25.00 % |",
                "| migration bytes | 160.00 MiB |", "| bytes per migration | 80.00 MiB |",
                "| tasks placed / pending / rejected | 100 / 1 / 1 |",
                "| allocation time p50 | 50.5 ms |", "| allocation time p90 | 90.1 ms |",
                "| allocation time p99 | 99.0 ms |", "| allocation time p99.9 | 99.9 ms |",
                "| communication (median; share of total) | 45.5 ms; 90.00 % |",
                "| front-end | masb |", "| git | deadbeef |"):
        assert row in text, f"{row!r} not in report.md"
    assert "Inconsistencies" not in text
    for png in ("asr.png", "overloaded.png", "migrations.png", "alloc_cdf.png"):
        assert f"]({png})" in text
        png_is_nontrivial(run / png)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["pa_da_ratio"] == pytest.approx(3.5)
    # the stage table is in the report (seed 002)
    assert "| R5 | highest initial_score sias" in text


def test_asr_chart_shows_the_shares(tmp_path):
    """Distinct data → distinct pictures: the chart is drawn from the ticks, not a template."""
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", ticks=[(60.0, 9, 1, 0, 0, 100, 0), (120.0, 10, 0, 0, 0, 0, 100),
                                         (180.0, 110, 0, 0, 0, 0, 0)])
    write_report([a])
    write_report([b])
    ia, ib = png_is_nontrivial(a / "asr.png"), png_is_nontrivial(b / "asr.png")
    assert ia.shape == ib.shape and not np.array_equal(ia, ib)
    assert "| PA:DA | 1.00:1 |" in (b / "report.md").read_text()  # (1 + 0)/2 : (0 + 1)/2


def test_report_to_another_folder_leaves_the_run_alone(tmp_path):
    run = write_run(tmp_path / "r")
    before = sorted(p.name for p in run.iterdir())
    md = write_report([run], out=tmp_path / "rep")
    assert md == tmp_path / "rep" / "report.md"
    assert sorted(p.name for p in run.iterdir()) == before


def test_inconsistent_tick_bytes_are_flagged(tmp_path):
    run = write_run(tmp_path / "r", tick_bytes=7 * MiB)
    text = write_report([run]).read_text()
    assert "Inconsistencies" in text and "7.00 MiB" in text


def test_no_allocations_and_no_migrations(tmp_path):
    run = write_run(tmp_path / "r", migrations=[], n_alloc=0)
    text = write_report([run]).read_text()
    assert "No task was placed" in text
    assert not (run / "alloc_cdf.png").exists()
    assert "| bytes per migration | n/a |" in text and "| refusal rate | n/a |" in text
    png_is_nontrivial(run / "asr.png")


def test_comparison_of_several_runs(tmp_path):
    a = write_run(tmp_path / "a", name="bestfit")
    b = write_run(tmp_path / "b", name="masb", ticks=[(60.0, 9, 1, 0, 0, 100, 0), (120.0, 10, 0, 0, 0, 0, 100),
                                                      (180.0, 110, 0, 0, 0, 0, 0)], n_alloc=10)
    md = write_report([a, b], out=tmp_path / "cmp")
    text = md.read_text()
    assert "| metric | bestfit | masb |" in text
    assert "| PA:DA | 3.50:1 | 1.00:1 |" in text
    assert "| tasks placed / pending / rejected | 100 / 1 / 1 | 10 / 1 / 1 |" in text
    for png in ("compare_asr.png", "compare_overloaded.png", "compare_alloc_cdf.png"):
        png_is_nontrivial(tmp_path / "cmp" / png)
    import csv
    rows = list(csv.DictReader(open(tmp_path / "cmp" / "comparison.csv")))
    assert [r["name"] for r in rows] == ["bestfit", "masb"]
    assert float(rows[0]["pa_da_ratio"]) == pytest.approx(3.5)
    assert float(rows[1]["communication_ms_share"]) == pytest.approx(0.9)


def test_same_names_are_told_apart(tmp_path):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    text = write_report([a, b], out=tmp_path / "cmp").read_text()
    assert "| metric | synthetic (a) | synthetic (b) |" in text


def test_comparison_needs_out(tmp_path):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    with pytest.raises(InvalidArgument, match="--out"):
        write_report([a, b])


def test_incomplete_runs_are_refused(tmp_path):
    run = write_run(tmp_path / "r", complete=False)
    with pytest.raises(IncompleteRun):
        write_report([run])
    assert not (run / "report.md").exists()


def test_cli_report(tmp_path, capsys):
    run = write_run(tmp_path / "r")
    cellctl(["report", str(run)])
    assert capsys.readouterr().out.strip() == str(run / "report.md")
    cellctl(["--json", "report", str(run), str(write_run(tmp_path / "s")), "--out", str(tmp_path / "c")])
    out = json.loads(capsys.readouterr().out)
    assert out["report"] == str(tmp_path / "c" / "report.md")
    assert str(tmp_path / "c" / "compare_asr.png") in out["files"]


def test_cli_report_refuses_an_incomplete_run(tmp_path, capsys):
    run = write_run(tmp_path / "r", complete=False)
    with pytest.raises(SystemExit) as ei:
        cellctl(["report", str(run)])
    assert ei.value.code == 2
    assert "run_completed" in capsys.readouterr().err
