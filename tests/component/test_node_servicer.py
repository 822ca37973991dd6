"""NodeAgent over real in-process gRPC (port 0) with a fake hypervisor: the servicer maps
project errors to status codes and NodeClient maps them back (DESIGN §6, §13)."""

from __future__ import annotations

import dataclasses
import json

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from cellbed.domain import errors
from cellbed.runtime import rpc
from cellbed.runtime.client import NodeClient
from cellbed import assembly
from cellbed.daemon.agent import NodeAgent
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.peers import PeerDirectory
from cellbed.daemon.config import NodeConfig
from cellbed.domain.vm import DomainSample, DomState, MigrationOptions, MigrationStats, VmSpec
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg

SERVICE = "cellbed.v1.NodeAgent"

# The host under test: 2.0 cores and 1024 MiB for guests.
CAP_CPU, CAP_MEM = 2.0, 1024


class FakeHypervisor:
    """Implements cellbed.domain.vm.Hypervisor in memory; records every call."""

    accel = "tcg"

    def __init__(self, channel_dir, domains=()) -> None:
        self.channel_dir = channel_dir
        self.domains: dict[str, DomainSample] = {d.name: d for d in domains}
        self.calls: list[tuple[str, str]] = []
        self.opened = self.closed = False

    async def open(self) -> None:
        self.opened = True

    async def close(self) -> None:
        self.closed = True

    async def list(self) -> list[DomainSample]:
        return [dataclasses.replace(d) for d in self.domains.values()]

    async def start(self, spec: VmSpec) -> None:
        self.calls.append(("start", spec.name))
        self.domains[spec.name] = DomainSample(spec.name, DomState.RUNNING, "booted", spec)

    async def stop(self, name: str) -> None:
        self.calls.append(("stop", name))
        if self.domains.pop(name, None) is None:
            raise errors.NotFound(f"domain {name} not found")

    async def domain_state(self, name: str) -> tuple[DomState, str]:
        d = self.domains.get(name)
        if d is None:
            raise errors.NotFound(f"domain {name} not found")
        return d.state, d.reason

    async def update_spec(self, spec: VmSpec) -> None:
        self.calls.append(("update_spec", spec.name))

    async def migrate(self, name, dest_uri, opts: MigrationOptions, on_progress=None) -> MigrationStats:
        self.calls.append(("migrate", name))
        raise errors.HypervisorError("fake hypervisor does not migrate")

    async def abort_migration(self, name: str) -> None:
        self.calls.append(("abort_migration", name))

    def channel_path(self, name: str) -> str:
        return str(self.channel_dir / f"{name}.ctl")  # no guest listens: channel calls fail at once

    def versions(self) -> tuple[str, str]:
        return ("8.2.2-fake", "10.0.0-fake")


@dataclasses.dataclass
class Node:
    agent: NodeAgent
    hv: FakeHypervisor
    client: NodeClient
    health: object
    port: int
    channel: grpc.aio.Channel


@pytest.fixture
async def make_node(tmp_path):
    """Factory: start one node daemon in-process; everything it made is stopped in teardown."""
    made = []

    async def make(domains=(), hv_class=None, **settings) -> Node:
        d = tmp_path / f"node{len(made)}"
        (d / "channels").mkdir(parents=True)
        hv = (hv_class or FakeHypervisor)(d / "channels", domains)
        peers = d / "peers.json"
        cfg = NodeConfig(host="h1", address="127.0.0.1", grpc_port=0, cpu_cores=CAP_CPU, mem_mib=CAP_MEM,
                         cpu_norm=0.5, mem_norm=1.0, state_dir=str(d / "state"), peers_file=str(peers),
                         boot_timeout_s=1.0, **settings).validate()
        clock = RealClock()
        transport = GrpcTransport(lambda name: PeerDirectory(str(peers)).get(name).target, clock, name="h1")
        agent, servicer = assembly.build_node(assembly.real_env(clock, lambda name: transport), cfg, backend=hv)
        server, port, health = rpc.create_server(
            "127.0.0.1:0", [(npbg.add_NodeAgentServicer_to_server, servicer, SERVICE)])
        peers.write_text(json.dumps({"hosts": {"h1": {"address": "127.0.0.1", "grpc_port": port},
                                               "h2": {"address": "127.0.0.1", "grpc_port": port}}}))
        await server.start()
        await agent.start()
        client = NodeClient(f"127.0.0.1:{port}", "h1")
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        made.append((server, agent, client, channel))
        return Node(agent, hv, client, health, port, channel)

    yield make
    for server, agent, client, channel in reversed(made):
        await client.close()
        await channel.close()
        await server.stop(None)
        await agent.stop()


