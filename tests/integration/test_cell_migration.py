"""Real VMs in a 2-host single-box cell: start, measure, live-migrate, verify, fail safely."""
import asyncio
import os
import signal

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from cellbed.domain import errors
from cellbed.runtime.cgroups import HostCgroup
from cellbed.cell import cell_pki
from cellbed.runtime.authz import mqtt_tls
from cellbed.v1 import node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.conftest import host_pids, libvirt_uri, virsh_names

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
async def stop_vms_after(cell2):
    """Every VM in this cell was started by these tests: stop them after each test, pass or fail."""
    yield
    for h in cell2["hosts"]:
        for name in await vms(cell2, h):
            async with cell_pki.node_client(cell2, h) as c:
                await c.call("StopVm", npb.StopVmRequest(name=name), timeout=60)


def target(cell, h):
    d = cell["hosts"][h]
    return f"{d['address']}:{d['grpc_port']}"


async def start(cell, host, name, mem=128, cpu=0.1, wss=32, dirty=0.0, dirty_max=False):
    w = npb.Workload(cpu_load=cpu, wss_mib=wss, dirty_mib_s=dirty, dirty_max=dirty_max)
    async with cell_pki.node_client(cell, host) as c:
        return (await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=name, mem_mib=mem, vcpus=1,
                                                                          workload=w)), timeout=180)).vm


async def vms(cell, host) -> dict:
    async with cell_pki.node_client(cell, host) as c:
        return {v.spec.name: v for v in (await c.call("ListVms", npb.ListVmsRequest())).vms}


async def stop(cell, name):
    for h in cell["hosts"]:
        if name in await vms(cell, h):
            async with cell_pki.node_client(cell, h) as c:
                await c.call("StopVm", npb.StopVmRequest(name=name), timeout=60)


async def heartbeat_advances(cell, host, name, above: int) -> int:
    async def hb():
        v = (await vms(cell, host)).get(name)
        return v.heartbeat if v and v.heartbeat > above else 0
    return await wait_until(hb, 30, f"heartbeat of {name} on {host} above {above}")


async def test_reflection_lists_nodeagent_and_health_serving(cell2):
    async with cell_pki.admin(cell2).channel(target(cell2, "h1")) as ch:
        h = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service="cellbed.v1.NodeAgent"),
                                                       timeout=5)
        assert h.status == health_pb2.HealthCheckResponse.SERVING
        stream = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = [s.name async for r in stream for s in r.list_services_response.service]
    assert "cellbed.v1.NodeAgent" in names and "grpc.health.v1.Health" in names


async def test_live_migration_of_dirtying_guest_is_measured_and_verified(cell2):
    vm = await start(cell2, "h1", "mig1", cpu=0.2, wss=32, dirty=16)
    assert vm.boot_to_workload_s > 0
    hb0 = await heartbeat_advances(cell2, "h1", "mig1", 0)
    async with cell_pki.node_client(cell2, "h1") as c:
        rec = (await c.call("MigrateVm", npb.MigrateVmRequest(name="mig1", dest_host="h2"), timeout=300)).record
    assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED, rec.detail
    assert rec.time_elapsed_ms > 0 and rec.downtime_ms > 0 and rec.data_total_bytes > 32 * 2**20
    assert rec.heartbeat_before >= hb0 and rec.heartbeat_after > rec.heartbeat_before
    assert rec.integrity_pages == 32 * 256 and rec.integrity_bad == 0
    # The guest's own dirty rate is in the record (asked for 16 MiB/s; TCG on a shared box may
    # not reach it, but a dirtying guest is never recorded as clean).
    assert rec.guest_dirty_mib_s > 1.0, rec.guest_dirty_mib_s
    print(f"\nmig1: guest dirty {rec.guest_dirty_mib_s:.1f} MiB/s, libvirt sampled {rec.sampled_dirty_mib_s:.1f}, "
          f"libvirt job {rec.memory_dirty_rate / 2**20:.1f} MiB/s")
    assert "mig1" in await vms(cell2, "h2") and "mig1" not in await vms(cell2, "h1")
    assert virsh_names(libvirt_uri(cell2, "h1")).count("mig1") == 0
    assert virsh_names(libvirt_uri(cell2, "h2")).count("mig1") == 1
    await heartbeat_advances(cell2, "h2", "mig1", rec.heartbeat_after)   # still running there
    async with cell_pki.node_client(cell2, "h1") as c:
        hist = (await c.call("ListMigrations", npb.ListMigrationsRequest())).records
    assert rec.id in [r.id for r in hist]
    await stop(cell2, "mig1")


