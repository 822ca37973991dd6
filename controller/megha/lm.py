"""The Local Master (seed 001 §IV): the true state of its cluster, validation of every GM
request, launch through the NodeAgent, periodic state updates, and active–standby.

Written against the runtime interfaces (transport, clock, RNG injected), so the same agent
drives real VMs over gRPC + MQTT and model tasks in a virtual-time model cell.

- Hosts are discovered from their node daemons (GetHostState: capacity and attributes), and
  running VMs are adopted (ListVms), so a restarted LM forgets nothing that runs.
- Requests are validated one at a time (a lock): the LM is the serial point of its cluster.
  Success reserves the resources at once, answers with a delta of the changed host, and
  starts the task on the node in the background; the task's start is reported to its GM as
  a TaskEvent with the LM-side parts of its allocation time. A stale request is refused with
  the full state of all partitions, and counted as an internal or external inconsistency.
- Task events (started, finished, preempted, failed) go to the GM that submitted the task,
  batched, and are resent until acknowledged.
- Active–standby: the active replicates its task table and undelivered events to the
  standby every replicate_period_s (also the heartbeat). The standby takes over when the
  heartbeat stops: it bumps the epoch, reconciles the table with what the nodes really run
  (ListVms), requeues through the GMs what vanished, and starts serving.
"""
from __future__ import annotations

import asyncio
import logging
import zlib
from collections import Counter

from cellbed.domain import errors, wire
from cellbed.policy.megha.validation import EXTERNAL, INTERNAL, ClusterState, LmTask, Refusal
from cellbed.controller.megha.params import LmParams
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.controller.megha.lm_wire import ACTIVE, STANDBY, check_task, state_topic, task_request
from cellbed.controller.megha.lm_standby import StandbyMixin
from cellbed.controller.megha.lm_launch import LaunchMixin
from cellbed.controller.megha.lm_hosts import HostsMixin

log = logging.getLogger(__name__)

INCONSISTENCY_PB = {INTERNAL: meghapb.INCONSISTENCY_INTERNAL, EXTERNAL: meghapb.INCONSISTENCY_EXTERNAL,
                  "preemption": meghapb.INCONSISTENCY_PREEMPTION}