@pytest.fixture
async def node(make_node) -> Node:
    return await make_node()


def vm_pb(name: str, mem_mib: int = 128, vcpus: int = 1, cpu_load: float = 0.1) -> npb.VmSpec:
    return npb.VmSpec(name=name, mem_mib=mem_mib, vcpus=vcpus, workload=npb.Workload(cpu_load=cpu_load))


async def host_state(n: Node) -> npb.HostState:
    return (await n.client.call("GetHostState", npb.GetHostStateRequest())).state


async def raises(n: Node, cls: type, method: str, request) -> str:
    """Call *method*; assert it fails as exactly *cls* (and the wire code that maps to it)."""
    with pytest.raises(errors.CellbedError) as ei:
        await n.client.call(method, request)
    assert type(ei.value) is cls, f"{type(ei.value).__name__}: {ei.value}"
    assert ei.value.__cause__.code() == cls.code
    return str(ei.value)


# --- status codes ------------------------------------------------------------------------

async def test_start_vm_out_of_range_memory(node):
    msg = await raises(node, errors.InvalidArgument, "StartVm", npb.StartVmRequest(spec=vm_pb("vm1", mem_mib=10)))
    assert "mem_mib=10" in msg and "64..8192" in msg
    assert node.hv.calls == []  # refused before the hypervisor was touched


async def test_start_vm_without_spec(node):
    msg = await raises(node, errors.InvalidArgument, "StartVm", npb.StartVmRequest())
    assert "spec is required" in msg


async def test_stop_unknown_vm(node):
    msg = await raises(node, errors.NotFound, "StopVm", npb.StopVmRequest(name="ghost"))
    assert "ghost" in msg
    assert node.hv.calls == []


async def test_migrate_unknown_vm(node):
    msg = await raises(node, errors.NotFound, "MigrateVm", npb.MigrateVmRequest(name="ghost", dest_host="h2"))
    assert "ghost" in msg
    assert node.hv.calls == []


async def test_inject_fault_unspecified_kind(node):
    msg = await raises(node, errors.InvalidArgument, "InjectFault", npb.InjectFaultRequest(name="vm1", kind=0))
    assert "kind=0" in msg and "FAULT_KIND_CORRUPT" in msg


async def test_inject_fault_unknown_vm(node):
    await raises(node, errors.NotFound, "InjectFault",
                 npb.InjectFaultRequest(name="ghost", kind=npb.FAULT_KIND_PANIC))


async def test_get_host_state_reports_configured_capacity(node):
    st = await host_state(node)
    assert (st.host, st.address, st.accel) == ("h1", "127.0.0.1", "tcg")
    assert st.capacity.cpu_cores == CAP_CPU
    assert st.capacity.mem_mib == CAP_MEM
    assert (st.capacity.cpu_norm, st.capacity.mem_norm) == (0.5, 1.0)
    assert (st.qemu_version, st.libvirt_version) == ("8.2.2-fake", "10.0.0-fake")
    assert (st.vm_count, st.mem_alloc_mib, st.cpu_req_cores) == (0, 0, 0.0)


# --- a VM found in the hypervisor at start-up (restart safety) -----------------------------

ADOPTED = VmSpec(name="vm-a", mem_mib=256, vcpus=2, cpu_load=0.25)   # requests 2 × 0.25 = 0.5 cores


@pytest.fixture
async def node_with_vm(make_node) -> Node:
    return await make_node([DomainSample("vm-a", DomState.RUNNING, "booted", ADOPTED),
                            DomainSample("not-ours", DomState.RUNNING, "booted", None)])


async def test_running_domain_is_adopted_at_start(node_with_vm):
    vms = (await node_with_vm.client.call("ListVms", npb.ListVmsRequest())).vms
    assert [(v.spec.name, v.spec.mem_mib, v.state, v.host) for v in vms] == [
        ("vm-a", 256, npb.VM_STATE_RUNNING, "h1")]   # the domain without Cellbed metadata is ignored
    st = await host_state(node_with_vm)
    assert (st.vm_count, st.mem_alloc_mib, st.cpu_req_cores) == (1, 256, pytest.approx(0.5))


