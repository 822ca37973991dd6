"""`cellctl ui` on a real 2-host cell, in headless Chromium: the page lists both hosts, a VM started
from the CLI appears on its host, and a live migration started from the CLI shows in flight with
its progress, then as succeeded on its destination, without a reload. The cell is this module's
own (ui2 on 10.231.62.0/24), brought down at the end."""
from __future__ import annotations

import subprocess
import sys

import pytest

from cellbed.cell import cell as cellmod
from tests import ui_browser as ub
from tests.integration.conftest import REPO, _can_run_cells

pytestmark = pytest.mark.integration
CELL, SUBNET = "ui2", "10.231.62.0/24"


@pytest.fixture(scope="module")
def cell(state_root):
    why = _can_run_cells() or ub.missing()
    if why:
        pytest.fail(f"the UI's cell test cannot run: {why}")
    try:
        st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[1.0], host_mem_mib=[1024], root=state_root,
                        monitor_period_s=1.0)
    except BaseException:
        cellmod.down(CELL, state_root)          # up records before it creates: remove what it made
        raise
    try:
        yield st
    finally:
        cellmod.down(CELL, state_root)


def cellctl(state_root, *args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cellbed.cli.main", "--cell", CELL, "--state-root", state_root, *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_live_cell_hosts_vms_and_a_migration_in_flight_then_succeeded(cell, state_root, tmp_path):
    from selenium.webdriver.common.by import By
    with ub.UiProcess(["--cell", CELL, "--state-root", state_root, "--refresh-s", "1"]) as ui:
        d = ub.chromium(ub.fresh_profile(tmp_path))
        try:
            d.get(ui.url)
            # The page redraws its cards every second: read them in one script, never through an element
            # held across a redraw (the clean-clone run of stop 35: StaleElementReferenceException).
            def host_cards(d):
                got = d.execute_script("return Array.from(document.querySelectorAll('#host-cards article'), "
                                       "a => [a.dataset.host || null, a.querySelector('.res')?.textContent || '']);")
                return got if len(got) == 2 and all(res for _, res in got) else None
            cards = ub.wait(d, host_cards, 90, "both hosts' states")
            assert [h for h, _ in cards] == ["h1", "h2"]
            assert "cores" in cards[0][1] and "MiB" in cards[0][1]
            d.execute_script("window.cellbedSentinel = 'no reload'")
            start = cellctl(state_root, "vm", "start", "--host", "h1", "--name", "uimig", "--mem-mib", "128",
                            "--wss-mib", "48", "--dirty-mib-s", "4")
            out, err = start.communicate(timeout=240)
            assert start.returncode == 0, err
            ub.wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#host-h1 tr[data-vm=uimig]"), 30, "uimig on h1")
            ub.screenshot(d, "live-cell-vm")
            # a bandwidth cap keeps the migration in flight for seconds: its progress is pushed meanwhile
            mig = cellctl(state_root, "vm", "migrate", "uimig", "--to", "h2", "--bandwidth-mib-s", "16")
            mid = ub.wait(d, lambda d: d.execute_script(
                "const r = document.querySelector(\"tr[data-vm=uimig][data-status='in flight']\"); return r && r.dataset.migration"),
                60, "the migration in flight")
            ub.wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-vm=uimig][data-status='in flight'] progress"), 60,
                    "its progress (bytes sent of sent + remaining)")
            ub.screenshot(d, "live-cell-migration-in-flight")
            out, err = mig.communicate(timeout=300)
            assert mig.returncode == 0, err
            ub.wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-vm=uimig][data-status=succeeded]"), 30,
                    "the migration shown as succeeded")
            ub.wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#host-h2 tr[data-vm=uimig]"), 30, "uimig on h2")
            assert d.execute_script("return window.cellbedSentinel") == "no reload"
            seen = d.execute_script("return window.cellbed.seen[arguments[0]]", mid)
            assert seen[0] == "in flight" and seen[-1] == "succeeded", seen
            lat = d.execute_script("return window.cellbed.latencies")
            print(f"live update latency over {len(lat)} pushed changes: median {sorted(lat)[len(lat) // 2]:.3f} s, "
                  f"max {max(lat):.3f} s")
            ub.screenshot(d, "live-cell-migrated", full=True)
            assert ub.console_errors(d) == []
        finally:
            d.quit()
    assert ui.proc.returncode == 130, "\n".join(ui.errors[-120:])          # Ctrl-C: "cellctl: interrupted"
