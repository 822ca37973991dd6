"""Issue 5, acceptance 3: `cellctl run` on a real 3-host cell driven by the generator ends with
run_completed and a report whose plots are not empty; the cell it brought up is gone afterwards.

CI runs scenarios/real-3host.toml shortened with scenario knobs: 20 simulated minutes at time
compression 9 (133 s of wall time instead of 10 minutes), once per session: the same run is the
real half of compare's tests (tests/integration/test_compare.py, through --real-from). The
full 10-minute run is `sudo cellctl run scenarios/real-3host.toml` (see docs/results/real-3host.md).
"""
import json
from pathlib import Path

import numpy as np
import pytest

from cellbed.experiment import load_run
from tests.integration.conftest import cell_leftovers

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SUBNET = "10.231.51.0/24"


@pytest.fixture
def real_run(real_3host_run):
    """The session's real run (conftest.real_3host_run), which compare's tests read too."""
    return real_3host_run


def test_real_run_completes_with_a_report(real_run):
    out = real_run[0]
    run = load_run(out)                                   # refuses a folder without run_completed
    done = run.completed
    assert done["kind"] == "run_completed" and done["driver"] == "real"
    assert done["ok"], done
    t = done["tasks"]
    assert t["lost"] == 0 and t["duplicated"] == 0 and t["stray"] == 0, t
    assert t["vms_placed"] >= 3, t                        # the generator's stream became real guests
    assert done["runner"].get("set_workload", 0) > 0      # and drove their load live
    events = [json.loads(x)["kind"] for x in (out / "events.jsonl").read_text().splitlines()]
    assert events[:2] == ["run_started", "cell_up"] and events[-1] == "run_completed"
    # one tick per simulated minute, over the 3 hosts, with guests running
    assert list(run.ticks["t_s"]) == [60.0 * k for k in range(1, 21)]
    assert (run.ticks["nodes"] == 3).all()
    assert run.ticks["tasks_running"].max() >= 3
    assert run.ticks["used_cpu"].max() > 0.0 and run.ticks["used_mem"].max() > 0.0
    a = run.allocations(["outcome", "host", "total_ms"])
    placed = a["outcome"] == "placed"
    assert placed.sum() == t["vms_placed"] and set(a["host"][placed]) <= {"h1", "h2", "h3"}
    assert (a["total_ms"][placed] > 0).all()
    m = run.migrations(["outcome", "bytes"])
    assert int(m["bytes"][m["outcome"] == "succeeded"].sum()) == int(run.ticks["bytes_moved"].sum())
    man = run.manifest
    assert man["extra"]["real_cell"]["time_compression"] == 9.0
    assert man["scenario"]["cell"]["subnet"] == SUBNET
    assert man["stages"]["B1"].startswith("real single-box cell of 3")


def test_report_plots_are_not_empty(real_run):
    from matplotlib.image import imread
    out = real_run[0]
    assert "![ASR over time](asr.png)" in (out / "report.md").read_text()
    for name in ("asr.png", "overloaded.png", "migrations.png", "alloc_cdf.png"):
        img = imread(out / name)
        assert img.shape[0] > 200 and img.shape[1] > 400, name
        # not a blank canvas: a real share of the pixels differ from the background
        flat = img[..., :3].reshape(-1, 3)
        assert np.mean(np.any(np.abs(flat - flat[0]) > 0.05, axis=1)) > 0.02, name


def test_the_cell_is_torn_down(real_run):
    out, (br0, ns0), (br1, ns1) = real_run
    name = load_run(out).manifest["extra"]["real_cell"]["name"]
    # Right after the run its bridge and namespaces are gone, and they are now. Only this cell's
    # names are compared: another test file's cell may come and go meanwhile (tier 2 on two workers).
    assert f"cb{name}br" not in br0 | br1 and not {n for n in ns0 | ns1 if n.startswith(f"cb-{name}-")}
    assert cell_leftovers(name) == (set(), set())
    assert (out / "cell-logs").is_dir()
