"""Crash recovery of live migration on a real 2-host cell (issue 12): one test per fault kind,
injected during pre-copy with the real mechanism (SIGKILL by recorded PID, the QEMU found in
the host's recorded cgroup, the link cut inside the host's namespace). After each, the
invariant checker (cellbed/experiment/chaos/checker.py) must pass on what the cell shows: the
VM runs in exactly one libvirt and is listed by exactly one daemon, the same host; its guest
kept its boot id and its heartbeat advances; the migration has exactly one final record, whose
outcome matches where the VM is; no lease outlives its migration."""
import asyncio
import os
import subprocess

import pytest

from cellbed.cell import cell as cellmod, cell_pki
from cellbed.experiment.chaos import faults
from cellbed.experiment.chaos.checker import check_history
from cellbed.experiment.chaos.observe import libvirt_uri, snapshot
from cellbed.v1 import node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

CELL, SUBNET = "flt", "10.231.24.0/24"
SLOW = npb.MigrationOptions(bandwidth_mib_s=8)     # pre-copy lasts several seconds: room for a fault


@pytest.fixture(scope="module")
def fcell(state_root):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[1.0], host_mem_mib=[1024], root=state_root,
                    monitor_period_s=1.0)
    try:
        yield st, cellmod.state_dir(CELL, state_root)
    finally:
        for h in st["hosts"]:
            for f in ("node.log", "hostinit.log"):
                p = os.path.join(state_root, CELL, h, "logs", f)
                if os.path.exists(p):
                    print(f"--- {h} {f} (tail)\n" + "".join(open(p).readlines()[-30:]))
        cellmod.down(CELL, state_root)


async def call(st, host, method, req, timeout=30):
    async with cell_pki.node_client(st, host) as c:
        return await c.call(method, req, timeout=timeout)


async def start_vm(st, host, name):
    w = npb.Workload(cpu_load=0.1, wss_mib=48, dirty_mib_s=4)
    await call(st, host, "StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=name, mem_mib=128, vcpus=1, workload=w)),
               timeout=180)

    async def beating():
        v = {x.spec.name: x for x in (await call(st, host, "ListVms", npb.ListVmsRequest())).vms}.get(name)
        return v is not None and v.heartbeat > 0
    await wait_until(beating, 60, f"guest {name} heartbeat on {host}")


def precopy_bytes(st, host, vm) -> int:
    out = subprocess.run(["virsh", "-c", libvirt_uri(st, host), "domjobinfo", vm], capture_output=True, text=True,
                         timeout=20).stdout
    for line in out.splitlines():
        if line.startswith("Data processed:"):
            n, unit = line.split(":", 1)[1].split()
            return int(float(n) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}.get(unit, 1))
    return 0


async def migration_in_precopy(st, vm, src="h1", dst="h2") -> str:
    """Start a slow migration in the background; once pre-copy has moved data, return its id."""
    task = asyncio.create_task(call(st, src, "MigrateVm", npb.MigrateVmRequest(name=vm, dest_host=dst, options=SLOW),
                                    timeout=300))

    async def lease():
        hs = (await call(st, dst, "GetHostState", npb.GetHostStateRequest())).state
        return hs.leases[0].migration_id if hs.leases else ""
    mid = await wait_until(lease, 60, f"lease for {vm} on {dst}")

    async def moving():
        return await asyncio.to_thread(precopy_bytes, st, src, vm) > 4 * 2**20
    await wait_until(moving, 60, f"pre-copy of {vm} under way")
    task.add_done_callback(lambda t: t.exception())       # the caller may see the fault; the record says what happened
    return mid


def stalled(st, host, vm):
    """A condition: the job's processed bytes stopped growing between two looks (the cut took hold)."""
    seen = []

    async def check():
        seen.append(await asyncio.to_thread(precopy_bytes, st, host, vm))
        return len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]
    return check


