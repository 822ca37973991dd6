"""The cost model's calibration file: written by a fit, read back to the same parameters, and every
bad file refused in one line naming the file (cellctl: exit code 2, nothing written)."""
import dataclasses
import json
import math

import pytest

from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.scenario.file import load_scenario, schema_docs
from cellbed.policy.migration import costfile, costfit
from cellbed.policy.migration.cost import PrecopyParams
from tests.cli_run import run_cli


def _result(params: PrecopyParams) -> costfit.FitResult:
    errs = {kind: {q: {"n": 3, "median_pct": 1.5, "p90_pct": 4.0, "max_pct": math.nan} for q in costfit.QUANTITIES}
            for kind in ("per_migration", "per_configuration", "repeat_noise")}
    return costfit.FitResult(params=params, n_fit=9, n_held_out=3, n_fit_configs=3, n_held_out_configs=1,
                             held_out_keys=("precopy|mem=128|wss=48|dirty=0|bw=0|downtime=0|tls=1",),
                             fit_errors=errs, held_out_errors=errs)


PARAMS = PrecopyParams(bandwidth_mib_s=187.5, setup_ms=12.0, resident_base_mib=71.0, resident_mem_share=0.02,
                       zero_scan_mib_s=math.inf, dirty_scale=0.9, max_dirty_mib_s=3900.0, downtime_fixed_ms=35.0,
                       downtime_tail_share=0.4, postcopy_downtime_ms=6.0, iteration_offset=2, wall_overhead_ms=1400.0)


def _doc(**params) -> dict:
    doc = costfile.document(_result(PARAMS), {"sources": [], "command": "test"})
    doc["params"].update(params)
    return doc


def test_round_trip_keeps_every_parameter(tmp_path):
    path = tmp_path / "cal.json"
    costfile.write(str(path), _doc())
    got = costfile.read(str(path))
    assert got.params == PARAMS                                 # inf survives as "inf"
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["version"]) == (costfile.FORMAT, costfile.VERSION)
    assert doc["errors"]["held_out"]["per_migration"]["time"]["max_pct"] is None   # NaN is not JSON: null
    rec = got.record()
    assert rec["path"] == str(path) and len(rec["sha256"]) == 64 and rec["version"] == 1


def _refused(tmp_path, content, *words):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(InvalidArgument) as e:
        costfile.read(str(path))
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def test_bad_files_are_refused_naming_the_file_and_the_problem(tmp_path):
    _refused(tmp_path, None, "cannot read")
    _refused(tmp_path, "{not json", "not JSON")
    _refused(tmp_path, {"format": "something else", "version": 1}, "format")
    _refused(tmp_path, {**_doc(), "version": 2}, "version 2", "allowed 1")
    _refused(tmp_path, _doc(dirty_scale=-1), "params.dirty_scale", "allowed 0..100")
    _refused(tmp_path, _doc(bandwidth_mib_s="fast"), "params.bandwidth_mib_s", "a number")
    _refused(tmp_path, _doc(iteration_offset=2.5), "params.iteration_offset", "an integer")
    _refused(tmp_path, _doc(bandwidth_mib_s="inf"), "params.bandwidth_mib_s")
    _refused(tmp_path, _doc(warp_factor=9), "unknown warp_factor")
    doc = _doc()
    del doc["params"]["setup_ms"]
    _refused(tmp_path, doc, "missing setup_ms")


def test_a_scenario_naming_a_bad_calibration_is_rc2_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "cal.json"
    bad.write_text(json.dumps({**_doc(), "version": 7}))
    out = tmp_path / "run"
    for cal in (bad, tmp_path / "missing.json"):
        rc, _, err = run_cli(["run", "scenarios/smoke.toml", "--set", f"migration.calibration={cal}",
                              "--out", str(out), "--quiet"])
        assert rc == 2 and err.count("\n") == 1 and str(cal) in err, err
        assert not out.exists()


def test_the_scenario_key_is_documented_and_relative_to_the_scenario(tmp_path):
    doc = schema_docs()["migration.calibration"]
    assert doc.default == "" and "calibration" in doc.doc
    (tmp_path / "s.toml").write_text('[cell]\nnodes = 10\n[migration]\ncalibration = "cal/x.json"\n')
    sc = load_scenario(tmp_path / "s.toml")
    assert sc.migration.calibration == str(tmp_path / "cal" / "x.json")
    assert "migration" not in load_scenario("scenarios/smoke.toml").as_manifest()   # old manifests unchanged


def test_bench_fit_flags_are_checked_before_anything_runs(tmp_path):
    rc, _, err = run_cli(["bench", "migration", "--fit-from", "x.csv", "--state-root", str(tmp_path)])
    assert rc == 2 and "--fit-from" in err and "--fit" in err and err.count("\n") == 1, err
    rc, _, err = run_cli(["bench", "migration", "--fit-from", str(tmp_path / "none.csv"), "--fit",
                          str(tmp_path / "c.json"), "--state-root", str(tmp_path)])
    assert rc == 2 and "none.csv" in err and err.count("\n") == 1, err
    (tmp_path / "empty.csv").write_text("mem_mib,outcome\n")
    rc, _, err = run_cli(["bench", "migration", "--fit-from", str(tmp_path / "empty.csv"), "--fit",
                          str(tmp_path / "c.json"), "--state-root", str(tmp_path)])
    assert rc == 2 and "empty.csv" in err and err.count("\n") == 1, err
    rc, _, err = run_cli(["bench", "migration", "--fit", str(tmp_path / "no" / "c.json"),
                          "--state-root", str(tmp_path)])
    assert rc == 2 and "--fit" in err and err.count("\n") == 1 and "no cell" not in err, err
    assert not (tmp_path / "c.json").exists()


def test_params_dataclass_and_file_ranges_cover_the_same_fields():
    assert {f.name for f in dataclasses.fields(PrecopyParams)} == set(costfile.PARAM_RANGES)
