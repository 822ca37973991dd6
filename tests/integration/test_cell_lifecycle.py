"""cellctl cell up/down: down removes exactly what up recorded, also after a crash, and is idempotent."""
import json
import os
import subprocess

import pytest

from cellbed.cell.accel import probe
from cellbed.cell import cell as cellmod
from cellbed.cell import procs
from cellbed.runtime.cgroups import HostCgroup
from cellbed.cell import cell_pki
from cellbed.v1 import node_pb2 as npb

pytestmark = pytest.mark.integration


def netns_list() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def links() -> set[str]:
    return {l["ifname"] for l in json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True,
                                                            text=True, check=True).stdout)}


def recorded(st: dict, kind: str, key: str) -> list:
    return [r[key] for r in st["resources"] if r["kind"] == kind]


def assert_nothing_left(st: dict, pids: list[int], sdir: str) -> None:
    assert not set(recorded(st, "netns", "name")) & netns_list()
    assert not set(recorded(st, "link", "name")) & links()
    for rel in recorded(st, "cgroup", "rel"):
        assert not HostCgroup(rel).exists(), rel
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z", pid
    assert not os.path.exists(sdir)


async def _start_vm(st, host="h1", name="lc1"):
    async with cell_pki.node_client(st, host) as c:
        await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=name, mem_mib=128,
                                                                  workload=npb.Workload(cpu_load=0.05, wss_mib=8))),
                     timeout=180)


def _all_pids(root: str, st: dict) -> list[int]:
    pids = [r["pid"] for r in st["resources"] if r["kind"] == "process" and "pid" in r]
    for h in st["hosts"]:
        with open(os.path.join(root, st["name"], h, "pids.json")) as f:
            pids += [p["pid"] for p in json.load(f).values()]
    for rel in recorded(st, "cgroup", "rel"):
        pids += sorted(HostCgroup(rel).pids())          # libvirtd and the QEMU processes
    return pids


async def test_down_after_normal_up_removes_everything_and_is_idempotent(state_root):
    st = cellmod.up("lca", 1, subnet="10.231.10.0/24", root=state_root)
    await _start_vm(st)
    pids = _all_pids(state_root, st)
    assert len(pids) >= 5   # mosquitto, unshare, hostinit, libvirtd, node, qemu
    removed = cellmod.down("lca", state_root)
    assert any(r.startswith("netns") for r in removed) and any(r.startswith("cgroup") for r in removed)
    assert_nothing_left(st, pids, os.path.join(state_root, "lca"))
    assert cellmod.down("lca", state_root) == []


async def test_down_after_crash_kills_recorded_processes_and_qemu(state_root):
    st = cellmod.up("lcb", 1, subnet="10.231.11.0/24", root=state_root)
    await _start_vm(st)
    pids = _all_pids(state_root, st)
    qemus = HostCgroup("cellbed/lcb/h1").pids()
    assert len(qemus) >= 2   # libvirtd + the guest's QEMU
    # Simulated crash: every recorded control process dies at once; QEMU is orphaned.
    with open(os.path.join(state_root, "lcb", "h1", "pids.json")) as f:
        hp = json.load(f)
    for ident in [*hp.values(), *[r for r in st["resources"] if r["kind"] == "process" and "pid" in r]]:
        procs.kill(ident)
    assert any(os.path.exists(f"/proc/{p}") for p in qemus - {hp["libvirtd"]["pid"]})
    assert os.path.exists(os.path.join(state_root, "lcb", "cell.json"))
    cellmod.down("lcb", state_root)
    assert_nothing_left(st, pids, os.path.join(state_root, "lcb"))
    assert cellmod.down("lcb", state_root) == []


def test_accel_auto_is_not_fooled_by_software_kvm():
    if not os.path.exists("/sys/module/kvm_pvm"):
        pytest.skip("this machine has no software kvm_pvm to be fooled by")
    choice = probe("auto")
    assert choice.accel == "tcg" and "kvm_pvm" in choice.reason


@pytest.mark.kvm
async def test_kvm_cell_migrates(state_root):
    choice = probe("auto")
    if choice.accel != "kvm":
        pytest.skip(f"no real hardware virtualisation here: {choice.reason}")
    st = cellmod.up("lck", 2, accel="kvm", subnet="10.231.12.0/24", root=state_root)
    try:
        await _start_vm(st)
        async with cell_pki.node_client(st, "h1") as c:
            rec = (await c.call("MigrateVm", npb.MigrateVmRequest(name="lc1", dest_host="h2"), timeout=300)).record
        assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED, rec.detail
    finally:
        cellmod.down("lck", state_root)