async def test_corrupted_guest_is_recorded_as_failed_migration(cell2):
    await start(cell2, "h1", "bad1", wss=16, dirty=0)
    async with cell_pki.node_client(cell2, "h1") as c:
        await c.call("InjectFault", npb.InjectFaultRequest(name="bad1", kind=npb.FAULT_KIND_CORRUPT))
        rec = (await c.call("MigrateVm", npb.MigrateVmRequest(name="bad1", dest_host="h2"), timeout=300)).record
    assert rec.outcome == npb.MIGRATION_OUTCOME_VERIFICATION_FAILED, rec.detail
    assert rec.integrity_bad >= 1 and "integrity" in rec.detail
    # The VM is not lost and not duplicated: it runs on the destination only.
    assert "bad1" in await vms(cell2, "h2") and "bad1" not in await vms(cell2, "h1")
    await stop(cell2, "bad1")


async def test_panicked_guest_is_seen_as_crashed_and_not_migrated(cell2):
    await start(cell2, "h1", "pan1", wss=8)
    async with cell_pki.node_client(cell2, "h1") as c:
        await c.call("InjectFault", npb.InjectFaultRequest(name="pan1", kind=npb.FAULT_KIND_PANIC))

        async def crashed():
            v = (await vms(cell2, "h1")).get("pan1")
            return v is not None and v.state == npb.VM_STATE_CRASHED and v.state_reason == "panicked"
        await wait_until(crashed, 30, "pan1 crashed (panicked)")
        with pytest.raises(errors.FailedPrecondition, match="crashed"):
            await c.call("MigrateVm", npb.MigrateVmRequest(name="pan1", dest_host="h2"), timeout=60)
    assert "pan1" in await vms(cell2, "h1") and "pan1" not in await vms(cell2, "h2")
    await stop(cell2, "pan1")


async def _migrate_in_background(cell, name, dest, opts):
    async with cell_pki.node_client(cell, "h1") as c:
        return (await c.call("MigrateVm", npb.MigrateVmRequest(name=name, dest_host=dest, options=opts),
                             timeout=300)).record


async def _first_progress(cell, name):
    async with cell_pki.admin(cell).channel(target(cell, "h1")) as ch:
        from cellbed.v1 import node_pb2_grpc as npbg
        async for ev in npbg.NodeAgentStub(ch).WatchEvents(npb.WatchEventsRequest(), timeout=120):
            if ev.kind == npb.EVENT_KIND_MIGRATION_PROGRESS and ev.vm == name and ev.progress.data_processed_bytes > 0:
                return ev


async def _assert_still_on_source(cell, name, rec):
    assert name in await vms(cell, "h1") and name not in await vms(cell, "h2")
    assert name not in virsh_names(libvirt_uri(cell, "h2"))
    await heartbeat_advances(cell, "h1", name, rec.heartbeat_before)   # kept running, no reboot


async def test_migration_aborted_mid_flight_leaves_vm_running_on_source(cell2):
    await start(cell2, "h1", "abt1", mem=192, wss=96, dirty=8)
    task = asyncio.create_task(_migrate_in_background(cell2, "abt1", "h2", npb.MigrationOptions(bandwidth_mib_s=8)))
    await _first_progress(cell2, "abt1")
    async with cell_pki.node_client(cell2, "h1") as c:
        await c.call("AbortMigration", npb.AbortMigrationRequest(name="abt1"))
    rec = await task
    assert rec.outcome == npb.MIGRATION_OUTCOME_ABORTED, (rec.outcome, rec.detail)
    await _assert_still_on_source(cell2, "abt1", rec)
    await stop(cell2, "abt1")


