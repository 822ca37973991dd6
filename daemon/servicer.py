"""Thin gRPC servicer for NodeAgent: translate messages, delegate to the agent."""
from __future__ import annotations

import math

from cellbed.daemon.agent import NodeAgent
from cellbed.daemon.inventory import Reservation, VmEntry
from cellbed.domain.wire import spec_from_pb, spec_pb
from cellbed.domain.vm import DomState, MigrationOptions, TimeoutPolicy
from cellbed.domain.errors import InvalidArgument
from cellbed.domain import wire_checks as check
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg

_STATE = {DomState.RUNNING: npb.VM_STATE_RUNNING, DomState.PAUSED: npb.VM_STATE_PAUSED,
          DomState.SHUTOFF: npb.VM_STATE_SHUTOFF, DomState.CRASHED: npb.VM_STATE_CRASHED}
_POLICY = {npb.TIMEOUT_POLICY_UNSPECIFIED: None, npb.TIMEOUT_POLICY_ABORT: TimeoutPolicy.ABORT,
           npb.TIMEOUT_POLICY_AUTO_CONVERGE: TimeoutPolicy.AUTO_CONVERGE,
           npb.TIMEOUT_POLICY_POSTCOPY: TimeoutPolicy.POSTCOPY}


def vm_info(agent: NodeAgent, e: VmEntry) -> npb.VmInfo:
    state = npb.VM_STATE_MIGRATING_OUT if e.migrating_out else _STATE.get(e.state, npb.VM_STATE_UNSPECIFIED)
    g = e.guest
    return npb.VmInfo(spec=spec_pb(e.spec), state=state, state_reason=e.reason, host=agent.cfg.host,
                     cpu_used_cores=e.cpu_used_cores, rss_mib=e.rss_mib, dirty_rate_mib_s=e.dirty_rate_mib_s,
                     heartbeat=g.heartbeat if g else 0, boot_id=g.boot_id if g else "",
                     guest_cpu_actual=g.cpu_actual if g else 0.0,
                     guest_dirty_mib_s=g.dirty_actual_mib_s if g else 0.0,
                     created_unix_s=e.spec.created_unix_s, boot_to_workload_s=e.boot_to_workload_s)


def arriving_info(agent: NodeAgent, mid: str, r: Reservation) -> npb.VmInfo:
    """A VM being verified here after its source let it go: what its lease knows of it."""
    return npb.VmInfo(spec=spec_pb(r.spec), state=npb.VM_STATE_MIGRATING_IN, state_reason=f"verifying migration {mid}",
                      host=agent.cfg.host, cpu_used_cores=r.cpu_used, rss_mib=r.mem_used, dirty_rate_mib_s=-1,
                      created_unix_s=r.spec.created_unix_s)


def options_from_pb(o: npb.MigrationOptions, default_timeout_s: float) -> MigrationOptions:
    if o.timeout_policy not in _POLICY:
        raise InvalidArgument(f"options.timeout_policy={o.timeout_policy}: allowed {sorted(_POLICY)}")
    return MigrationOptions(
        bandwidth_mib_s=o.bandwidth_mib_s, max_downtime_ms=o.max_downtime_ms, auto_converge=o.auto_converge,
        postcopy=o.postcopy, compression=o.compression, parallel_connections=o.parallel_connections,
        completion_timeout_s=o.completion_timeout_s or default_timeout_s,
        timeout_policy=_POLICY[o.timeout_policy] or TimeoutPolicy.ABORT,
        tls=o.tls if o.HasField("tls") else None)


class NodeAgentServicer(npbg.NodeAgentServicer):
    def __init__(self, agent: NodeAgent) -> None:
        self.agent = agent

    @handles_errors
    async def StartVm(self, request, context):
        check.start_vm(request)
        return npb.StartVmResponse(vm=vm_info(self.agent, await self.agent.start_vm(spec_from_pb(request.spec))))

    @handles_errors
    async def StopVm(self, request, context):
        check.name("name", request.name)
        await self.agent.stop_vm(request.name)
        return npb.StopVmResponse()

    @handles_errors
    async def ListVms(self, request, context):
        return npb.ListVmsResponse(vms=[vm_info(self.agent, e) for e in self.agent.vms.values()]
                                   + [arriving_info(self.agent, mid, r) for mid, r in self.agent.arriving().values()])

    @handles_errors
    async def GetHostState(self, request, context):
        self.agent.sample_host(self.agent.clock.monotonic())
        return npb.GetHostStateResponse(state=self.agent.host_sample)

    @handles_errors
    async def SetWorkload(self, request, context):
        check.set_workload(request)
        w = request.workload
        fields = set(f.name for f, _ in w.ListFields())
        dirty = math.inf if w.dirty_max else (w.dirty_mib_s if "dirty_mib_s" in fields else None)
        e = await self.agent.set_workload(
            request.name, w.cpu_load if "cpu_load" in fields else None,
            w.wss_mib if "wss_mib" in fields else None, dirty)
        return npb.SetWorkloadResponse(vm=vm_info(self.agent, e))

    @handles_errors
    async def MigrateVm(self, request, context):
        check.migrate_vm(request)
        opts = options_from_pb(request.options, self.agent.cfg.migration_timeout_s).validate()
        rec = await self.agent.migrate(request.name, request.dest_host, opts)
        return npb.MigrateVmResponse(record=rec)

    @handles_errors
    async def AbortMigration(self, request, context):
        check.name("name", request.name)
        await self.agent.abort_migration(request.name)
        return npb.AbortMigrationResponse()

    @handles_errors
    async def PrepareIncoming(self, request, context):
        check.prepare_incoming(request)
        await self.agent.reserve(spec_from_pb(request.spec), request.src_host, request.migration_id,
                                 request.force, request.cpu_used_cores, request.mem_used_mib)
        self.agent.sample_host(self.agent.clock.monotonic())
        return npb.PrepareIncomingResponse(state=self.agent.host_sample)

    @handles_errors
    async def FinishIncoming(self, request, context):
        check.finish_incoming(request)
        v = await self.agent.finish_incoming(request.migration_id, request.name, request.migrated,
                                             request.heartbeat_before, request.boot_id)
        return npb.FinishIncomingResponse(verified=v.verified, detail=v.detail, heartbeat_after=v.heartbeat_after,
                                         integrity_pages=v.integrity_pages, integrity_bad=v.integrity_bad)

    @handles_errors
    async def ListMigrations(self, request, context):
        recs = self.agent.records[-request.limit:] if request.limit else self.agent.records
        return npb.ListMigrationsResponse(records=recs)

    @handles_errors
    async def InjectFault(self, request, context):
        kinds = {npb.FAULT_KIND_CORRUPT: "corrupt", npb.FAULT_KIND_PANIC: "panic"}
        if request.kind not in kinds:
            raise InvalidArgument(f"kind={request.kind}: allowed FAULT_KIND_CORRUPT (1), FAULT_KIND_PANIC (2)")
        check.name("name", request.name)
        return npb.InjectFaultResponse(detail=await self.agent.inject_fault(request.name, kinds[request.kind]))

    async def WatchEvents(self, request, context):
        async for ev in self.agent.watch(request.replay):
            yield ev
