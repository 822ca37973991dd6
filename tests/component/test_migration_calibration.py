"""The migration cost model's calibration, end to end and short enough for CI: `cellctl bench
migration --fit-from` fits a small checked-in CSV of real migrations (a subset of the sweep in
docs/results/fidelity.md, as text), and a model cell whose scenario names the calibration file
takes its migrations' costs from it and records the file in its manifest."""
import csv
import hashlib
import json
from pathlib import Path

import pytest

from cellbed.policy.migration import costfile
from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "tests" / "fixtures" / "migration-cost" / "records.csv"


@pytest.fixture(scope="module")
def calibration(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cal") / "calibration.json"
    rc, stdout, err = run_cli(["bench", "migration", "--fit-from", str(RECORDS), "--fit", str(out)])
    assert rc == 0, err
    assert "held_out" in stdout and str(out) in stdout
    return out


def test_the_fit_of_real_records_is_physical(calibration):
    doc = json.loads(calibration.read_text())
    p = costfile.read(str(calibration)).params
    assert 50 <= p.bandwidth_mib_s <= 2000                # TCG over TLS on one box: a few hundred MiB/s
    assert 0.5 <= p.limit_efficiency <= 1.5 and 0.3 <= p.dirty_scale <= 3.0
    assert p.iteration_offset == 2                        # QEMU's setup and completion bitmap syncs
    assert 40 <= p.resident_base_mib <= 200               # the guest's own non-zero pages
    assert p.postcopy_downtime_ms < 50 < p.downtime_fixed_ms + p.downtime_tail_share * 300
    with open(RECORDS) as f:
        n = sum(1 for _ in csv.DictReader(f))
    src = doc["provenance"]["sources"][0]
    assert src["rows"] == n and src["sha256"] == hashlib.sha256(RECORDS.read_bytes()).hexdigest()
    assert doc["fit_set"]["migrations"] + doc["held_out"]["migrations"] <= n
    assert doc["held_out"]["configurations"] >= 1 and doc["split"]["held_out_configs"]
    assert doc["errors"]["held_out"]["per_migration"]["bytes"]["n"] > 0


def test_a_model_cell_takes_its_migration_costs_from_the_calibration(calibration, tmp_path):
    out = tmp_path / "run"
    rc, _, err = run_cli(["run", "scenarios/smoke.toml", "--set", f"migration.calibration={calibration}",
                          "--set", "run.duration_s=1200", "--out", str(out), "--no-report", "--quiet"])
    assert rc == 0, err
    m = json.loads((out / "manifest.json").read_text())
    assert m["migration_calibration"]["path"] == str(calibration)
    assert m["migration_calibration"]["sha256"] == hashlib.sha256(calibration.read_bytes()).hexdigest()
    assert m["scenario"]["migration"]["calibration"] == str(calibration)
    p = costfile.read(str(calibration)).params
    with open(out / "migrations.csv") as f:
        done = [r for r in csv.DictReader(f) if r["outcome"] == "succeeded"]
    assert done, "the smoke scenario migrates within 20 simulated minutes"
    # the uncalibrated model stops a guest for remainder / 1250 MiB/s only (0 ms for these); the
    # calibrated one for at least its fixed part plus its share of QEMU's 300 ms limit, and its
    # migrate call lasts the destination's start longer than libvirt's own time
    floor = p.downtime_fixed_ms
    assert all(float(r["downtime_ms"]) >= floor for r in done)
    assert all(float(r["time_ms"]) >= p.setup_ms for r in done)
