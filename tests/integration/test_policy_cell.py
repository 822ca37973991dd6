"""Plugins on a real cell (issue 28): one 3-host cell with MASB's SAN and Megha's masters, brought
up with `cellctl cell up --policy`, every agent loading the same [policy] table:

* a node daemon given an overload plugin that raises on every call keeps serving; the VM on it
  keeps running; the errors are counted (cellbed.v1.Policies and `cellbed_policy_errors_total`
  on its /metrics);
* the outside distribution examples/refarch-policies, installed as a user installs it, places
  Megha tasks on real VMs: its task order selected by entry-point name, its allocation by
  file.py:attr; the GM reports their identity (distribution, version, source hash).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys

import pytest

from cellbed.cell import cell as cellmod, cell_pki
from cellbed.domain.identity import Role
from cellbed.v1 import node_pb2 as npb, policy_pb2 as ppb, policy_pb2_grpc as ppbg
from tests.conftest import wait_until
from tests.integration.conftest import REPO, _can_run_cells
from tests.integration.test_megha_cell_up import scrape

pytestmark = pytest.mark.integration

CELL, SUBNET = "pol", "10.231.64.0/24"
CELLCTL = [sys.executable, "-m", "cellbed.cli.main"]
RAISING = os.path.join(REPO, "tests", "fixtures", "bad_policies.py") + ":raising_overload"
ALLOCATION = os.path.join(REPO, "examples", "refarch-policies", "src", "refarch_policies", "allocation.py")


def ctl(state_root: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*CELLCTL, "--state-root", state_root, "--cell", CELL, *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
def cell(state_root):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    r = ctl(state_root, "cell", "up", "--hosts", "3", "--subnet", SUBNET, "--host-cpus", "0.5", "--host-mem-mib", "768",
            "--monitor-period-s", "1", "--san", "--megha",
            "--policy", f"overload={RAISING}", "--policy", "task_order=refarch.srtf",
            "--policy", f"allocation={ALLOCATION}:best_fit", timeout=900)
    try:
        assert r.returncode == 0, r.stderr
        yield cellmod.load_state(CELL, state_root)
    finally:
        cellmod.down(CELL, state_root)


async def policies(st: dict, target: str) -> ppb.ListPoliciesResponse:
    ch = cell_pki.security(st, Role.ADMIN, "admin").channel(target)
    try:
        return await ppbg.PoliciesStub(ch).ListPolicies(ppb.ListPoliciesRequest(), timeout=10)
    finally:
        await ch.close()


def timing(r: ppb.ListPoliciesResponse, stage: str):
    return next((t for t in r.timings if t.stage == stage), None)


async def test_a_raising_plugin_is_counted_and_the_node_keeps_serving_and_its_vm(cell, state_root):
    st = cell
    h1 = f"{st['hosts']['h1']['address']}:{st['hosts']['h1']['grpc_port']}"
    r = ctl(state_root, "vm", "start", "--host", "h1", "--name", "pv1", "--mem-mib", "128", "--cpu-load", "0.2")
    assert r.returncode == 0, r.stderr

    async def errors_counted():
        t = timing(await policies(st, h1), "overload")
        return t is not None and t.errors >= 3
    await wait_until(errors_counted, 120, "the raising overload plugin's errors on h1")
    first = timing(await policies(st, h1), "overload")
    assert first.calls == first.errors                          # every call raised, every one counted
    loaded = {p.key: p for p in (await policies(st, h1)).policies}
    assert loaded["policy.overload"].origin == "file" and loaded["policy.overload"].name == "raising_overload"
    assert loaded["policy.overload"].sha256 == hashlib.sha256(open(RAISING.split(":")[0], "rb").read()).hexdigest()
    # the daemon keeps serving: it lists the VM, whose guest keeps beating
    async with cell_pki.node_client(st, "h1") as c:
        hb0 = {v.spec.name: v.heartbeat for v in (await c.call("ListVms", npb.ListVmsRequest(), timeout=15)).vms}
    assert "pv1" in hb0

    async def beats():
        async with cell_pki.node_client(st, "h1") as c:
            vms = {v.spec.name: v for v in (await c.call("ListVms", npb.ListVmsRequest(), timeout=15)).vms}
        return "pv1" in vms and vms["pv1"].heartbeat > hb0["pv1"]
    await wait_until(beats, 60, "pv1's heartbeat on h1")
    later = timing(await policies(st, h1), "overload")
    assert later.errors > first.errors                          # still called (and refused) at every sample
    # ... and exported on its /metrics
    target = next(t["target"] for t in st["metrics_targets"] if t["labels"].get("host") == "h1")
    text = await asyncio.to_thread(scrape, st, target)
    line = next((ln for ln in text.splitlines() if ln.startswith("cellbed_policy_errors_total{")
                 and 'agent="h1"' in ln and 'stage="overload"' in ln and "raising_overload" in ln), "")
    assert line and float(line.rsplit(" ", 1)[1]) >= later.errors, text[-2000:]
    r = ctl(state_root, "vm", "stop", "pv1")
    assert r.returncode == 0, r.stderr


async def test_the_outside_package_places_megha_tasks_by_name_and_by_file(cell, state_root):
    st = cell
    names = []
    for i, cpu in enumerate((0.2, 0.1)):
        r = ctl(state_root, "submit", "--cpu", str(cpu), "--mem", "128", "--name", f"rt{i}", "--wait-s", "300",
                "--json")
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["state"] in ("TASK_STATE_RUNNING", "TASK_STATE_STARTING"), got
        names.append(got["name"])
    gm = st["megha"]["gms"]["gm1"]
    r = await policies(st, gm)
    loaded = {p.key: p for p in r.policies}
    order, alloc = loaded["policy.task_order"], loaded["policy.allocation"]
    assert (order.name, order.origin, order.dist, order.dist_version, order.ref) == \
        ("SRTF", "entry-point", "refarch-policies", "1.0.0", "refarch.srtf")
    assert (alloc.name, alloc.origin) == ("BESTFIT", "file")
    assert alloc.sha256 == hashlib.sha256(open(ALLOCATION, "rb").read()).hexdigest()
    assert timing(r, "task_order").calls >= 2 and timing(r, "allocation").calls >= 2
    assert timing(r, "allocation").errors == 0
    for n in names:                                              # placed on real VMs: a node lists each
        async def listed(n=n):
            for h in st["hosts"]:
                async with cell_pki.node_client(st, h) as c:
                    if any(v.spec.name == n for v in (await c.call("ListVms", npb.ListVmsRequest(), timeout=15)).vms):
                        return True
            return False
        await wait_until(listed, 120, f"{n} on a node")
