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
import math
import zlib
from collections import Counter

from cellbed.domain import errors, wire
from cellbed.policy.megha.validation import EXTERNAL, INTERNAL, ClusterState, LmTask, Refusal
from cellbed.controller.megha.params import LmParams
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import megha_pb2 as mpb, megha_pb2_grpc as mpbg, node_pb2 as npb

log = logging.getLogger(__name__)

ACTIVE, STANDBY = mpb.LM_ROLE_ACTIVE, mpb.LM_ROLE_STANDBY
_INCONSISTENCY = {INTERNAL: mpb.INCONSISTENCY_INTERNAL, EXTERNAL: mpb.INCONSISTENCY_EXTERNAL,
                  "preemption": mpb.INCONSISTENCY_PREEMPTION}


def state_topic(cell: str, lm: str = "+") -> str:
    return f"cellbed/{cell}/megha/lm/{lm}/state"


def task_request(t: mpb.MeghaTask) -> tuple[float, float]:
    """(cores, MiB) a task reserves; memory is whole MiB, as the node admits it."""
    return float(t.request.cpu_cores), float(math.ceil(t.request.mem_mib - 1e-9))


def vm_spec(t: mpb.MeghaTask) -> npb.VmSpec:
    cpu, mem = task_request(t)
    return npb.VmSpec(name=t.name, mem_mib=int(mem), vcpus=t.vcpus or max(1, math.ceil(cpu - 1e-9)),
                      workload=t.workload, production=t.production, priority=t.priority, req_cpu_cores=cpu,
                      constraints=t.constraints, user=t.user)


def check_task(t: mpb.MeghaTask) -> None:
    """What every LM request must carry; the GM has validated the rest against the cell."""
    if not t.name:
        raise errors.InvalidArgument("task.name must be set")
    cpu, mem = t.request.cpu_cores, t.request.mem_mib
    if not (math.isfinite(cpu) and cpu > 0):
        raise errors.InvalidArgument(f"task.request.cpu_cores={cpu!r} is out of range: allowed > 0 cores")
    if not (math.isfinite(mem) and mem > 0):
        raise errors.InvalidArgument(f"task.request.mem_mib={mem!r} is out of range: allowed > 0 MiB")


