"""`cellctl ui` stops on Ctrl-C with exit 130, as the UI tests' harness (tests/ui_browser.py) starts it.

The plant: the test's own process ignores SIGINT while it starts the child, as a pytest-xdist worker
does (tier 2 on two workers). A child inherits an ignored signal, and Python then installs no
KeyboardInterrupt handler, so the harness must give the child SIGINT's default action, as a terminal
does; otherwise the child never sees Ctrl-C and is killed after 20 s (-9)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from tests import ui_browser as ub

COMPARE = Path(__file__).resolve().parents[2] / "docs" / "results" / "compare-5host"


def _sigint_ignored(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        ign = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn"))
    return bool(ign & (1 << (signal.SIGINT - 1)))


def test_ctrl_c_stops_cellctl_ui_even_when_its_parent_ignores_sigint():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert _sigint_ignored(os.getpid())     # the plant holds
        ui = ub.UiProcess([str(COMPARE), "--no-live"])
    finally:
        signal.signal(signal.SIGINT, before)
    with ui:
        assert ui.url.startswith("http://127.0.0.1:")
        assert not _sigint_ignored(ui.proc.pid)
    assert ui.proc.returncode == 130, "\n".join(ui.errors[-40:])
    assert "cellctl: interrupted" in ui.errors