class LocalMaster(LaunchMixin, StandbyMixin, HostsMixin):
    def __init__(self, lm: str, instance: str, transport, clock, *, hosts: list[str], gms: list[str],
                 owner: list[int] | None = None, standby: bool = False, peer: str = "", cell: str = "cell",
                 params: LmParams = LmParams()) -> None:
        self.lm, self.instance = lm, instance
        self.transport, self.clock = transport, clock
        self.host_names = list(hosts)
        self.gms = list(gms)
        self.owner = owner
        self.role = STANDBY if standby else ACTIVE
        self.peer = peer
        self.cell = cell
        self.params = params.validate()
        self.epoch = 1 if not standby else 0
        self.cluster: ClusterState | None = None
        self.counters: Counter = Counter()
        self._lock = asyncio.Lock()
        self.validating = 0                                    # requests waiting for, or holding, the lock
        self._acquired = 0.0                                   # when the current validation began
        self._pending_start = None
        self._standby_ok = True
        self._repl_lock = asyncio.Lock()
        self._boot_slots: dict[int, asyncio.Semaphore] = {}
        self._tasks: list[asyncio.Task] = []
        self._bg: set[asyncio.Task] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._stop_requested: set[str] = set()
        self.outbox: dict[str, list[meghapb.TaskEvent]] = {}
        self._flush = asyncio.Event()
        # replication
        self._dirty: set[str] = set()
        self._removed: set[str] = set()
        self._need_full = True
        self.replica: dict[str, meghapb.LmTaskRecord] = {}          # standby: the active's table
        self.replica_outbox: list[tuple[str, meghapb.TaskEvent]] = []
        self.last_heartbeat = 0.0
        self.takeovers = 0
        self.started = asyncio.Event()

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self._discover()
        if self.role == ACTIVE and self.peer:
            try:   # an active that comes back must not fight the standby that replaced it
                r = await self.transport.request(self.peer, "LocalMaster/GetRole", meghapb.GetRoleRequest(), timeout=5.0)
                if r.role == ACTIVE:
                    log.warning("%s: peer %s is active (epoch %d): starting as standby", self.instance, self.peer,
                                r.epoch)
                    self.role, self.epoch = STANDBY, r.epoch
            except errors.CellbedError:
                pass
        if self.role == ACTIVE:
            self.cluster.version = self.epoch << 32
            await self._adopt_running()
        self.last_heartbeat = self.clock.monotonic()
        self._tasks += [asyncio.create_task(self._publisher(), name=f"{self.instance}-publish"),
                        asyncio.create_task(self._flusher(), name=f"{self.instance}-events")]
        if self.peer:
            self._tasks += [asyncio.create_task(self._replicator(), name=f"{self.instance}-replicate"),
                            asyncio.create_task(self._watchdog(), name=f"{self.instance}-watchdog")]
        self.started.set()
        log.info("LM %s (%s) %s: %d hosts, %d partitions, %d tasks adopted", self.lm, self.instance,
                 meghapb.LmRole.Name(self.role), len(self.cluster.hosts), len(self.gms), len(self.cluster.tasks))

    async def stop(self) -> None:
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
        for t in self._tasks + list(self._bg):
            t.cancel()
        await asyncio.gather(*self._tasks, *self._bg, return_exceptions=True)
        self._tasks.clear()
        self._bg.clear()

    def _spawn(self, coro, name: str) -> asyncio.Task:
        t = asyncio.create_task(coro, name=name)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)
        return t

    async def _discover(self) -> None:
        """Capacity and attributes of every host, from its node daemon."""
        async def one(h: str) -> npb.HostState:
            deadline = self.clock.monotonic() + self.params.discover_timeout_s
            delay = 0.5
            while True:
                try:
                    return (await self.transport.request(h, "NodeAgent/GetHostState", npb.GetHostStateRequest(),
                                                         timeout=10.0)).state
                except errors.CellbedError as e:
                    if self.clock.monotonic() > deadline:
                        raise errors.Unavailable(f"LM {self.lm}: host {h} did not answer GetHostState within "
                                                 f"{self.params.discover_timeout_s:g} s: {e}") from e
                    await self.clock.sleep(delay)
                    delay = min(5.0, delay * 2)
        states = await asyncio.gather(*(one(h) for h in self.host_names))
        self.cluster = ClusterState(self.host_names, [s.capacity.cpu_cores for s in states],
                                    [float(s.capacity.mem_mib) for s in states],
                                    [wire.attributes_from_pb(s.attributes) for s in states], self.gms, self.owner)

    async def _list_vms(self) -> dict[int, list[npb.VmInfo] | None]:
        async def one(h: str):
            try:
                return (await self.transport.request(h, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=10.0)).vms
            except errors.CellbedError as e:
                log.warning("LM %s: ListVms on %s failed: %s", self.lm, h, e)
                return None
        res = await asyncio.gather(*(one(h) for h in self.cluster.hosts))
        return dict(enumerate(res))

    def _adopt(self, h: int, vm: npb.VmInfo) -> None:
        s = vm.spec
        cpu = s.req_cpu_cores or (s.vcpus or 1) * s.workload.cpu_load
        task = meghapb.MeghaTask(name=s.name, user=s.user, request=wire.resources(cpu, s.mem_mib),
                             constraints=s.constraints, production=s.production, priority=s.priority,
                             vcpus=s.vcpus, workload=s.workload)
        self.cluster.allocate(LmTask(s.name, s.user, float(cpu), float(s.mem_mib), h, int(self.cluster.owner[h]),
                                     False, "", "running", vm.created_unix_s, task))
        self._dirty.add(s.name)
        self.counters["adopted"] += 1

    async def _adopt_running(self) -> None:
        for h, vms in (await self._list_vms()).items():
            for vm in vms or ():
                if vm.spec.name not in self.cluster.tasks:
                    self._adopt(h, vm)

    # --- state messages ----------------------------------------------------------------------
    def _usage_pb(self) -> list[meghapb.UserUsage]:
        return [meghapb.UserUsage(user=u, used=wire.resources(c, m), tasks=int(n))
                for u, (c, m, n) in sorted(self.cluster.usage.items())]

    def full_state(self) -> meghapb.LmState:
        c = self.cluster
        fc, fm = c.free_arrays()
        return meghapb.LmState(lm=self.lm, instance=self.instance, epoch=self.epoch, version=c.version,
                           sent_unix_s=self.clock.now(), hosts_digest=c.digest, gms=c.gms, full=True,
                           owner=c.owner.tolist(), free_cpu_cores=fc.tolist(), free_mem_mib=fm.tolist(),
                           usage=self._usage_pb(), logical_nodes=c.logical.tolist(),
                           capacity=wire.resources(float(c.total_cpu.sum()), float(c.total_mem.sum())))

    def delta_state(self, hosts: list[int]) -> meghapb.LmState:
        c = self.cluster
        fc = [float(c.cap_cpu[h] - c.used_cpu[h]) for h in hosts]
        fm = [float(c.cap_mem[h] - c.used_mem[h]) for h in hosts]
        return meghapb.LmState(lm=self.lm, instance=self.instance, epoch=self.epoch, version=c.version,
                           sent_unix_s=self.clock.now(), hosts_digest=c.digest, gms=c.gms, full=False,
                           host_index=hosts, owner=[int(c.owner[h]) for h in hosts], free_cpu_cores=fc,
                           free_mem_mib=fm, usage=self._usage_pb(), logical_nodes=c.logical.tolist())

    def _reply_state(self, h: int) -> meghapb.LmState:
        return self.full_state() if self.params.piggyback_full else self.delta_state([h])

    def publish_state(self) -> None:
        """Send the full state of every partition to the GMs now (the periodic update, also used
        by a model cell after filling nodes outside the GMs)."""
        if self.role == ACTIVE:
            self.transport.publish(state_topic(self.cell, self.lm), self.full_state())
            self.counters["updates_published"] += 1

    async def _publisher(self) -> None:
        await self.clock.sleep(self.params.update_period_s * (zlib.crc32(self.instance.encode()) % 1000) / 1000.0)
        while True:
            self.publish_state()
            await self.clock.sleep(self.params.update_period_s)

    # --- requests ------------------------------------------------------------------------------
    def require_active(self) -> None:
        if self.role != ACTIVE or self.cluster is None:
            raise errors.FailedPrecondition(f"standby: LM {self.lm} instance {self.instance} is not active "
                                            f"(epoch {self.epoch})")

    def _indices(self, gm: str, host: str = "") -> tuple[int, int]:
        g = self.cluster.gm_index.get(gm)
        if g is None:
            raise errors.NotFound(f"gm={gm!r} has no partition on LM {self.lm}: partitions are for "
                                  f"{', '.join(self.cluster.gms)}")
        if not host:
            return g, -1
        h = self.cluster.index.get(host)
        if h is None:
            raise errors.NotFound(f"host={host!r} is not in LM {self.lm}'s cluster ({len(self.cluster.hosts)} hosts)")
        return g, h

    async def _serial(self, req, fn) -> meghapb.PlacementResponse:
        """Validate one request at a time and time it (the LmTiming of the reply)."""
        recv = self.clock.now()
        self.require_active()
        check_task(req.task)
        self.validating += 1
        try:
            async with self._lock:
                acq = self._acquired = self.clock.now()
                self.require_active()
                await self.clock.charge("lm_validate")
                resp = fn()
                done = self.clock.now()
                start, self._pending_start = self._pending_start, None
        finally:
            self.validating -= 1
        if start is not None:
            if self.peer and self._standby_ok:
                await self._replicate_once(timeout=self.params.replicate_timeout_s)   # before anyone hears of it
            self._spawn(self._start_task(*start), f"start-{start[0].name}")
        resp.timing.comm_in_ms = max(0.0, recv - req.sent_unix_s) * 1000 if req.sent_unix_s else 0.0
        resp.timing.queue_ms = (acq - recv) * 1000
        resp.timing.processing_ms = (done - acq) * 1000
        return resp

    def _refuse(self, r: Refusal) -> meghapb.PlacementResponse:
        self.counters[f"inconsistency_{r.kind}"] += 1
        return meghapb.PlacementResponse(ok=False, detail=r.detail, inconsistency=INCONSISTENCY_PB[r.kind],
                                     state=self.full_state())

    def _duplicate(self, name: str) -> meghapb.PlacementResponse | None:
        t = self.cluster.tasks.get(name)
        if t is None:
            return None
        self.counters["duplicates"] += 1   # a GM resent a task it had placed (e.g. after its restart)
        return meghapb.PlacementResponse(ok=True, detail="already placed", state=self._reply_state(t.host),
                                     placement=self._placement(t))

    def _placement(self, t: LmTask, preempted=()) -> meghapb.Placement:
        return meghapb.Placement(lm=self.lm, lm_instance=self.instance, host=self.cluster.hosts[t.host],
                             partition=self.cluster.gms[t.partition], repartitioned=t.logical,
                             preempted=list(preempted))

    def _accept(self, req, h: int, g: int, logical: bool, victims=()) -> meghapb.PlacementResponse:
        cpu, mem = task_request(req.task)
        t = LmTask(req.task.name, req.task.user, cpu, mem, h, g, logical, req.gm, "starting", 0.0, req.task)
        self.cluster.allocate(t)
        self._dirty.add(t.name)
        resp = meghapb.PlacementResponse(ok=True, state=self._reply_state(h),
                                     placement=self._placement(t, [v.name for v in victims]))
        self._pending_start = (t, resp, list(victims), self._acquired)   # _serial starts it
        return resp

    async def launch(self, req: meghapb.LaunchRequest) -> meghapb.PlacementResponse:
        def fn():
            dup = self._duplicate(req.task.name)
            if dup is not None:
                return dup
            g, h = self._indices(req.gm, req.host)
            cpu, mem = task_request(req.task)
            self.counters["launch_requests"] += 1
            try:
                self.cluster.check_launch(h, g, cpu, mem, wire.constraints_from_pb(req.task.constraints))
            except Refusal as r:
                return self._refuse(r)
            self.counters["launches"] += 1
            return self._accept(req, h, g, logical=False)
        return await self._serial(req, fn)

    async def repartition(self, req: meghapb.RepartitionRequest) -> meghapb.PlacementResponse:
        def fn():
            dup = self._duplicate(req.task.name)
            if dup is not None:
                return dup
            g, h = self._indices(req.gm, req.host)
            cpu, mem = task_request(req.task)
            self.counters["repartition_requests"] += 1
            try:
                self.cluster.check_repartition(h, g, cpu, mem, wire.constraints_from_pb(req.task.constraints))
            except Refusal as r:
                return self._refuse(r)
            self.counters["repartitions"] += 1
            return self._accept(req, h, g, logical=True)
        return await self._serial(req, fn)

    async def preempt(self, req: meghapb.PreemptRequest) -> meghapb.PlacementResponse:
        def fn():
            dup = self._duplicate(req.task.name)
            if dup is not None:
                return dup
            g, _ = self._indices(req.gm)
            if not req.victim_user:
                raise errors.InvalidArgument("victim_user must be set")
            cpu, mem = task_request(req.task)
            self.counters["preemption_requests"] += 1
            try:
                h, victims = self.cluster.find_preemption(g, req.victim_user, cpu, mem,
                                                          wire.constraints_from_pb(req.task.constraints))
            except Refusal as r:
                return self._refuse(r)
            for v in victims:
                self.cluster.release(v.name)
                self._removed.add(v.name)
                self._dirty.discard(v.name)
                tm = self._timers.pop(v.name, None)
                if tm is not None:
                    tm.cancel()
            self.counters["preemptions"] += len(victims)
            self.counters["preemptions_granted"] += 1
            return self._accept(req, h, g, logical=self.cluster.owner[h] != g, victims=victims)
        return await self._serial(req, fn)

    async def place_direct(self, task: meghapb.MeghaTask, host: str) -> None:
        """Start a task on *host* outside the GMs, in the owner's partition (a warm model cell at
        t=0). Raises FailedPrecondition if it does not fit."""
        self.require_active()
        check_task(task)
        h = self.cluster.index.get(host)
        if h is None:
            raise errors.NotFound(f"host={host!r} is not in LM {self.lm}'s cluster")
        cpu, mem = task_request(task)
        fc, fm = self.cluster.free(h)
        if fc + 1e-9 < cpu or fm + 1e-9 < mem:
            raise errors.FailedPrecondition(f"{host} has {fc:.3f} cores / {fm:.0f} MiB free, {task.name} needs "
                                            f"{cpu:.3f} / {mem:.0f}")
        t = LmTask(task.name, task.user, cpu, mem, h, int(self.cluster.owner[h]), False, "", "starting", 0.0, task)
        self.cluster.allocate(t)
        self._dirty.add(t.name)
        await self._start_task(t, meghapb.PlacementResponse(ok=True, placement=self._placement(t)), [], self.clock.now())

    # --- views for cellctl ---------------------------------------------------------------------------
    def queue_lengths(self) -> dict[str, int]:
        """What waits here: requests queued for the validation lock, task events not yet
        acknowledged by their GMs (the metrics exporter reads this)."""
        return {"validation": self.validating - int(self._lock.locked()),
                "events": sum(len(v) for v in self.outbox.values())}

    def list_partitions(self) -> meghapb.ListPartitionsResponse:
        c = self.cluster
        out = meghapb.ListPartitionsResponse(lm=self.lm, instance=self.instance, role=self.role, epoch=self.epoch,
                                         counters=dict(self.counters))
        if c is None:
            return out
        for g, gm in enumerate(c.gms):
            p = out.partitions.add(gm=gm)
            cc = cm = uc = um = 0.0
            for h in range(len(c.hosts)):
                if c.owner[h] != g:
                    continue
                n = sum(1 for t in c.on_host[h].values() if not t.logical)
                p.slices.add(host=c.hosts[h], capacity=wire.resources(c.cap_cpu[h], c.cap_mem[h]),
                             used=wire.resources(c.used_cpu[h], c.used_mem[h]), tasks=n)
                cc, cm, uc, um = cc + c.cap_cpu[h], cm + c.cap_mem[h], uc + c.used_cpu[h], um + c.used_mem[h]
            for t in sorted(c.tasks.values(), key=lambda t: t.name):
                if t.logical and t.partition == g:
                    p.slices.add(host=c.hosts[t.host], logical=True, task=t.name,
                                 capacity=wire.resources(t.cpu, t.mem), used=wire.resources(t.cpu, t.mem), tasks=1)
                    cc, cm, uc, um = cc + t.cpu, cm + t.mem, uc + t.cpu, um + t.mem
            p.capacity.CopyFrom(wire.resources(cc, cm))
            p.used.CopyFrom(wire.resources(uc, um))
        return out

    def hosts_pb(self) -> meghapb.GetHostsResponse:
        c = self.cluster
        return meghapb.GetHostsResponse(lm=self.lm, digest=c.digest, hosts=[
            meghapb.LmHost(name=n, capacity=wire.resources(float(c.total_cpu[i]), float(c.total_mem[i])),
                       attributes=wire.attributes_pb(c.attributes[i])) for i, n in enumerate(c.hosts)])
