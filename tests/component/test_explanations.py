"""Why this host (issue 29, acceptance 1, on model cells; on real cells: a SAN round of a 3-host
--san cell in tests/integration/test_masb_cell.py, a Megha placement in test_megha_cell_up.py): an
explained SAN round lists the broker's candidates with their scores, each target's answer with its
numbers, the final order and the view's age, and the target chosen is the first one of that order
that step 5 did not find refused (checked against the explanation itself); an explained Megha
placement lists the GM's match (the hosts offered on its view, the one chosen) and the LM's
verdict."""
from __future__ import annotations

import json
import zlib

import pytest

from cellbed.cli.main import main as cellctl
from cellbed.experiment.report.explain import find
from cellbed.runtime.explain import sampled


def run(tmp_path, scenario: str, *sets: str):
    out = tmp_path / "run"
    args = ["run", scenario, "--out", str(out), "--quiet", "--no-report", "--explain", "all"]
    for s in sets:
        args += ["--set", s]
    cellctl(args)
    lines = (out / "decisions.jsonl").read_text().splitlines()
    return out, [json.loads(x) for x in lines]


def check_san_round(d: dict) -> None:
    """What acceptance 1 asks of one SAN round, against the explanation itself."""
    assert d["kind"] == "san" and d["id"] and d["agent"] and d["vm"]
    if not d["candidates"]:                      # the broker had none: the round gave up there
        assert d["outcome"] != "migrated" and not d["answers"] and d["view_age_s"] is None
        return
    assert all(isinstance(c["score"], float) and c["host"] != d["agent"] for c in d["candidates"])
    assert d["view_age_s"] is not None and 0 <= d["view_age_s"] <= d["view_oldest_s"]
    assert {a["host"] for a in d["answers"]} <= {c["host"] for c in d["candidates"]}
    for a in d["answers"]:
        if a["accepted"]:
            assert len(a["used"]) == 2 and len(a["capacity"]) == 2 and a["capacity"][0] > 0
        else:
            assert a["reason"] and a["detail"]                        # a refusal says why, with its numbers
    accepted = [a["host"] for a in d["answers"] if a["accepted"]]
    assert sorted(o["host"] for o in d["order"]) == sorted(accepted)  # the order is of the acceptors, each once
    assert d["messages"] == 2 * d["rpcs"] and d["rpcs"] >= 1 + len(d["answers"])
    if d["outcome"] == "migrated":
        refused = {t["host"] for t in d["tried"] if t["result"] in ("refused", "migration failed")}
        first = next(o["host"] for o in d["order"] if o["host"] not in refused)
        assert d["chosen"] == first
        assert [t["host"] for t in d["tried"]][-1] == d["chosen"] and d["tried"][-1]["result"] == "migrated"


def test_a_model_san_round_is_explained(tmp_path, capsys):
    out, ds = run(tmp_path, "scenarios/smoke.toml", "run.duration_s=1800")
    sans = [d for d in ds if d["kind"] == "san"]
    migrated = [d for d in sans if d["outcome"] == "migrated"]
    assert len(sans) >= 5 and migrated, [d["outcome"] for d in sans]
    assert sum(bool(d["candidates"]) for d in sans) >= len(sans) // 2
    for d in sans:
        check_san_round(d)
    assert any(not a["accepted"] for d in sans for a in d["answers"])     # refusals too, with their numbers
    # cellctl explain shows one
    d = migrated[0]
    assert find(out, d["id"]) == d
    capsys.readouterr()
    cellctl(["explain", str(out), d["id"]])
    text = capsys.readouterr().out
    assert f"decision {d['id']} (san)" in text and f"chosen {d['chosen']}" in text and "| candidate | score |" in text
    # an unknown id, and a folder without explanations: exit 2, one line naming what is missing
    for args, words in (([str(out), "h1-999-ffffff"], "h1-999-ffffff"), ([str(tmp_path), d["id"]], "decisions.jsonl")):
        with pytest.raises(SystemExit) as e:
            cellctl(["explain", *args])
        err = capsys.readouterr().err
        assert e.value.code == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_model_megha_placement_is_explained(tmp_path):
    _, ds = run(tmp_path, "scenarios/megha-jobs-megha.toml", "cell.nodes=200", "run.duration_s=60",
                "workload.jobs.arrivals_s=20", "policy.megha.gms=2", "policy.megha.lms=2")
    placed = [d for d in ds if d["kind"] == "megha" and d["outcome"] == "placed"]
    assert placed
    for d in placed:
        last = d["matches"][-1]
        assert d["chosen"] == last["chosen"] and d["lm"] == last["lm"] and last["offered"] >= 1
        assert d["chosen"] in [h["host"] for h in last["hosts"]] or last["offered"] > 32
        assert d["verdicts"][-1]["result"] == "ok" and d["verdicts"][-1]["host"] == d["chosen"]
        assert d["view_age_s"] is not None and d["view_age_s"] >= 0
        assert d["messages"] == 2 * len(d["verdicts"])
    refused = [d for d in ds if d["kind"] == "megha" and any(v["result"] == "refused" for v in d["verdicts"])]
    for d in refused:                        # an LM found the GM's view stale: its verdict says why
        assert all(v["detail"] for v in d["verdicts"] if v["result"] == "refused")


@pytest.mark.parametrize("share", [0.01, 0.05])
def test_the_share_is_kept_and_every_agent_agrees(share):
    ids = [f"h{i % 97}-{i}-{zlib.crc32(str(i).encode()):06x}" for i in range(200_000)]
    got = sum(sampled(i, share) for i in ids) / len(ids)
    assert abs(got - share) < 0.1 * share                   # 200k ids: within 10 % of the share
    assert [sampled(i, share) for i in ids[:1000]] == [sampled(i, share) for i in ids[:1000]]
    assert all(sampled(i, 1.0) for i in ids[:100]) and not any(sampled(i, 0.0) for i in ids[:100])