async def test_start_vm_with_taken_name(node_with_vm):
    await raises(node_with_vm, errors.AlreadyExists, "StartVm", npb.StartVmRequest(spec=vm_pb("vm-a")))
    assert node_with_vm.hv.calls == []


@pytest.mark.parametrize(("dest", "cls", "words"), [
    ("h1", errors.FailedPrecondition, "already runs on h1"),
    ("h9", errors.NotFound, "known hosts: h1, h2"),
])
async def test_migrate_to_bad_destination(node_with_vm, dest, cls, words):
    msg = await raises(node_with_vm, cls, "MigrateVm", npb.MigrateVmRequest(name="vm-a", dest_host=dest))
    assert words in msg
    assert node_with_vm.hv.calls == []


async def test_stop_vm(node_with_vm):
    await node_with_vm.client.call("StopVm", npb.StopVmRequest(name="vm-a"))
    assert node_with_vm.hv.calls == [("stop", "vm-a")]
    assert list((await node_with_vm.client.call("ListVms", npb.ListVmsRequest())).vms) == []
    await raises(node_with_vm, errors.NotFound, "StopVm", npb.StopVmRequest(name="vm-a"))



async def test_a_sample_listing_before_a_stop_does_not_adopt_the_stopped_vm_back(node_with_vm):
    """A sample lists the domains, the VM is stopped while the sample is still working, and the
    sample then meets the stopped VM in its (stale) list. Adopting it would bring back a VM that no
    longer runs: for a few seconds the host counts it, above its capacity if its room was already
    given to another VM (seen in a Megha real cell: 640 MiB listed on a 512-MiB host)."""
    import asyncio
    n = node_with_vm
    listed, go_on = asyncio.Event(), asyncio.Event()
    plain_list = n.hv.list

    async def slow_list():
        doms = await plain_list()            # the snapshot holds vm-a
        listed.set()
        await go_on.wait()
        return doms
    n.hv.list = slow_list
    sample = asyncio.create_task(n.agent.sample())
    await listed.wait()
    await n.client.call("StopVm", npb.StopVmRequest(name="vm-a"))     # gone from libvirt and the node
    assert "vm-a" not in n.hv.domains
    go_on.set()
    await sample
    assert "vm-a" not in n.agent.vms
    st = await host_state(n)
    assert (st.vm_count, st.mem_alloc_mib) == (0, 0)
    n.hv.list = plain_list
    await n.agent.sample()                  # the next sample forgets the departure
    assert "vm-a" not in n.agent.vms and n.agent.departed == {}


# --- a failed start is undone, and never adopted back ----------------------------------------
# StartVm fails here because no guest answers within boot_timeout_s (1 s); the node then removes
# the domain. A broker or LM places the VM elsewhere, so a sample that adopted the domain back
# while it was being removed (or after a failed removal) would leave the VM running twice.

async def test_a_sample_during_the_undo_of_a_failed_start_does_not_adopt_it(node):
    import asyncio
    stopping, release = asyncio.Event(), asyncio.Event()
    plain_stop = node.hv.stop

    async def slow_stop(name):
        stopping.set()
        await release.wait()
        await plain_stop(name)
    node.hv.stop = slow_stop
    start = asyncio.create_task(node.agent.start_vm(VmSpec(name="vm-x", mem_mib=128, vcpus=1, cpu_load=0.1)))
    await stopping.wait()                       # the domain exists and its removal is under way
    assert "vm-x" in node.hv.domains
    await node.agent.sample()
    assert "vm-x" not in node.agent.vms
    await raises(node, errors.Unavailable, "StartVm", npb.StartVmRequest(spec=vm_pb("vm-x")))
    release.set()
    with pytest.raises(errors.DeadlineExceeded):
        await start
    assert "vm-x" not in node.hv.domains and node.agent.discarding == set()
    await node.agent.sample()
    assert "vm-x" not in node.agent.vms


