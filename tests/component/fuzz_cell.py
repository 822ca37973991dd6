"""The cell the RPC fuzz (tests/component/test_rpc_fuzz.py) hammers: every agent built through
cellbed.assembly on the model backend and the wall clock, every servicer behind a real
grpc.aio server on port 0, a known-good request per RPC (the base the fuzz mutates), one
known-good call per service (it must succeed after every bad call), and a fingerprint of each
agent's state (a refused request must leave it unchanged).

The agents talk to each other over the in-process network of ``assembly.model_env`` (the
servicers they call are the same objects the gRPC servers serve); the fuzz reaches them over
gRPC. Background work is slowed down (monitor periods, replication, sync) so that what the
fingerprints cover changes only when a request changes it.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
from typing import Awaitable, Callable

import grpc
from google.protobuf.descriptor import FieldDescriptor as F
from google.protobuf.message_factory import GetMessageClass

from cellbed import assembly
from cellbed.controller.megha.params import GmParams, LmParams
from cellbed.controller.megha.queues import MemoryQueueStore
from cellbed.daemon.san import SanConfig
from cellbed.domain.vm import VmSpec
from cellbed.domain.wire import resources as res
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.policy.megha.fairness import QueueConfig
from cellbed.runtime import rpc
from cellbed.runtime.clock import RealClock
from cellbed.v1 import (common_pb2 as cpb, masb_pb2 as masbpb, masb_pb2_grpc as masbpbg, megha_pb2 as meghapb,
                        megha_pb2_grpc as meghapbg, node_pb2 as npb, node_pb2_grpc as npbg)
from tests.component.fuzz_pb import NOW

SKEW_S = 30.0          # the agents' default max_clock_skew_s
POOL = ("", "h1", "h2", "vm1", "in1", "m5", "m6", "alice", "bob", "gm1", "gx1", "gx2", "lm2", "lm2a", "lm2b", "ba1",
        "ba2", "n1", "s1", "sched9", "attr00", "t9", "p1", "lt1", "1", "m-1", "s-1")
"""Strings the fuzz draws besides random ones: the names this cell knows, so that mutated
requests get past the lookups."""

SERVICES = [(npb, "NodeAgent"), (masbpb, "San"), (masbpb, "BrokerAgent"), (meghapb, "GlobalMaster"),
            (meghapb, "LocalMaster"), (meghapb, "SamplingWorker"), (meghapb, "SamplingScheduler")]
"""Every service of the proto package (test_every_service_is_fuzzed checks the list is whole)."""

TARGET = {"NodeAgent": "h1", "San": "h1", "BrokerAgent": "ba1", "GlobalMaster": "gm1", "LocalMaster": "lm2a",
          "SamplingWorker": "s1", "SamplingScheduler": "sched1"}
"""Which agent serves each service in the fuzz; LocalMaster/Replicate goes to the standby lm2b.