async def settled(st, vm, mid):
    """The one final record of *mid*, once every daemon and libvirtd answers and no lease is left."""
    async def done():
        s, silent, unresolved = await snapshot(st, "settle", [mid])
        recs = [r for r in s.records if r.id == mid]
        ready = recs and not silent and not unresolved and not s.reservations and vm in s.guests   # guest polled since it landed
        return (s, recs[0]) if ready else None
    return await wait_until(done, 180, f"migration {mid} of {vm} settled")


async def check_intact(st, vm, mid):
    s1, rec = await settled(st, vm, mid)

    async def later():
        s2, silent, _ = await snapshot(st, "after", [mid])
        g1, g2 = s1.guests.get(vm), s2.guests.get(vm)
        return s2 if not silent and g1 and g2 and g2.heartbeat > g1.heartbeat else None
    s2 = await wait_until(later, 60, f"heartbeat of {vm} advancing")
    violations = check_history([s1, s2], [vm])
    assert not violations, "\n".join(map(str, violations))
    finals = [r for r in s2.records if r.id == mid]
    assert len(finals) == 1, finals
    print(f"{vm}: {finals[0].outcome} ({finals[0].src} -> {finals[0].dst})")
    return finals[0]


async def full_record(st, host, mid):
    recs = (await call(st, host, "ListMigrations", npb.ListMigrationsRequest())).records
    return next(r for r in recs if r.id == mid)


async def stop_everywhere(st, vm):
    for h in st["hosts"]:
        names = [v.spec.name for v in (await call(st, h, "ListVms", npb.ListVmsRequest())).vms]
        if vm in names:
            await call(st, h, "StopVm", npb.StopVmRequest(name=vm), timeout=60)


@pytest.mark.parametrize("who", ["h1", "h2"])
async def test_node_daemon_killed_during_precopy(fcell, who):
    """libvirt carries on with a peer-to-peer migration whose daemon died: the restarted daemon
    finds the open journal entry, waits for libvirt's job, and writes the one truthful record."""
    st, sdir = fcell
    vm = f"dk{who}"
    await start_vm(st, "h1", vm)
    mid = await migration_in_precopy(st, vm)
    old = faults.host_pids(sdir, who)["node"]["pid"]
    faults.kill_recorded(sdir, who, "node")
    await asyncio.to_thread(faults.wait_restarted, sdir, who, "node", old)
    r = await check_intact(st, vm, mid)
    rec = await full_record(st, "h1", mid)
    assert r.outcome in ("succeeded", "failed"), rec.detail
    if who == "h1":
        assert rec.reconciled, rec.detail
    await stop_everywhere(st, vm)


@pytest.mark.parametrize("who", ["h1", "h2"])
async def test_libvirtd_killed_during_precopy(fcell, who):
    st, sdir = fcell
    vm = f"lk{who}"
    await start_vm(st, "h1", vm)
    mid = await migration_in_precopy(st, vm)
    old = faults.host_pids(sdir, who)["libvirtd"]["pid"]
    faults.kill_recorded(sdir, who, "libvirtd")
    await asyncio.to_thread(faults.wait_restarted, sdir, who, "libvirtd", old)
    await check_intact(st, vm, mid)
    await stop_everywhere(st, vm)


async def test_incoming_qemu_killed(fcell):
    st, _ = fcell
    vm = "qk"
    await start_vm(st, "h1", vm)
    mid = await migration_in_precopy(st, vm)
    faults.kill_qemu(st, "h2", vm)
    r = await check_intact(st, vm, mid)
    assert r.outcome == "failed" and r.src == "h1"
    await stop_everywhere(st, vm)


async def test_link_cut_during_precopy(fcell):
    st, _ = fcell
    vm = "lc"
    await start_vm(st, "h1", vm)
    mid = await migration_in_precopy(st, vm)
    faults.link(st, "h2", up=False)
    try:
        await wait_until(stalled(st, "h1", vm), 60, f"pre-copy of {vm} stalled by the cut link")
    finally:
        faults.link(st, "h2", up=True)
    await check_intact(st, vm, mid)
    await stop_everywhere(st, vm)
