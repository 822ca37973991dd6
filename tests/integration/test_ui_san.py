"""`cellctl ui` on a real 3-host MASB cell (--san), in headless Chromium: a SAN round run on h1
appears in the page with its steps (candidates from the broker, the targets' answers, the final
check, the migration), pushed as the host runs them. The cell is this module's own (ui3 on
10.231.61.0/24), brought down at the end."""
from __future__ import annotations

import asyncio

import pytest

from cellbed.cell import cell as cellmod, cell_pki
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb
from tests import ui_browser as ub
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration
CELL, SUBNET = "ui3", "10.231.61.0/24"


@pytest.fixture(scope="module")
def cell(state_root):
    """SAN's own overload trigger is off, so the operator's round below is the only one: on TCG a
    guest measures up to a full core while it boots, h1 (0.6 cores) then reads as overloaded, and
    its automatic round for uisan made NegotiateTask answer "already being negotiated" (a CI run)."""
    why = _can_run_cells() or ub.missing()
    if why:
        pytest.fail(f"the UI's SAN test cannot run: {why}")
    try:
        st = cellmod.up(CELL, 3, subnet=SUBNET, host_cpus=[0.6], host_mem_mib=[1024], root=state_root,
                        monitor_period_s=1.0, san={"enabled": False, "report_period_s": 1.0, "window_s": 5.0})
    except BaseException:
        cellmod.down(CELL, state_root)
        raise
    try:
        yield st
    finally:
        cellmod.down(CELL, state_root)


async def admin_call(st, target, method, req, timeout):
    t = GrpcTransport(lambda n: n, RealClock(), security=cell_pki.admin(st))
    try:
        return await t.request(target, method, req, timeout=timeout)
    finally:
        await t.close()


def test_a_san_round_appears_with_its_steps(cell, state_root, tmp_path):
    from selenium.webdriver.common.by import By
    h1 = f"{cell['hosts']['h1']['address']}:{cell['hosts']['h1']['grpc_port']}"
    asyncio.run(admin_call(cell, h1, "NodeAgent/StartVm", npb.StartVmRequest(spec=npb.VmSpec(
        name="uisan", mem_mib=128, vcpus=1, workload=npb.Workload(cpu_load=0.05, wss_mib=16))), 240))
    with ub.UiProcess(["--cell", CELL, "--state-root", state_root, "--refresh-s", "1"]) as ui:
        d = ub.chromium(ub.fresh_profile(tmp_path))
        try:
            d.get(ui.url)
            ub.wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#live-broker table tbody tr"), 60, "the broker's cache")
            ub.wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#host-cards article .res")) == 3, 60, "3 hosts")
            # a SAN round for uisan now (the operators' NegotiateTask: steps 2-5, whatever the load)
            neg = asyncio.run(admin_call(cell, h1, "San/NegotiateTask", masbpb.NegotiateTaskRequest(name="uisan"), 300))
            n = neg.negotiation
            assert n.state == "migrated", (n.state, [(s.kind, s.detail) for s in n.steps])
            # the page re-renders the panel as steps and negotiations arrive: read it in one go
            want = [s.kind for s in n.steps]

            def shown(d):
                x = d.execute_script("""
                    const e = document.querySelector(`#live-san details[data-san='${arguments[0]}'][data-state=migrated]`);
                    if (!e) return null;
                    e.open = true;
                    return {kinds: [...e.querySelectorAll('ol.steps li')].map(li => li.dataset.kind),
                            summary: e.querySelector('summary').textContent};""", n.san_id)
                return x if x and x["kinds"] == want else None
            got = ub.wait(d, shown, 30, f"negotiation {n.san_id}, migrated, with its steps {want}")
            assert {"candidates", "request", "process", "migrated"} <= set(got["kinds"])
            assert f"→ {n.target}" in got["summary"] and "uisan" in got["summary"]
            # and the steps were pushed one by one as h1 ran them (its SAN_STEP events), not only read at the end
            pushed = [x["kind"] for x in d.execute_script("return window.cellbed.sanSteps || []") if x["san_id"] == n.san_id]
            assert "candidates" in pushed and "migrated" in pushed, pushed
            ub.screenshot(d, "live-san-round", full=True)
            assert ub.console_errors(d) == []
        finally:
            d.quit()