The GMs place on lm1 (lm1a, standby lm1b); the LocalMaster fuzz hits lm2, an LM no GM knows
(partitions for gx1, gx2; its events go nowhere), so that no GM changes it in the background.
Likewise the worker s1 claims from sched9, which does not exist, not from the fuzzed sched1."""

TASK = masbpb.TaskInfo(name="t9", used=res(0.1, 64), requested=res(0.2, 128), mem_mib=128, dirty_mib_s=1.0,
                       wss_mib=32, cpu_mean=0.1, cpu_var=0.01, cpu_samples=5, priority=1)
REPORT = masbpb.NodeReport(host="n5", capacity=res(4.0, 8192), used=res(1.0, 1024), requested=res(1.0, 1024),
                           prod_requested=res(0.0, 0.0), task_count=1, asr_class=cpb.ASR_CLASS_IDLE,
                           attributes=[cpb.Attribute(name="attr00", value="1", integer=True)], sampled_unix_s=NOW)
MTASK = meghapb.MeghaTask(name="lt1", user="alice", request=res(0.25, 128), duration_s=0.5, priority=1,
                          workload=npb.Workload(cpu_load=0.1), constraints=[cpb.Constraint(
                              attribute="attr00", op=cpb.CONSTRAINT_OP_NOT_EQUAL, value="7", integer=True)])


def vm(name: str, mem: int = 128) -> npb.VmSpec:
    return npb.VmSpec(name=name, mem_mib=mem, vcpus=1, workload=npb.Workload(cpu_load=0.1, wss_mib=16))


TEMPLATES = {
    ("NodeAgent", "StartVm"): npb.StartVmRequest(spec=vm("fz")),
    ("NodeAgent", "StopVm"): npb.StopVmRequest(name="vm1"),
    ("NodeAgent", "ListVms"): npb.ListVmsRequest(),
    ("NodeAgent", "GetHostState"): npb.GetHostStateRequest(),
    ("NodeAgent", "SetWorkload"): npb.SetWorkloadRequest(name="vm1", workload=npb.Workload(cpu_load=0.2, wss_mib=32,
                                                                                            dirty_mib_s=4.0)),
    ("NodeAgent", "MigrateVm"): npb.MigrateVmRequest(name="vm1", dest_host="h2", options=npb.MigrationOptions(
        bandwidth_mib_s=1000, max_downtime_ms=300, completion_timeout_s=60, timeout_policy=npb.TIMEOUT_POLICY_ABORT)),
    ("NodeAgent", "AbortMigration"): npb.AbortMigrationRequest(name="vm1"),
    ("NodeAgent", "PrepareIncoming"): npb.PrepareIncomingRequest(spec=vm("in1"), src_host="h2", migration_id="m1",
                                                                 cpu_used_cores=0.1, mem_used_mib=64),
    ("NodeAgent", "FinishIncoming"): npb.FinishIncomingRequest(migration_id="m1", name="in1", migrated=False),
    ("NodeAgent", "ListMigrations"): npb.ListMigrationsRequest(limit=10),
    ("NodeAgent", "InjectFault"): npb.InjectFaultRequest(name="vm1", kind=npb.FAULT_KIND_CORRUPT),
    ("NodeAgent", "WatchEvents"): npb.WatchEventsRequest(replay=1),
    ("San", "NegotiateTask"): masbpb.NegotiateTaskRequest(name="vm1"),
    ("San", "RequestTaskMigration"): masbpb.TaskMigrationRequest(san_id="s-1", src_host="h2", task=TASK),
    ("San", "ProcessTaskMigration"): masbpb.TaskMigrationProcessRequest(san_id="s-1", src_host="h2", task=TASK,
                                                                        spec=vm("t9"), migration_id="m-1"),
    ("San", "ListNegotiations"): masbpb.ListNegotiationsRequest(limit=5),
    ("San", "Explain"): masbpb.ExplainRequest(id="h1-1"),
    ("BrokerAgent", "ReportNodeState"): masbpb.ReportNodeStateRequest(report=REPORT),
    ("BrokerAgent", "GetCandidateNodes"): masbpb.GetCandidateNodesRequest(task=TASK, src_host="h2", san_id="s-1"),
    ("BrokerAgent", "AllocateTask"): masbpb.AllocateTaskRequest(task=TASK, spec=vm("t9")),
    ("BrokerAgent", "SyncCache"): masbpb.SyncCacheRequest(broker="ba2", entries=[REPORT]),
    ("BrokerAgent", "ListCache"): masbpb.ListCacheRequest(),
    ("GlobalMaster", "Submit"): meghapb.SubmitRequest(task=meghapb.MeghaTask(
        user="alice", request=res(0.5, 256), duration_s=0.5, workload=npb.Workload(cpu_load=0.1))),
    ("GlobalMaster", "GetTask"): meghapb.GetTaskRequest(name="gm1-x"),
    ("GlobalMaster", "GetView"): meghapb.GetViewRequest(),
    ("GlobalMaster", "ListQueues"): meghapb.ListQueuesRequest(),
    ("GlobalMaster", "ReportTaskEvents"): meghapb.ReportTaskEventsRequest(lm="lm1", instance="lm1a", events=[
        meghapb.TaskEvent(name="ev1", kind=meghapb.TASK_EVENT_KIND_STARTED, detail="started", unix_s=NOW,
                          task=meghapb.MeghaTask(name="ev1", user="alice", request=res(0.25, 128), arrival_unix_s=NOW),
                          timing=meghapb.LmTiming(queue_ms=1.0, comm_in_ms=1.0, start_unix_s=NOW),
                          placement=meghapb.Placement(lm="lm1", host="m1", partition="gm1"))]),
    ("LocalMaster", "Launch"): meghapb.LaunchRequest(task=MTASK, gm="gx1", host="m5", sent_unix_s=NOW),
    ("LocalMaster", "Repartition"): meghapb.RepartitionRequest(task=MTASK, gm="gx1", host="m6", sent_unix_s=NOW),
    ("LocalMaster", "Preempt"): meghapb.PreemptRequest(task=MTASK, gm="gx1", victim_user="bob", sent_unix_s=NOW),
    ("LocalMaster", "GetState"): meghapb.GetStateRequest(),
    ("LocalMaster", "GetHosts"): meghapb.GetHostsRequest(),
    ("LocalMaster", "ListPartitions"): meghapb.ListPartitionsRequest(),
    ("LocalMaster", "FindTasks"): meghapb.FindTasksRequest(names=["lt1", "ghost"]),
    ("LocalMaster", "StopTask"): meghapb.StopTaskRequest(name="lt1"),
    ("LocalMaster", "Replicate"): meghapb.ReplicateRequest(instance="lm2a", epoch=1, removed=["ghost"], upserts=[
        meghapb.LmTaskRecord(task=MTASK, host="m5", partition="gx1", submit_gm="gx1",
                             state=meghapb.TASK_STATE_RUNNING, start_unix_s=NOW)]),
    ("LocalMaster", "GetRole"): meghapb.GetRoleRequest(),
    ("SamplingWorker", "Probe"): meghapb.ProbeRequest(scheduler="sched9", task="p1", request=res(0.5, 256),
                                                      sent_unix_s=NOW),
    ("SamplingScheduler", "ClaimTask"): meghapb.ClaimTaskRequest(worker="s1", task="p1", sent_unix_s=NOW,
                                                                 worker_queue_ms=1.0, probe_comm_ms=1.0),
    ("SamplingScheduler", "ReportStart"): meghapb.ReportStartRequest(event=meghapb.TaskEvent(
        name="p1", kind=meghapb.TASK_EVENT_KIND_STARTED, placement=meghapb.Placement(host="s1"), unix_s=NOW,
        timing=meghapb.LmTiming(worker_queue_ms=1.0, start_unix_s=NOW))),
}


FRESH = {
    ("NodeAgent", "StartVm"): [("spec", "name")],
    ("NodeAgent", "PrepareIncoming"): [("spec", "name"), ("migration_id",)],
    ("San", "ProcessTaskMigration"): [("task", "name"), ("spec", "name"), ("migration_id",)],
    ("LocalMaster", "Launch"): [("task", "name")],
    ("LocalMaster", "Repartition"): [("task", "name")],
    ("LocalMaster", "Preempt"): [("task", "name")],
    ("GlobalMaster", "ReportTaskEvents"): [("events", 0, "name"), ("events", 0, "task", "name")],
    ("SamplingScheduler", "ClaimTask"): [("task",)],
    ("SamplingScheduler", "ReportStart"): [("event", "name")],
}
SCHEDULED = 600
"""Tasks the scheduler sched1 holds unbound from the start: p1-0, p1-1, ... (ClaimTask and
ReportStart name them through FRESH)."""
"""Names and ids that a successful request takes: where a fuzzed request kept the template's,
it gets a fresh one (``-<n>`` appended), so that mutated requests keep reaching past the
ALREADY_EXISTS of the first success."""


def _at(msg, path: tuple):
    """The message holding the last field of *path* (names, and indices into repeated fields);
    None when an index is past the end."""
    for step in path[:-1]:
        if isinstance(step, int):
            if step >= len(msg):
                return None
            msg = msg[step]
        else:
            msg = getattr(msg, step)
    return msg


def freshen(service: str, method: str, cls, wire: bytes, n: int) -> bytes:
    paths = FRESH.get((service, method))
    if not paths:
        return wire
    msg, template, changed = cls.FromString(wire), TEMPLATES[(service, method)], False
    for path in paths:
        want, holder = getattr(_at(template, path), path[-1]), _at(msg, path)
        if holder is not None and getattr(holder, path[-1]) == want:
            setattr(holder, path[-1], f"{want}-{n}")
            changed = True
    return msg.SerializeToString() if changed else wire


def methods() -> list[tuple[str, str]]:
    return [(s, m.name) for mod, s in SERVICES for m in mod.DESCRIPTOR.services_by_name[s].methods]


def target(service: str, method: str) -> str:
    return "lm2b" if (service, method) == ("LocalMaster", "Replicate") else TARGET[service]


def non_finite(msg, path: str = "") -> list[str]:
    """Paths of the float fields of *msg* that are NaN or infinite."""
    out = []
    for f, v in msg.ListFields():
        p = f"{path}.{f.name}" if path else f.name
        if f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            continue
        items = v if f.is_repeated else [v]
        for i, x in enumerate(items):
            if f.type == F.TYPE_MESSAGE:
                out += non_finite(x, f"{p}[{i}]" if f.is_repeated else p)
            elif f.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT) and not math.isfinite(x):
                out.append(f"{p}={x}")
    return out


@dataclasses.dataclass
class Server:
    server: grpc.aio.Server
    channel: grpc.aio.Channel


class FuzzCell:
    """The agents, their servers and channels; ``call`` sends wire bytes to one RPC."""

    def __init__(self) -> None:
        self.servers: dict[str, Server] = {}
        self.agents: dict[str, object] = {}
        self.hosts: dict[str, assembly.ModelHost] = {}
        self.seen: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
        self.examples: collections.Counter = collections.Counter()
        self.seconds: collections.Counter = collections.Counter()

    async def start(self) -> None:
        env = assembly.model_env(7, clock=RealClock())
        self.env, self.clock = env, env.clock
        quiet = dict(monitor_period_s=3600.0)
        for name in ("h1", "h2", "m1", "m2", "m3", "m4", "m5", "m6", "s1"):
            attrs = {"attr00": 1} if name in ("m1", "m3") else {}
            cpu, mem = (1024.0, 2 ** 20) if name == "h1" else (4.0, 8192)   # h1: room for what the fuzz starts
            self.hosts[name] = await assembly.model_host(env, assembly.model_config(name, cpu, mem, attrs, **quiet))
        h1 = self.hosts["h1"].agent
        await h1.start_vm(VmSpec(name="vm1", mem_mib=256, vcpus=1, cpu_load=0.1, wss_mib=64))
        for i in range(512):                      # a full event buffer: WatchEvents always has a replay
            h1.emit(npb.EVENT_KIND_SAN_STEP, "", f"fuzz marker {i}")
        san, san_srv = assembly.build_san(env, h1, SanConfig(window_s=1.0, report_period_s=3600.0), ["ba1"], "cell")
        san.start()
        ba, ba_srv = assembly.build_broker(env, "ba1", params=BrokerParams(), peers=[], cell="cell",
                                           sync_period_s=3600.0)
        await ba.start()
        for i in range(1, 5):
            r = masbpb.NodeReport()
            r.CopyFrom(REPORT)
            r.host, r.sampled_unix_s = f"n{i}", self.clock.now()
            ba.on_report("seed", r)
        lmp = LmParams(update_period_s=1.0, replicate_period_s=60.0, takeover_after_s=3600.0)
        megha_hosts = ["m1", "m2", "m3", "m4"]
        lms = {i: assembly.build_lm(env, "lm1", i, hosts=megha_hosts, gms=["gm1", "gm2"], standby=(i == "lm1b"),
                                    peer=("lm1b" if i == "lm1a" else "lm1a"), cell="cell", params=lmp)
               for i in ("lm1b", "lm1a")}
        lms |= {i: assembly.build_lm(env, "lm2", i, hosts=["m5", "m6"], gms=["gx1", "gx2"], standby=(i == "lm2b"),
                                     peer=("lm2a" if i == "lm2b" else ""), cell="cell", params=lmp)
                for i in ("lm2b", "lm2a")}   # lm2a does not replicate: only the fuzz talks to lm2b
        for agent, _ in lms.values():
            await agent.start()
        queues = [QueueConfig("alice", 0.5, "gm1"), QueueConfig("bob", 0.5, "gm2")]
        gms = {g: assembly.build_gm(env, g, lms={"lm1": ["lm1a", "lm1b"]}, queues=queues, store=MemoryQueueStore(),
                                    cell="cell", params=GmParams(), known_attributes=("attr00", "attr01"))
               for g in ("gm1", "gm2")}
        for agent, _ in gms.values():
            await agent.start()
        worker, worker_srv = assembly.build_sampling_worker(env, self.hosts["s1"])
        await worker.start()
        sched, sched_srv = assembly.build_sampling_scheduler(env, "sched1", 0, hosts=["s9"], cap_cpu=[4.0],
                                                             cap_mem=[8192.0], attributes=[{}], probes=2)
        for i in range(SCHEDULED):     # unbound tasks (their probes go to s9, which is not there)
            await sched.submit(meghapb.MeghaTask(name=f"p1-{i}", user="alice", request=res(0.5, 256)))
        self.agents = {"h1": h1, "san": san, "ba1": ba, "lm1a": lms["lm1a"][0], "lm1b": lms["lm1b"][0],
                       "lm2a": lms["lm2a"][0], "lm2b": lms["lm2b"][0],
                       "gm1": gms["gm1"][0], "gm2": gms["gm2"][0], "s1": worker, "sched1": sched}
        serve = {
            "h1": [(npbg.add_NodeAgentServicer_to_server, self.hosts["h1"].servicer, "cellbed.v1.NodeAgent"),
                   (masbpbg.add_SanServicer_to_server, san_srv, "cellbed.v1.San")],
            "ba1": [(masbpbg.add_BrokerAgentServicer_to_server, ba_srv, "cellbed.v1.BrokerAgent")],
            "gm1": [(meghapbg.add_GlobalMasterServicer_to_server, gms["gm1"][1], "cellbed.v1.GlobalMaster")],
            "lm2a": [(meghapbg.add_LocalMasterServicer_to_server, lms["lm2a"][1], "cellbed.v1.LocalMaster")],
            "lm2b": [(meghapbg.add_LocalMasterServicer_to_server, lms["lm2b"][1], "cellbed.v1.LocalMaster")],
            "s1": [(meghapbg.add_SamplingWorkerServicer_to_server, worker_srv, "cellbed.v1.SamplingWorker")],
            "sched1": [(meghapbg.add_SamplingSchedulerServicer_to_server, sched_srv, "cellbed.v1.SamplingScheduler")],
        }
        for name, services in serve.items():
            server, port, _ = rpc.create_server("127.0.0.1:0", services)
            await server.start()
            self.servers[name] = Server(server, grpc.aio.insecure_channel(f"127.0.0.1:{port}"))

    async def stop(self) -> None:
        for s in self.servers.values():
            await s.channel.close()
            await s.server.stop(None)
        for name in ("gm1", "gm2", "lm1a", "lm1b", "lm2a", "lm2b", "s1", "ba1", "san"):
            await self.agents[name].stop()
        for h in self.hosts.values():
            await h.agent.stop()

    # --- calls -------------------------------------------------------------------------------------
    async def call(self, service: str, method: str, wire: bytes, timeout: float = 5.0):
        """Send *wire* to /cellbed.v1.<service>/<method>: (status code, details, reply bytes)."""
        ch = self.servers[target(service, method)].channel
        path = f"/cellbed.v1.{service}/{method}"
        try:
            if method == "WatchEvents":
                return await self._watch(ch, path, wire, timeout)
            reply = await ch.unary_unary(path)(wire, timeout=timeout)
            return grpc.StatusCode.OK, "", reply
        except grpc.aio.AioRpcError as e:
            return e.code(), e.details() or "", b""

    async def _watch(self, ch, path, wire, timeout):
        """A server stream: read the first event of the replay (the buffer is full), then cancel."""
        call = ch.unary_stream(path)(wire, timeout=timeout)
        if npb.WatchEventsRequest.FromString(wire).replay:
            await call.read()
        call.cancel()
        return grpc.StatusCode.OK, "", b""

    async def good(self, service: str, method: str, request):
        """A known-good call: its reply (parsed), or AssertionError naming the status."""
        code, details, reply = await self.call(service, method, request.SerializeToString())
        assert code == grpc.StatusCode.OK, f"good {service}/{method} failed: {code.name}: {details}"
        desc = (npb if service == "NodeAgent" else masbpb if service in ("San", "BrokerAgent") else meghapb).DESCRIPTOR
        out = GetMessageClass(desc.services_by_name[service].methods_by_name[method].output_type).FromString(reply)
        bad = non_finite(out)
        assert not bad, f"good {service}/{method}: non-finite numbers in the reply: {bad[:5]}"
        return out


GoodCall = Callable[[FuzzCell], Awaitable[None]]


async def good_node(c: FuzzCell) -> None:
    """The host's state, and admission: a small VM is admitted (h1 has room for all the fuzz
    starts honestly), and its reservation given back."""
    await c.good("NodeAgent", "GetHostState", npb.GetHostStateRequest())
    used = c.agents["h1"].used()            # what admission and the SAN see (incoming VMs included)
    assert all(math.isfinite(x) and x >= 0 for x in used), f"the node's use is {used}"
    await c.good("NodeAgent", "PrepareIncoming", npb.PrepareIncomingRequest(
        spec=vm("good-in", 64), src_host="h2", migration_id="good-m"))
    await c.good("NodeAgent", "FinishIncoming", npb.FinishIncomingRequest(migration_id="good-m", name="good-in"))


async def good_san(c: FuzzCell) -> None:
    """A SAN step 3 answer, and the node's admission (a SAN's step 5 reserves on it)."""
    await c.good("San", "RequestTaskMigration", TEMPLATES[("San", "RequestTaskMigration")])
    await good_node(c)


async def good_broker(c: FuzzCell) -> None:
    await c.good("BrokerAgent", "GetCandidateNodes", TEMPLATES[("BrokerAgent", "GetCandidateNodes")])
    cache = await c.good("BrokerAgent", "ListCache", masbpb.ListCacheRequest())
    future = [e.report.host for e in cache.entries if e.age_s < -SKEW_S]
    assert not future, f"cache entries measured beyond the clock skew in the future: {future}"


async def good_gm(c: FuzzCell) -> None:
    view = await c.good("GlobalMaster", "GetView", meghapb.GetViewRequest())
    future = [v.lm for v in view.lms if v.staleness_s < -SKEW_S and v.staleness_s != -1.0]
    assert not future, f"LM states sent beyond the clock skew in the future: {future}"
    rows = [r for g in ("gm1", "gm2") for r in list(c.agents[g].records)[-3:]]
    bad = [r for r in rows if not all(math.isfinite(x) and x > -SKEW_S * 1000 for x in (
        r.framework_queue_ms, r.processing_ms, r.worker_queue_ms, r.communication_ms, r.total_ms))]
    assert not bad, f"allocation records with times out of range: {bad[:2]}"


async def good_lm(c: FuzzCell) -> None:
    await c.good("LocalMaster", "GetState", meghapb.GetStateRequest())


async def good_standby(c: FuzzCell) -> None:
    await c.good("LocalMaster", "GetRole", meghapb.GetRoleRequest())


async def good_worker(c: FuzzCell) -> None:
    await c.good("SamplingWorker", "Probe", TEMPLATES[("SamplingWorker", "Probe")])
    w = c.agents["s1"]
    queue = [(r.task, r.cpu, r.mem) for r in w.queue]
    bad = [q for q in queue if not (0 <= q[1] <= w.cap_cpu and 0 <= q[2] <= w.cap_mem)]
    assert not bad, f"reservations that can never fit (the worker's queue stops at them): {bad[:3]}"


async def good_scheduler(c: FuzzCell) -> None:
    await c.good("SamplingScheduler", "ClaimTask", meghapb.ClaimTaskRequest(worker="s1", task="nope",
                                                                             sent_unix_s=c.clock.now()))


GOOD: dict[str, GoodCall] = {"NodeAgent": good_node, "San": good_san, "BrokerAgent": good_broker,
                             "GlobalMaster": good_gm, "LocalMaster": good_lm, "SamplingWorker": good_worker,
                             "SamplingScheduler": good_scheduler}


def good_call(service: str, method: str) -> GoodCall:
    return good_standby if (service, method) == ("LocalMaster", "Replicate") else GOOD[service]


# --- fingerprints: what a refused request must leave as it was -----------------------------------------

def fp_node(c: FuzzCell):
    a = c.agents["h1"]
    return (sorted((n, e.spec) for n, e in a.vms.items()), sorted((m, r.spec) for m, r in a.incoming.items()),
            len(a.records))


def fp_san(c: FuzzCell):
    s = c.agents["san"]
    return fp_node(c), dict(s.counters), sorted(s.active), len(s.recent)


def fp_broker(c: FuzzCell):
    b = c.agents["ba1"]
    return [(r.host, r.SerializeToString(deterministic=True)) for r in b.cache.entries()], dict(b.counters)


def fp_gm(c: FuzzCell):
    g = c.agents["gm1"]
    return sorted(set(g.tasks) | set(g.done)), g.counters["submitted"], g.counters["events_unknown"]


LM_REQUESTS = ("launch_requests", "repartition_requests", "preemption_requests", "duplicates", "launches",
               "repartitions", "preemptions_granted")


def fp_lm(c: FuzzCell):
    lm = c.agents["lm2a"]
    return {k: lm.counters[k] for k in LM_REQUESTS}, lm.role, lm.epoch


def fp_standby(c: FuzzCell):
    lm = c.agents["lm2b"]
    return lm.epoch, lm.role, lm.counters["replicated"], sorted(lm.replica), len(lm.replica_outbox)


def fp_worker(c: FuzzCell):
    return c.agents["s1"].counters["probes"]


def fp_scheduler(c: FuzzCell):
    s = c.agents["sched1"]
    return dict(s.counters), sorted(s.tasks), sorted(s.unbound)


FINGERPRINT = {"NodeAgent": fp_node, "San": fp_san, "BrokerAgent": fp_broker, "GlobalMaster": fp_gm,
               "LocalMaster": fp_lm, "SamplingWorker": fp_worker, "SamplingScheduler": fp_scheduler}


def fingerprint(service: str, method: str) -> Callable[[FuzzCell], object]:
    return fp_standby if (service, method) == ("LocalMaster", "Replicate") else FINGERPRINT[service]


def run(loop: asyncio.AbstractEventLoop, coro):
    return loop.run_until_complete(coro)
