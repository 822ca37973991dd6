"""SIGTERM stops a model run at once, with run_failed (issue 16, acceptance 4): the model cell
holds nothing outside its process, so it does not unwind its agents and tasks. The stop time is
printed (a benchmark figure), not asserted."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.conftest import wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


async def test_sigterm_stops_a_model_run_with_run_failed(tmp_path):
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "cellbed.cli.main", "run", os.path.join(REPO, "scenarios", "smoke.toml"),
                          "--set", "cell.nodes=500", "--set", "run.duration_s=86400", "--out", str(out), "--quiet",
                          "--no-report"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        async def ticking():
            t = out / "ticks.csv"
            return t.exists() and len(t.read_text().splitlines()) >= 3   # header + 2 ticks: past the warm start
        await wait_until(ticking, 600, "the run to write two ticks")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=300)
        stopped_s = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print(f"\nSIGTERM -> exit: {stopped_s:.2f} s (500 nodes)")
    assert p.returncode == 128 + signal.SIGTERM, err
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    assert events[-1]["kind"] == "run_failed" and "signal 15" in events[-1]["detail"]
    assert "Traceback" not in err and "run_failed" in err