async def test_a_failed_undo_is_retried_at_the_next_sample_and_never_adopted(node):
    plain_stop, fails = node.hv.stop, [1]

    async def flaky_stop(name):
        if fails:
            fails.pop()
            raise errors.HypervisorError(f"virDomainDestroy {name}: transient failure")
        await plain_stop(name)
    node.hv.stop = flaky_stop
    with pytest.raises(errors.DeadlineExceeded):
        await node.agent.start_vm(VmSpec(name="vm-y", mem_mib=128, vcpus=1, cpu_load=0.1))
    assert "vm-y" in node.hv.domains and node.agent.discarding == {"vm-y"}   # still there, marked
    await node.agent.sample()
    assert "vm-y" not in node.agent.vms and "vm-y" not in node.hv.domains
    assert node.agent.discarding == set()
    st = await host_state(node)
    assert (st.vm_count, st.mem_alloc_mib) == (0, 0)

# --- health and reflection ---------------------------------------------------------------

async def test_health_serving_after_set_serving(node):
    stub = health_pb2_grpc.HealthStub(node.channel)
    req = health_pb2.HealthCheckRequest(service=SERVICE)
    with pytest.raises(grpc.aio.AioRpcError) as ei:   # no status set yet
        await stub.Check(req, timeout=5)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND
    await rpc.set_serving(node.health, [SERVICE])
    for name in (SERVICE, ""):
        r = await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
        assert r.status == health_pb2.HealthCheckResponse.SERVING
    await rpc.set_not_serving(node.health, [SERVICE])
    assert (await stub.Check(req, timeout=5)).status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_reflection_lists_the_service(node):
    stub = reflection_pb2_grpc.ServerReflectionStub(node.channel)
    call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
    services = set()
    async for resp in call:
        services |= {s.name for s in resp.list_services_response.service}
    assert {SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= services


# --- target side of a migration: admission, reservation, release ---------------------------

def spec(mem: int, vcpus: int, cpu: float, name: str = "in") -> npb.VmSpec:
    return vm_pb(name, mem_mib=mem, vcpus=vcpus, cpu_load=cpu)


# Capacity 1024 MiB, 2.0 cores. Each row: name, reservations made first (mem, vcpus, cpu_load),
# the candidate, force, then None if admitted, else words in the FAILED_PRECONDITION message.
ADMISSION = [
    ("fits exactly", [(512, 1, 0.5)], (512, 2, 0.75), False, None),
    # 512 + 512 = 1024 ≤ 1024 MiB; 0.5 + 2 × 0.75 = 2.0 ≤ 2.0 cores
    ("memory over", [(512, 1, 0.5), (512, 1, 0.5)], (64, 1, 0.1), False, "memory 1024 + 64 MiB > capacity 1024 MiB"),
    # 1024 + 64 = 1088 > 1024 MiB
    ("cpu over", [(256, 2, 1.0)], (256, 1, 0.5), False, "requested CPU 2.00 + 0.50 cores > capacity 2.00 cores"),
    # 2 × 1.0 + 1 × 0.5 = 2.5 > 2.0 cores
    ("empty host, over total", [], (2048, 1, 0.1), False, "memory 0 + 2048 MiB > capacity 1024 MiB"),
    ("forced past memory allocation", [(512, 1, 0.5), (512, 1, 0.5)], (64, 1, 0.1), True, None),
    # forced: 64 ≤ 1024 MiB total, 0.1 ≤ 2.0 cores total; the allocation becomes 1088 MiB
    ("forced past cpu allocation", [(256, 2, 1.0)], (256, 1, 0.5), True, None),
    ("forced over total memory", [], (2048, 1, 0.1), True, "(2048 MiB, 0.10 cores) exceeds total capacity (1024 MiB"),
    ("forced over total cpu", [], (128, 4, 0.75), True, "(128 MiB, 3.00 cores) exceeds total capacity"),
    # 4 × 0.75 = 3.0 > 2.0 cores
]


@pytest.mark.parametrize(("prior", "cand", "force", "refused"), [a[1:] for a in ADMISSION],
                         ids=[a[0] for a in ADMISSION])
async def test_prepare_incoming_admission(node, prior, cand, force, refused):
    mem0 = cpu0 = 0
    for i, (m, v, c) in enumerate(prior):
        r = await node.client.call("PrepareIncoming", npb.PrepareIncomingRequest(
            spec=spec(m, v, c, name=f"prior{i}"), src_host="h2", migration_id=f"m-prior{i}"))
        mem0, cpu0 = mem0 + m, cpu0 + v * c
        assert (r.state.mem_alloc_mib, r.state.cpu_req_cores) == (mem0, pytest.approx(cpu0))
    req = npb.PrepareIncomingRequest(spec=spec(*cand), src_host="h2", migration_id="m-cand", force=force)
    if refused is None:
        r = await node.client.call("PrepareIncoming", req)
        m, v, c = cand
        assert (r.state.mem_alloc_mib, r.state.cpu_req_cores) == (mem0 + m, pytest.approx(cpu0 + v * c))
        assert r.state.migrations_in == len(prior) + 1
    else:
        msg = await raises(node, errors.FailedPrecondition, "PrepareIncoming", req)
        assert "capacity" in msg and refused in msg, msg
        st = await host_state(node)   # nothing reserved for the refused VM
        assert (st.mem_alloc_mib, st.cpu_req_cores, st.migrations_in) == (mem0, pytest.approx(cpu0), len(prior))


async def test_prepare_incoming_counts_running_vms(node_with_vm):
    # vm-a holds 256 MiB: 256 + 800 = 1056 > 1024 MiB, while 800 alone would fit
    msg = await raises(node_with_vm, errors.FailedPrecondition, "PrepareIncoming",
                       npb.PrepareIncomingRequest(spec=spec(800, 1, 0.1), src_host="h2", migration_id="m1"))
    assert "memory 256 + 800 MiB > capacity 1024 MiB" in msg


async def test_prepare_incoming_for_vm_already_here(node_with_vm):
    msg = await raises(node_with_vm, errors.FailedPrecondition, "PrepareIncoming",
                       npb.PrepareIncomingRequest(spec=spec(128, 1, 0.1, name="vm-a"), src_host="h2",
                                                 migration_id="m1", force=True))
    assert "already runs on h1" in msg


@pytest.mark.parametrize(("req", "words"), [
    (npb.PrepareIncomingRequest(spec=spec(128, 1, 0.1), src_host="h2"), "migration_id must be set"),
    (npb.PrepareIncomingRequest(spec=spec(128, 9, 0.1), src_host="h2", migration_id="m1"), "vcpus=9"),
], ids=["no migration id", "invalid spec"])
async def test_prepare_incoming_invalid(node, req, words):
    assert words in await raises(node, errors.InvalidArgument, "PrepareIncoming", req)


async def test_finish_incoming_unknown_migration(node):
    msg = await raises(node, errors.NotFound, "FinishIncoming",
                       npb.FinishIncomingRequest(migration_id="nope", name="in", migrated=True))
    assert "'nope'" in msg


async def test_finish_incoming_wrong_vm_name(node):
    await node.client.call("PrepareIncoming", npb.PrepareIncomingRequest(
        spec=spec(512, 1, 0.5), src_host="h2", migration_id="m1"))
    await raises(node, errors.NotFound, "FinishIncoming",
                 npb.FinishIncomingRequest(migration_id="m1", name="other", migrated=False))
    assert (await host_state(node)).mem_alloc_mib == 512  # the reservation is untouched


async def test_finish_incoming_not_migrated_releases_reservation(node):
    r = await node.client.call("PrepareIncoming", npb.PrepareIncomingRequest(
        spec=spec(512, 2, 0.5), src_host="h2", migration_id="m1"))
    assert (r.state.mem_alloc_mib, r.state.cpu_req_cores, r.state.migrations_in) == (512, 1.0, 1)  # 2 × 0.5
    fin = await node.client.call("FinishIncoming", npb.FinishIncomingRequest(
        migration_id="m1", name="in", migrated=False))
    assert not fin.verified and "released" in fin.detail
    st = await host_state(node)
    assert (st.mem_alloc_mib, st.cpu_req_cores, st.migrations_in, st.vm_count) == (0, 0.0, 0, 0)
    # FinishIncoming is idempotent (issue 12): asked again, it gives the first answer and changes nothing
    again = await node.client.call("FinishIncoming", npb.FinishIncomingRequest(
        migration_id="m1", name="in", migrated=False))
    assert (again.verified, again.detail) == (fin.verified, fin.detail)
    assert (await host_state(node)).migrations_in == 0
    await raises(node, errors.NotFound, "FinishIncoming",          # an id never reserved is still unknown
                 npb.FinishIncomingRequest(migration_id="m9", name="in", migrated=False))
    # and the capacity is usable again: 1024 MiB fits on the empty host
    await node.client.call("PrepareIncoming", npb.PrepareIncomingRequest(
        spec=spec(1024, 1, 0.5), src_host="h2", migration_id="m2"))


async def test_finish_incoming_without_domain_does_not_adopt_a_phantom(node):
    await node.client.call("PrepareIncoming", npb.PrepareIncomingRequest(
        spec=spec(512, 1, 0.5), src_host="h2", migration_id="m1"))
    # libvirt said "migrated" but no domain arrived here (the fake hypervisor has none)
    fin = await node.client.call("FinishIncoming", npb.FinishIncomingRequest(
        migration_id="m1", name="in", migrated=True))
    assert not fin.verified and "not on h1" in fin.detail
    assert [v.spec.name for v in (await node.client.call("ListVms", npb.ListVmsRequest())).vms] == []
    assert (await host_state(node)).mem_alloc_mib == 0


async def test_an_arriving_vm_is_held_by_its_lease_or_listed_at_every_step_of_its_adoption(make_node):
    """FinishIncoming turns the lease into a VM. Between the two, while the destination asks
    libvirt for the domain's state, the VM must still be held somewhere: the source has let it
    go, so a VM in neither would be counted by no host and listed by none."""
    node = await make_node(verify_timeout_s=1.0)    # no guest answers on the fake's channel
    await node.client.call("PrepareIncoming", npb.PrepareIncomingRequest(
        spec=spec(256, 1, 0.5), src_host="h2", migration_id="m1"))
    node.hv.domains["in"] = DomainSample("in", DomState.RUNNING, "migrated", VmSpec(name="in", mem_mib=256))
    held, listed = [], []
    plain_state = node.hv.domain_state

    async def state_while_watched(name):
        held.append((name in node.agent.vms, any(r.spec.name == name for r in node.agent.incoming.values())))
        if not listed:      # once, while it is being verified: listed as arriving, and not yet to be stopped
            listed.extend((v.spec.name, v.state, v.state_reason, v.spec.mem_mib) for v in
                          (await node.client.call("ListVms", npb.ListVmsRequest())).vms)
            listed.append(await raises(node, errors.FailedPrecondition, "StopVm", npb.StopVmRequest(name="in")))
        return await plain_state(name)
    node.hv.domain_state = state_while_watched
    fin = await node.client.call("FinishIncoming", npb.FinishIncomingRequest(
        migration_id="m1", name="in", migrated=True))
    assert not fin.verified and "did not answer" in fin.detail    # the domain is adopted anyway
    assert len(held) >= 2 and all(in_vms or leased for in_vms, leased in held), held
    assert listed[0] == ("in", npb.VM_STATE_MIGRATING_IN, "verifying migration m1", 256), listed
    assert "'in' is arriving on host h1 (migration m1 is being verified)" in listed[1]
    assert [v.spec.name for v in (await node.client.call("ListVms", npb.ListVmsRequest())).vms] == ["in"]
    st = await host_state(node)
    assert (st.vm_count, st.migrations_in, st.mem_alloc_mib) == (1, 0, 256)


MIGRATE_INVALID = [
    # options field, value, words; validated before the VM is even looked up
    ("bandwidth_mib_s", 100_001, "bandwidth_mib_s=100001"),
    ("max_downtime_ms", 60_001, "max_downtime_ms=60001"),
    ("parallel_connections", 17, "parallel_connections=17"),
    ("completion_timeout_s", 3600.5, "completion_timeout_s=3600.5"),
    ("timeout_policy", 99, "timeout_policy=99"),   # proto3 enums are open: unknown values arrive
]


@pytest.mark.parametrize(("field", "value", "words"), MIGRATE_INVALID, ids=[m[0] for m in MIGRATE_INVALID])
async def test_migrate_invalid_options(node, field, value, words):
    req = npb.MigrateVmRequest(name="ghost", dest_host="h2", options=npb.MigrationOptions(**{field: value}))
    assert words in await raises(node, errors.InvalidArgument, "MigrateVm", req)
