"""`cellctl chaos` on a real 2-host cell with SAN and Megha (issue 12), as a user runs it: bad
requests are refused with one line and rc 2; a short seeded campaign (15 steps: the fewest that
reach every fault kind) injects at least 12 faults, every kind this kernel supports at least once
(the broker killed during a SAN round, the active LM during a launch, ...), with 0 violations, and
writes its history, summary, manifest and timeline. The long campaigns (10 seeds, hundreds of
faults) are benchmarks: `cellctl chaos -n 100 --san 30 --megha 30 --seed S` (docs/chaos.md)."""
import json
import os
import subprocess
import sys

import pytest

from cellbed.cell import cell as cellmod
from cellbed.experiment.chaos.plan import FAULTS, NETEM
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

CELL, SUBNET = "chs", "10.231.26.0/24"
# The campaign's seed: 11 in CI; the campaign is checked over other seeds (issue 27: 10 in a row) with
#   for s in $(seq 1 10); do CELLBED_CHAOS_SEED=$s ./cellbed.sh test tests/integration/test_chaos.py -k campaign; done
SEED = int(os.environ.get("CELLBED_CHAOS_SEED", "11"))


@pytest.fixture(scope="module")
def ccell(state_root):
    """SAN's own overload trigger is off: the campaign's rounds (NegotiateTask) are the only ones, so
    a step is judged on what its fault did (on TCG a freshly migrated guest measures near a full
    core for a few samples, and automatic rounds would move it back and forth meanwhile)."""
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[1.0], host_mem_mib=[1024], root=state_root,
                    monitor_period_s=1.0, san={"enabled": False}, megha={"gms": 1, "lms": 1})
    try:
        yield st
    finally:
        cellmod.down(CELL, state_root)


def chaos(state_root, *args, cell=CELL):
    return subprocess.run([sys.executable, "-m", "cellbed.cli.main", "--state-root", state_root, "--cell", cell,
                           "chaos", *args], capture_output=True, text=True, timeout=3600)


def history(out):
    with open(os.path.join(out, "chaos.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("args,cell,want", [
    (["-n", "1"], "nosuch", "cell 'nosuch' is not up"),
    (["-n", "0"], CELL, "-n/--san/--megha: allowed 1..10000"),
    (["-n", "-1"], CELL, "argument -n/--migrations: allowed 0..10000, got -1"),
    (["--faults", "kill_everything"], CELL, "--faults 'kill_everything': allowed kill_dst_daemon"),
    (["--san", "1", "-n", "0", "--faults", "kill_gm"], CELL, "--faults 'kill_gm': allowed"),
])
def test_bad_requests_are_refused_with_one_line(ccell, state_root, args, cell, want):
    r = chaos(state_root, *args, cell=cell)
    assert r.returncode == 2, r.stderr
    assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_short_seeded_campaign_has_no_violation(ccell, state_root, tmp_path):
    out = str(tmp_path / "campaign")
    r = chaos(state_root, "-n", "10", "--san", "3", "--megha", "2", "--seed", str(SEED), "--out", out)
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    rows = history(out)
    injected = [x for x in rows if x["injected"].startswith("SIGKILL") or "link" in x["injected"]
                or "tbf" in x["injected"] or "netem" in x["injected"]]
    assert len(rows) == 15 and len(injected) >= 12
    kinds = {f for op in ("migration", "san", "megha") for f in FAULTS[op]}
    skipped = json.load(open(os.path.join(out, "manifest.json")))["skipped"]
    assert set(skipped) <= set(NETEM)
    assert {x["fault"] for x in injected} == kinds - set(skipped)
    # the broker is killed during a SAN round, the active LM during a launch: what the operator
    # sees for each (issue 27 folded their own campaigns, 113 s of a real cell, into this one)
    [broker] = [x for x in rows if x["fault"] == "kill_broker"]
    assert broker["injected"].startswith("SIGKILL broker"), broker
    [lm] = [x for x in rows if x["fault"] == "kill_active_lm"]
    assert lm["injected"].startswith("SIGKILL lm1a"), lm
    assert sum(len(x["violations"]) for x in rows) == 0
    assert all(os.path.exists(os.path.join(out, f)) for f in ("summary.txt", "manifest.json", "timeline.png"))