class LocalMaster:
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
        self._acquired = 0.0                                   # when the current validation began
        self._pending_start = None
        self._standby_ok = True
        self._repl_lock = asyncio.Lock()
        self._boot_slots: dict[int, asyncio.Semaphore] = {}
        self._tasks: list[asyncio.Task] = []
        self._bg: set[asyncio.Task] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._stop_requested: set[str] = set()
        self.outbox: dict[str, list[mpb.TaskEvent]] = {}
        self._flush = asyncio.Event()
        # replication
        self._dirty: set[str] = set()
        self._removed: set[str] = set()
        self._need_full = True
        self.replica: dict[str, mpb.LmTaskRecord] = {}          # standby: the active's table
        self.replica_outbox: list[tuple[str, mpb.TaskEvent]] = []
        self.last_heartbeat = 0.0
        self.takeovers = 0
        self.started = asyncio.Event()

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self._discover()
        if self.role == ACTIVE and self.peer:
            try:   # an active that comes back must not fight the standby that replaced it
                r = await self.transport.request(self.peer, "LocalMaster/GetRole", mpb.GetRoleRequest(), timeout=5.0)
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
                 mpb.LmRole.Name(self.role), len(self.cluster.hosts), len(self.gms), len(self.cluster.tasks))

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
        task = mpb.MeghaTask(name=s.name, user=s.user, request=wire.resources(cpu, s.mem_mib),
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
    def _usage_pb(self) -> list[mpb.UserUsage]:
        return [mpb.UserUsage(user=u, used=wire.resources(c, m), tasks=int(n))
                for u, (c, m, n) in sorted(self.cluster.usage.items())]

    def full_state(self) -> mpb.LmState:
        c = self.cluster
        fc, fm = c.free_arrays()
        return mpb.LmState(lm=self.lm, instance=self.instance, epoch=self.epoch, version=c.version,
                           sent_unix_s=self.clock.now(), hosts_digest=c.digest, gms=c.gms, full=True,
                           owner=c.owner.tolist(), free_cpu_cores=fc.tolist(), free_mem_mib=fm.tolist(),
                           usage=self._usage_pb(), logical_nodes=c.logical.tolist(),
                           capacity=wire.resources(float(c.total_cpu.sum()), float(c.total_mem.sum())))

    def delta_state(self, hosts: list[int]) -> mpb.LmState:
        c = self.cluster
        fc = [float(c.cap_cpu[h] - c.used_cpu[h]) for h in hosts]
        fm = [float(c.cap_mem[h] - c.used_mem[h]) for h in hosts]
        return mpb.LmState(lm=self.lm, instance=self.instance, epoch=self.epoch, version=c.version,
                           sent_unix_s=self.clock.now(), hosts_digest=c.digest, gms=c.gms, full=False,
                           host_index=hosts, owner=[int(c.owner[h]) for h in hosts], free_cpu_cores=fc,
                           free_mem_mib=fm, usage=self._usage_pb(), logical_nodes=c.logical.tolist())

    def _reply_state(self, h: int) -> mpb.LmState:
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
    def _require_active(self) -> None:
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

    async def _serial(self, req, fn) -> mpb.PlacementResponse:
        """Validate one request at a time and time it (the LmTiming of the reply)."""
        recv = self.clock.now()
        self._require_active()
        check_task(req.task)
        async with self._lock:
            acq = self._acquired = self.clock.now()
            self._require_active()
            await self.clock.charge("lm_validate")
            resp = fn()
            done = self.clock.now()
            start, self._pending_start = self._pending_start, None
        if start is not None:
            if self.peer and self._standby_ok:
                await self._replicate_once(timeout=self.params.replicate_timeout_s)   # before anyone hears of it
            self._spawn(self._start_task(*start), f"start-{start[0].name}")
        resp.timing.comm_in_ms = max(0.0, recv - req.sent_unix_s) * 1000 if req.sent_unix_s else 0.0
        resp.timing.queue_ms = (acq - recv) * 1000
        resp.timing.processing_ms = (done - acq) * 1000
        return resp

    def _refuse(self, r: Refusal) -> mpb.PlacementResponse:
        self.counters[f"inconsistency_{r.kind}"] += 1
        return mpb.PlacementResponse(ok=False, detail=r.detail, inconsistency=_INCONSISTENCY[r.kind],
                                     state=self.full_state())

    def _duplicate(self, name: str) -> mpb.PlacementResponse | None:
        t = self.cluster.tasks.get(name)
        if t is None:
            return None
        self.counters["duplicates"] += 1   # a GM resent a task it had placed (e.g. after its restart)
        return mpb.PlacementResponse(ok=True, detail="already placed", state=self._reply_state(t.host),
                                     placement=self._placement(t))

    def _placement(self, t: LmTask, preempted=()) -> mpb.Placement:
        return mpb.Placement(lm=self.lm, lm_instance=self.instance, host=self.cluster.hosts[t.host],
                             partition=self.cluster.gms[t.partition], repartitioned=t.logical,
                             preempted=list(preempted))

    def _accept(self, req, h: int, g: int, logical: bool, victims=()) -> mpb.PlacementResponse:
        cpu, mem = task_request(req.task)
        t = LmTask(req.task.name, req.task.user, cpu, mem, h, g, logical, req.gm, "starting", 0.0, req.task)
        self.cluster.allocate(t)
        self._dirty.add(t.name)
        resp = mpb.PlacementResponse(ok=True, state=self._reply_state(h),
                                     placement=self._placement(t, [v.name for v in victims]))
        self._pending_start = (t, resp, list(victims), self._acquired)   # _serial starts it
        return resp

    async def launch(self, req: mpb.LaunchRequest) -> mpb.PlacementResponse:
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

    async def repartition(self, req: mpb.RepartitionRequest) -> mpb.PlacementResponse:
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

    async def preempt(self, req: mpb.PreemptRequest) -> mpb.PlacementResponse:
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

    async def place_direct(self, task: mpb.MeghaTask, host: str) -> None:
        """Start a task on *host* outside the GMs, in the owner's partition (a warm model cell at
        t=0). Raises FailedPrecondition if it does not fit."""
        self._require_active()
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
        await self._start_task(t, mpb.PlacementResponse(ok=True, placement=self._placement(t)), [], self.clock.now())

    # --- the node side ---------------------------------------------------------------------------
    async def _start_task(self, t: LmTask, resp: mpb.PlacementResponse, victims: list[LmTask],
                          acquired: float) -> None:
        """Stop the victims (preemption), then StartVm; report the outcome to the task's GM.
        *resp* is the reply whose timing _serial fills in before this coroutine first runs;
        *acquired* is when validation began (the LM's processing runs from there to StartVm)."""
        host = self.cluster.hosts[t.host]
        for v in victims:
            try:
                await self.transport.request(host, "NodeAgent/StopVm", npb.StopVmRequest(name=v.name),
                                             timeout=self.params.stop_timeout_s)
            except errors.NotFound:
                pass
            except errors.CellbedError as e:
                # the victim still runs: give its resources back to it and requeue this task instead
                log.warning("LM %s: stopping preempted %s on %s failed: %s; preemption for %s abandoned",
                            self.lm, v.name, host, e, t.name)
                self.counters["preemptions_abandoned"] += 1
                if self.cluster.tasks.get(t.name) is t:
                    self.cluster.release(t.name)
                    self._removed.add(t.name)
                for w in victims[victims.index(v):]:
                    if w.name not in self.cluster.tasks:
                        self.cluster.allocate(w)
                        self._dirty.add(w.name)
                        self._removed.discard(w.name)
                        self._schedule_finish(w)
                self._event(t.submit_gm, mpb.TaskEvent(name=t.name, kind=mpb.TASK_EVENT_KIND_FAILED, task=t.payload,
                                                       detail=f"preemption on {host} failed: {e}"))
                return
            self._event(v.submit_gm, mpb.TaskEvent(name=v.name, kind=mpb.TASK_EVENT_KIND_PREEMPTED,
                                                   placement=self._placement(v), task=v.payload,
                                                   detail=f"preempted on {host} for {t.name} ({t.user})"))
        ready = self.clock.now()
        slots = None
        if self.params.max_starting_per_host:
            slots = self._boot_slots.setdefault(t.host, asyncio.Semaphore(self.params.max_starting_per_host))
            await slots.acquire()
        t.start_sent = True
        self._dirty.add(t.name)
        if self.peer and self._standby_ok:      # the standby must know a StartVm may be in flight
            await self._replicate_once(timeout=self.params.replicate_timeout_s)
        sent = self.clock.now()
        try:
            rep = await self.transport.request(host, "NodeAgent/StartVm", npb.StartVmRequest(spec=vm_spec(t.payload)),
                                               timeout=self.params.start_timeout_s)
            vm = rep.vm
            start = vm.created_unix_s if vm.created_unix_s >= sent else sent
            boot = vm.boot_to_workload_s
        except errors.AlreadyExists:
            start, boot = self.clock.now(), 0.0       # e.g. resent after a takeover: it runs already
        except errors.CellbedError as e:
            self.counters["node_failures" if not isinstance(e, errors.InvalidArgument) else "node_rejections"] += 1
            log.warning("LM %s: StartVm %s on %s failed: %s", self.lm, t.name, host, e)
            if self.cluster.tasks.get(t.name) is t:
                self.cluster.release(t.name)
                self._removed.add(t.name)
                self._dirty.discard(t.name)
            kind = mpb.TASK_EVENT_KIND_REJECTED if isinstance(e, errors.InvalidArgument) else mpb.TASK_EVENT_KIND_FAILED
            self._event(t.submit_gm, mpb.TaskEvent(name=t.name, kind=kind, task=t.payload,
                                                   detail=f"StartVm on {host}: {e}"))
            return
        finally:
            if slots is not None:
                slots.release()
        t.state, t.start_unix_s = "running", start
        self._dirty.add(t.name)
        lt = resp.timing
        # LM processing runs up to StartVm: validation, plus stopping the victims of a preemption
        timing = mpb.LmTiming(comm_in_ms=lt.comm_in_ms, queue_ms=lt.queue_ms,
                              processing_ms=max(lt.processing_ms / 1000, ready - acquired) * 1000,
                              comm_node_ms=max(0.0, start - sent) * 1000, worker_queue_ms=(sent - ready) * 1000,
                              boot_ms=boot * 1000, start_unix_s=start)
        self._event(t.submit_gm, mpb.TaskEvent(name=t.name, kind=mpb.TASK_EVENT_KIND_STARTED, task=t.payload,
                                               placement=resp.placement, timing=timing, unix_s=start))
        if self.cluster.tasks.get(t.name) is not t or t.name in self._stop_requested:
            self._stop_requested.discard(t.name)
            await self._finish(t.name, "stopped while starting")
            return
        self._schedule_finish(t)

    def _schedule_finish(self, t: LmTask) -> None:
        """Stop the task when its duration (from its start) has passed."""
        if t.payload is None or t.payload.duration_s <= 0 or t.name in self._timers:
            return
        left = t.payload.duration_s
        if t.start_unix_s:
            left = max(0.0, t.start_unix_s + t.payload.duration_s - self.clock.now())
        self._timers[t.name] = self.clock.call_later(left, lambda n=t.name: self._spawn(self._finish(n), f"finish-{n}"))

    async def _finish(self, name: str, why: str = "ran for its duration") -> str:
        self._timers.pop(name, None)
        t = self.cluster.tasks.get(name) if self.cluster else None
        if t is None:
            return ""
        host = self.cluster.hosts[t.host]
        try:
            await self.transport.request(host, "NodeAgent/StopVm", npb.StopVmRequest(name=name),
                                         timeout=self.params.stop_timeout_s)
        except errors.NotFound:
            pass
        except errors.CellbedError as e:
            log.warning("LM %s: StopVm %s on %s failed: %s (its resources stay reserved)", self.lm, name, host, e)
            raise
        if self.cluster.tasks.get(name) is t:
            self.cluster.release(name)
            self._removed.add(name)
            self._dirty.discard(name)
            self.counters["finished"] += 1
            self._event(t.submit_gm, mpb.TaskEvent(name=name, kind=mpb.TASK_EVENT_KIND_FINISHED,
                                                   placement=self._placement(t), detail=why,
                                                   unix_s=self.clock.now()))
        return host

    async def stop_task(self, name: str) -> str:
        self._require_active()
        t = self.cluster.tasks.get(name)
        if t is None:
            raise errors.NotFound(f"task {name!r} is not on LM {self.lm}")
        if t.state != "running":
            self._stop_requested.add(name)
            return self.cluster.hosts[t.host]
        tm = self._timers.pop(name, None)
        if tm is not None:
            tm.cancel()
        return await self._finish(name, "stopped on request")

    # --- events to GMs ------------------------------------------------------------------------------
    def _event(self, gm: str, ev: mpb.TaskEvent) -> None:
        if not gm:
            return
        if not ev.unix_s:
            ev.unix_s = self.clock.now()
        self.outbox.setdefault(gm, []).append(ev)
        self._flush.set()

    async def _flusher(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            if self.params.event_flush_s:
                await self.clock.sleep(self.params.event_flush_s)
            if self.role != ACTIVE:
                continue
            results = await asyncio.gather(*(self._send_events(gm) for gm in list(self.outbox)))
            if not all(results):
                await self.clock.sleep(self.params.event_retry_s)
                self._flush.set()

    async def _send_events(self, gm: str) -> bool:
        evs = self.outbox.get(gm)
        if not evs:
            return True
        batch = list(evs)
        try:
            await self.transport.request(gm, "GlobalMaster/ReportTaskEvents", mpb.ReportTaskEventsRequest(
                lm=self.lm, instance=self.instance, events=batch), timeout=10.0)
        except errors.CellbedError as e:
            self.counters["event_send_failures"] += 1
            log.debug("LM %s: events to %s not delivered (%d pending): %s", self.lm, gm, len(evs), e)
            return False
        del evs[:len(batch)]
        self.counters["events_sent"] += len(batch)
        return True

    # --- active-standby -------------------------------------------------------------------------------
    def _record(self, t: LmTask) -> mpb.LmTaskRecord:
        return mpb.LmTaskRecord(task=t.payload, host=self.cluster.hosts[t.host], partition=self.cluster.gms[t.partition],
                                logical=t.logical, submit_gm=t.submit_gm,
                                state=mpb.TASK_STATE_RUNNING if t.state == "running" else mpb.TASK_STATE_STARTING,
                                start_unix_s=t.start_unix_s, start_sent=t.start_sent)

    async def _replicator(self) -> None:
        while True:
            await self.clock.sleep(self.params.replicate_period_s)
            if self.role == ACTIVE:
                await self._replicate_once(timeout=5.0)

    async def _replicate_once(self, timeout: float) -> bool:
        """Send the standby what changed (all of it after a failure). Also the heartbeat."""
        async with self._repl_lock:
            full = self._need_full
            names = list(self.cluster.tasks) if full else [n for n in self._dirty if n in self.cluster.tasks]
            removed = [] if full else list(self._removed)
            out, gms = [], []
            for gm, evs in self.outbox.items():
                out += evs
                gms += [gm] * len(evs)
            req = mpb.ReplicateRequest(instance=self.instance, epoch=self.epoch, full=full,
                                       upserts=[self._record(self.cluster.tasks[n]) for n in names],
                                       removed=removed, outbox=out, outbox_gm=gms)
            self._dirty.clear()
            self._removed.clear()
            try:
                r = await self.transport.request(self.peer, "LocalMaster/Replicate", req, timeout=timeout)
            except errors.CellbedError as e:
                self._need_full = True
                if self._standby_ok:
                    log.warning("LM %s: standby %s unreachable (%s): replicating in the background until it answers",
                                self.lm, self.peer, e)
                self._standby_ok = False
                self.counters["replicate_failures"] += 1
                return False
            self._need_full = False
            self._standby_ok = True
            if r.role == ACTIVE and r.epoch > self.epoch:
                log.warning("LM %s: %s took over (epoch %d > %d): stepping down to standby", self.lm,
                            r.instance, r.epoch, self.epoch)
                self.role, self.epoch = STANDBY, r.epoch
                self.last_heartbeat = self.clock.monotonic()
            return True

    def replicate(self, req: mpb.ReplicateRequest) -> mpb.ReplicateResponse:
        if self.role == ACTIVE:
            if req.epoch > self.epoch:   # the other side took over while we were away
                log.warning("LM %s: %s is active with epoch %d > %d: stepping down", self.lm, req.instance,
                            req.epoch, self.epoch)
                self.role = STANDBY
            else:
                return mpb.ReplicateResponse(instance=self.instance, role=self.role, epoch=self.epoch)
        self.epoch = max(self.epoch, req.epoch)
        self.last_heartbeat = self.clock.monotonic()
        if req.full:
            self.replica = {}
        for r in req.upserts:
            self.replica[r.task.name] = r
        for n in req.removed:
            self.replica.pop(n, None)
        self.replica_outbox = list(zip(req.outbox_gm, req.outbox))
        self.counters["replicated"] += 1
        return mpb.ReplicateResponse(instance=self.instance, role=self.role, epoch=self.epoch)

    async def _watchdog(self) -> None:
        period = self.params.takeover_after_s / 4
        while True:
            await self.clock.sleep(period)
            if self.role == STANDBY and self.clock.monotonic() - self.last_heartbeat > self.params.takeover_after_s:
                try:
                    await self.takeover()
                except errors.CellbedError as e:
                    log.error("LM %s: takeover by %s failed: %s", self.lm, self.instance, e)

    async def takeover(self) -> None:
        """Become active: rebuild the true state from the replica and what the nodes run (ListVms).

        A replicated task the nodes do not run is lost (its GM requeues it) only if the dead
        active never sent its StartVm; if it did, or the VM is still booting, the task is
        watched until the node has decided (orphan_wait_s), so it can never run twice."""
        silent = self.clock.monotonic() - self.last_heartbeat
        watch: list[LmTask] = []
        async with self._lock:
            self.epoch += 1
            old = self.cluster
            self.cluster = ClusterState(old.hosts, old.total_cpu, old.total_mem, old.attributes, old.gms,
                                        old.owner.tolist())
            self.cluster.version = self.epoch << 32
            vms = await self._list_vms()
            on_node = {h: {v.spec.name: v for v in lst} for h, lst in vms.items() if lst is not None}
            lost, unreported = [], []
            for r in self.replica.values():
                h = self.cluster.index.get(r.host)
                if h is None:
                    continue
                vm = on_node.get(h, {}).get(r.task.name)
                if h in on_node and vm is None and not r.start_sent:
                    lost.append(r)
                    continue
                cpu, mem = task_request(r.task)
                t = LmTask(r.task.name, r.task.user, cpu, mem, h, self.cluster.gm_index.get(r.partition, 0),
                           r.logical, r.submit_gm, "starting", r.start_unix_s, r.task, start_sent=r.start_sent)
                booted = vm is not None and vm.state == npb.VM_STATE_RUNNING and vm.state_reason != "starting"
                if booted or (h not in on_node and r.state == mpb.TASK_STATE_RUNNING):
                    t.state = "running"
                    t.start_unix_s = r.start_unix_s or (vm.created_unix_s if vm is not None else self.clock.now())
                    if r.state == mpb.TASK_STATE_STARTING:      # the active died before reporting the start
                        unreported.append((t, vm))
                else:
                    watch.append(t)
                self.cluster.allocate(t)
                if t.state == "running":
                    self._schedule_finish(t)
            for h, by_name in on_node.items():
                for name, vm in by_name.items():
                    if name not in self.cluster.tasks:
                        self._adopt(h, vm)
            for gm, ev in self.replica_outbox:
                self.outbox.setdefault(gm, []).append(ev)
            for r in lost:
                self._event(r.submit_gm, mpb.TaskEvent(name=r.task.name, kind=mpb.TASK_EVENT_KIND_FAILED,
                                                       task=r.task, detail=f"never started on {r.host} (takeover)"))
            for t, vm in unreported:
                self._report_start(t, vm, "start reported by the standby after the takeover")
            self.role = ACTIVE
            self.takeovers += 1
            self.counters["takeovers"] += 1
            self._need_full = True
        for t in watch:
            self._spawn(self._watch_orphan(t), f"watch-{t.name}")
        log.warning("LM %s: %s took over after %.1f s of silence: epoch %d, %d tasks (%d still starting), "
                    "%d never started (requeued), %d adopted", self.lm, self.instance, silent, self.epoch,
                    len(self.cluster.tasks), len(watch), len(lost), self.counters["adopted"])
        self.transport.publish(state_topic(self.cell, self.lm), self.full_state())

    def _report_start(self, t: LmTask, vm, detail: str) -> None:
        boot = vm.boot_to_workload_s * 1000 if vm is not None else 0.0
        self._event(t.submit_gm, mpb.TaskEvent(
            name=t.name, kind=mpb.TASK_EVENT_KIND_STARTED, placement=self._placement(t), task=t.payload,
            timing=mpb.LmTiming(start_unix_s=t.start_unix_s, boot_ms=boot), unix_s=t.start_unix_s, detail=detail))

    async def _watch_orphan(self, t: LmTask) -> None:
        """A task the dead active was starting: wait until its node has it running (report the start)
        or, past orphan_wait_s, still does not have it (release it; its GM requeues it)."""
        host = self.cluster.hosts[t.host]
        deadline = self.clock.monotonic() + self.params.orphan_wait_s
        while self.cluster.tasks.get(t.name) is t:
            try:
                vms = (await self.transport.request(host, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=10.0)).vms
            except errors.CellbedError:
                vms = None
            if vms is not None:
                vm = next((v for v in vms if v.spec.name == t.name), None)
                if vm is not None and vm.state == npb.VM_STATE_RUNNING and vm.state_reason != "starting":
                    t.state, t.start_unix_s = "running", vm.created_unix_s or self.clock.now()
                    self._dirty.add(t.name)
                    self._report_start(t, vm, "started by the previous active; reported after the takeover")
                    self._schedule_finish(t)
                    return
                if vm is None and self.clock.monotonic() > deadline:
                    self.cluster.release(t.name)
                    self._removed.add(t.name)
                    self.counters["orphans_lost"] += 1
                    self._event(t.submit_gm, mpb.TaskEvent(name=t.name, kind=mpb.TASK_EVENT_KIND_FAILED, task=t.payload,
                                                           detail=f"not started on {host} by the previous active"))
                    return
            await self.clock.sleep(2.0)

    # --- views for cellctl ---------------------------------------------------------------------------
    def list_partitions(self) -> mpb.ListPartitionsResponse:
        c = self.cluster
        out = mpb.ListPartitionsResponse(lm=self.lm, instance=self.instance, role=self.role, epoch=self.epoch,
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

    def hosts_pb(self) -> mpb.GetHostsResponse:
        c = self.cluster
        return mpb.GetHostsResponse(lm=self.lm, digest=c.digest, hosts=[
            mpb.LmHost(name=n, capacity=wire.resources(float(c.total_cpu[i]), float(c.total_mem[i])),
                       attributes=wire.attributes_pb(c.attributes[i])) for i, n in enumerate(c.hosts)])


class LocalMasterServicer(mpbg.LocalMasterServicer):
    """Thin: translate, delegate."""

    def __init__(self, agent: LocalMaster) -> None:
        self.agent = agent

    @handles_errors
    async def Launch(self, request, context):
        return await self.agent.launch(request)

    @handles_errors
    async def Repartition(self, request, context):
        return await self.agent.repartition(request)

    @handles_errors
    async def Preempt(self, request, context):
        return await self.agent.preempt(request)

    @handles_errors
    async def GetState(self, request, context):
        self.agent._require_active()
        return mpb.GetStateResponse(state=self.agent.full_state())

    @handles_errors
    async def GetHosts(self, request, context):
        if self.agent.cluster is None:
            raise errors.Unavailable(f"LM {self.agent.lm} has not discovered its hosts yet")
        return self.agent.hosts_pb()

    @handles_errors
    async def ListPartitions(self, request, context):
        return self.agent.list_partitions()

    @handles_errors
    async def FindTasks(self, request, context):
        a = self.agent
        a._require_active()
        return mpb.FindTasksResponse(found=[a._record(a.cluster.tasks[n]) for n in request.names
                                            if n in a.cluster.tasks])

    @handles_errors
    async def StopTask(self, request, context):
        if not request.name:
            raise errors.InvalidArgument("name must be set")
        return mpb.StopTaskResponse(host=await self.agent.stop_task(request.name))

    @handles_errors
    async def Replicate(self, request, context):
        return self.agent.replicate(request)

    @handles_errors
    async def GetRole(self, request, context):
        a = self.agent
        return mpb.GetRoleResponse(instance=a.instance, role=a.role, epoch=a.epoch)
