"""ResultsWriter.update_manifest: what a run learns as it reads its input (the trace reader's
counts) goes into manifest.json, rewritten whole; the sections written at the start stay."""
import json

import pytest

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.experiment.results.writer import ResultsWriter, load_run


def test_a_section_is_added_and_the_start_sections_stay(tmp_path):
    w = ResultsWriter(tmp_path / "r", {"format": "x", "name": "n", "scenario": {"a": 1}})
    w.update_manifest(trace={"anomalies": {"late_rows": {"count": 2, "first": "t/p.csv.gz:3"}}})
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m == {"format": "x", "name": "n", "scenario": {"a": 1},
                 "trace": {"anomalies": {"late_rows": {"count": 2, "first": "t/p.csv.gz:3"}}}}
    assert not (tmp_path / "r" / "manifest.json.tmp").exists()
    with pytest.raises(InvalidArgument, match="'scenario' is written at the start"):
        w.update_manifest(scenario={})
    w.complete({"ok": True}, t_s=1.0)
    assert load_run(tmp_path / "r").manifest["trace"]["anomalies"]["late_rows"]["count"] == 2
    with pytest.raises(FailedPrecondition, match="closed"):
        w.update_manifest(trace={})