async def test_destination_qemu_killed_mid_flight_leaves_vm_on_source(cell2, state_root):
    await start(cell2, "h1", "kil1", mem=192, wss=96, dirty=8)
    task = asyncio.create_task(_migrate_in_background(cell2, "kil1", "h2", npb.MigrationOptions(bandwidth_mib_s=8)))
    await _first_progress(cell2, "kil1")
    libvirtd = host_pids(state_root, "it", "h2")["libvirtd"]["pid"]
    qemus = HostCgroup("cellbed/it/h2").pids() - {libvirtd}
    assert qemus, "the incoming QEMU should be in h2's cgroup"
    for pid in qemus:   # the destination's incoming QEMU: started by h2's libvirtd, inside h2's cgroup
        os.kill(pid, signal.SIGKILL)
    rec = await task
    assert rec.outcome == npb.MIGRATION_OUTCOME_FAILED, (rec.outcome, rec.detail)
    await _assert_still_on_source(cell2, "kil1", rec)
    await stop(cell2, "kil1")


async def test_timeout_policy_abort_keeps_vm_on_source(cell2):
    await start(cell2, "h1", "tmo1", wss=48, dirty_max=True)
    rec = await _migrate_in_background(cell2, "tmo1", "h2", npb.MigrationOptions(
        bandwidth_mib_s=16, completion_timeout_s=3, timeout_policy=npb.TIMEOUT_POLICY_ABORT))
    assert rec.outcome == npb.MIGRATION_OUTCOME_ABORTED, (rec.outcome, rec.detail)
    assert rec.timeout_action.startswith("abort"), rec.timeout_action
    await _assert_still_on_source(cell2, "tmo1", rec)
    await stop(cell2, "tmo1")


async def test_postcopy_migration_of_heavy_dirtier_succeeds(cell2):
    await start(cell2, "h1", "pc1", mem=160, wss=64, dirty_max=True)
    rec = await _migrate_in_background(cell2, "pc1", "h2", npb.MigrationOptions(postcopy=True, bandwidth_mib_s=32))
    assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED, rec.detail
    assert rec.postcopy_switched and rec.integrity_bad == 0
    await stop(cell2, "pc1")


async def test_bad_input_gets_the_right_status_codes(cell2):
    async with cell_pki.node_client(cell2, "h1") as c:
        with pytest.raises(errors.InvalidArgument, match=r"mem_mib=10 .*64\.\.8192"):
            await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name="x1", mem_mib=10)))
        with pytest.raises(errors.InvalidArgument, match=r"cpu_load=2.0 .*0\.0\.\.1\.0"):
            await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name="x1", workload=npb.Workload(cpu_load=2))))
        with pytest.raises(errors.InvalidArgument, match="vcpus"):
            await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name="x1", vcpus=99)))
        with pytest.raises(errors.NotFound, match="nope"):
            await c.call("StopVm", npb.StopVmRequest(name="nope"))
        with pytest.raises(errors.NotFound):
            await c.call("MigrateVm", npb.MigrateVmRequest(name="nope", dest_host="h2"))
    async with cell_pki.node_client(cell2, "h2") as c:
        with pytest.raises(errors.FailedPrecondition, match=r"memory 0 \+ 512 MiB > capacity 448 MiB"):
            await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name="big0", mem_mib=512)))
    await start(cell2, "h1", "big1", mem=512, wss=16)
    async with cell_pki.node_client(cell2, "h1") as c:
        with pytest.raises(errors.FailedPrecondition, match="already runs on h1"):
            await c.call("MigrateVm", npb.MigrateVmRequest(name="big1", dest_host="h1"))
        with pytest.raises(errors.NotFound, match="h9"):
            await c.call("MigrateVm", npb.MigrateVmRequest(name="big1", dest_host="h9"))
        with pytest.raises(errors.FailedPrecondition, match="capacity 448 MiB"):
            await c.call("MigrateVm", npb.MigrateVmRequest(name="big1", dest_host="h2"))
        with pytest.raises(errors.InvalidArgument, match="bandwidth_mib_s"):
            await c.call("MigrateVm", npb.MigrateVmRequest(name="big1", dest_host="h2",
                                                          options=npb.MigrationOptions(bandwidth_mib_s=10**6)))
        recs = (await c.call("ListMigrations", npb.ListMigrationsRequest())).records
    assert any(r.vm == "big1" and r.outcome == npb.MIGRATION_OUTCOME_REFUSED for r in recs)
    assert "big1" in await vms(cell2, "h1") and "big1" not in await vms(cell2, "h2")
    await stop(cell2, "big1")


async def test_daemon_restart_rebuilds_inventory_from_libvirt(cell2, state_root):
    await start(cell2, "h1", "rs1", wss=8, cpu=0.05)
    before = host_pids(state_root, "it", "h1")["node"]
    os.kill(before["pid"], signal.SIGKILL)

    async def restarted():
        try:
            now = host_pids(state_root, "it", "h1")["node"]
            if now["pid"] == before["pid"]:
                return None
            return await vms(cell2, "h1")
        except (errors.CellbedError, KeyError, ValueError):
            return None
    found = await wait_until(restarted, 60, "node daemon restarted by its supervisor")
    assert "rs1" in found and found["rs1"].spec.workload.wss_mib == 8
    await heartbeat_advances(cell2, "h1", "rs1", 0)
    await stop(cell2, "rs1")


async def test_node_state_reaches_mqtt(cell2):
    import json
    import aiomqtt
    host, port = cell2["mqtt"].split(":")
    async with aiomqtt.Client(host, int(port), timeout=10, tls_params=mqtt_tls(cell_pki.admin(cell2))) as client:
        await client.subscribe("cellbed/it/node/+/state")
        msg = await asyncio.wait_for(anext(aiter(client.messages)), 30)
    state = json.loads(msg.payload)
    assert state["host"] in ("h1", "h2") and state["capacity"]["memMib"] in (1024, 448)


def test_cellctl_bench_writes_csv_and_cli_shows_state(cell2, state_root, tmp_path):
    import csv
    import json
    import subprocess
    import sys
    cellctl = [sys.executable, "-m", "cellbed.cli.main", "--state-root", state_root, "--cell", "it"]
    out = tmp_path / "bench.csv"
    r = subprocess.run(cellctl + ["bench", "migration", "--mem-mib", "128", "--dirty-mib-s", "0,8", "--csv", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out)))
    assert [(row["mem_mib"], row["dirty_mib_s"]) for row in rows] == [("128", "0.0"), ("128", "8.0")]
    assert all(row["outcome"] == "succeeded" and float(row["downtime_ms"]) > 0
               and int(row["memory_processed_bytes"]) > 0 for row in rows), rows
    assert "DOWNTIME_MS" in r.stdout and "SENT_MIB" in r.stdout
    r = subprocess.run(cellctl + ["--json", "nodes"], capture_output=True, text=True, timeout=60, check=True)
    nodes = {n["host"]: n for n in json.loads(r.stdout)}
    assert nodes["h2"]["capacity"]["mem_mib"] == 448 and nodes["h1"]["accel"] == "tcg"
    r = subprocess.run(cellctl + ["vm", "stop", "nope"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "NOT_FOUND" in r.stderr


async def test_set_workload_changes_the_running_guest_and_cgroup_caps_the_host(cell2):
    await start(cell2, "h1", "wl1", cpu=0.05, wss=8, dirty=0)
    async with cell_pki.node_client(cell2, "h1") as c:
        vm = (await c.call("SetWorkload", npb.SetWorkloadRequest(
            name="wl1", workload=npb.Workload(cpu_load=0.4, wss_mib=24, dirty_mib_s=8)))).vm
        assert vm.spec.workload.cpu_load == pytest.approx(0.4) and vm.spec.workload.wss_mib == 24
        with pytest.raises(errors.InvalidArgument, match=r"cpu_load=1.5 .*0\.0\.\.1\.0"):
            await c.call("SetWorkload", npb.SetWorkloadRequest(name="wl1", workload=npb.Workload(cpu_load=1.5)))
        with pytest.raises(errors.NotFound):
            await c.call("SetWorkload", npb.SetWorkloadRequest(name="nope", workload=npb.Workload(cpu_load=0.1)))

    async def guest_follows():
        v = (await vms(cell2, "h1"))["wl1"]
        # The guest measures its own CPU over ~1 s; 0.4 ± 0.15 allows for TCG scheduling noise.
        return v if abs(v.guest_cpu_actual - 0.4) < 0.15 and v.guest_dirty_mib_s > 4 else None
    v = await wait_until(guest_follows, 30, "guest CPU near 0.4 and dirtying")
    assert v.cpu_used_cores > 0.2   # host-side cpu-time deltas see the load too
    cg = HostCgroup("cellbed/it/h1")
    if cg.version == 1:
        assert open(os.path.join(cg.paths["cpu"], "cpu.cfs_quota_us")).read().strip() == "100000"  # 1.0 core
    else:
        assert open(os.path.join(cg.paths["unified"], "cpu.max")).read().split()[0] == "100000"
