"""The ``sampling`` baseline: Sparrow-style power-of-d probing with late binding
(Ousterhout et al., SOSP'13; seed 001 §II-C).

- A scheduler probes d random nodes per task (default 2) among those that satisfy the task's
  constraints and are big enough for it (it knows the hosts' static attributes, not their
  load), and places a reservation in each node's worker queue.
- Each node's worker serves its reservations FIFO. When the one at the head fits the node's
  free resources it *claims* the task from the scheduler (late binding): the first claim
  wins; later claims get nothing and the worker moves on.
- The winning worker starts the task through its (co-located) NodeAgent and runs it for its
  duration.

Worker queueing delay is the time the winning reservation waited; it is the long tail of
sampling under load (seed 001 §III). The worker calls its NodeAgent locally (no network hop),
through :class:`LocalTransport`.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections import Counter

import numpy as np

from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.domain import errors, wire
from cellbed.domain import wire_checks_megha as check
from cellbed.domain.validate import MAX_CLOCK_SKEW_S
from cellbed.controller.megha.alloc import AllocClock, record
from cellbed.metrics.rows import AllocationRow
from cellbed.controller.megha.lm_wire import task_request, vm_spec
from cellbed.policy.megha.match import EPS, HostBits
from cellbed.runtime.rpc import handles_errors
from cellbed.runtime.transport import _InProcContext
from cellbed.v1 import megha_pb2 as meghapb, megha_pb2_grpc as meghapbg, node_pb2 as npb

log = logging.getLogger(__name__)


class LocalTransport:
    """Calls co-located servicers directly (no network delay): a worker and its NodeAgent."""

    def __init__(self, servicers: dict[str, object], name: str = "local") -> None:
        self.servicers = servicers
        self.name = name

    async def request(self, target: str, method: str, msg, timeout: float = 10.0):
        service, _, rpc = method.partition("/")
        fn = getattr(self.servicers.get(service), rpc, None)
        if fn is None:
            raise errors.CellbedError(f"{target} {method}: unimplemented locally")
        return await asyncio.wait_for(fn(msg, _InProcContext(self.name)), timeout)


@dataclasses.dataclass
class Reservation:
    scheduler: str
    task: str
    cpu: float
    mem: float
    probe_comm: float      # one-way probe time, s
    arrived: float         # unix s


class SamplingWorker:
    """The node side: a FIFO reservation queue and late binding."""

    def __init__(self, host: str, transport, clock, node=None) -> None:
        self.host = host
        self.transport, self.clock = transport, clock
        self.node = node or transport             # how to reach the co-located NodeAgent
        self.queue: collections.deque[Reservation] = collections.deque()
        self.cap_cpu = self.cap_mem = 0.0
        self.used_cpu = self.used_mem = 0.0
        self.running: dict[str, tuple[float, float]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._bg: set[asyncio.Task] = set()
        self.counters: Counter = Counter()

    async def start(self) -> None:
        st = (await self.node.request(self.host, "NodeAgent/GetHostState", npb.GetHostStateRequest())).state
        self.cap_cpu, self.cap_mem = st.capacity.cpu_cores, float(st.capacity.mem_mib)
        for vm in (await self.node.request(self.host, "NodeAgent/ListVms", npb.ListVmsRequest())).vms:
            s = vm.spec                           # load already there (a warm cell) counts as used
            cpu = s.req_cpu_cores or (s.vcpus or 1) * s.workload.cpu_load
            self.running[s.name] = (cpu, float(s.mem_mib))
            self.used_cpu += cpu
            self.used_mem += s.mem_mib
        self._task = asyncio.create_task(self._serve(), name=f"{self.host}-sampling")

    async def stop(self) -> None:
        for t in [self._task, *self._bg]:
            if t is not None:
                t.cancel()
        await asyncio.gather(*[t for t in [self._task, *self._bg] if t is not None], return_exceptions=True)

    def probe(self, req: meghapb.ProbeRequest) -> int:
        now = self.clock.now()
        ahead = len(self.queue)
        self.queue.append(Reservation(req.scheduler, req.task, req.request.cpu_cores,
                                      float(req.request.mem_mib), max(0.0, now - req.sent_unix_s), now))
        self.counters["probes"] += 1
        self._wake.set()
        return ahead

    async def place_direct(self, task: meghapb.MeghaTask) -> None:
        """Start a task here outside any scheduler (a warm model cell at t=0)."""
        cpu, mem = task_request(task)
        now = self.clock.now()
        r = Reservation("", task.name, cpu, mem, 0.0, now)
        if not self._fits(r):
            raise errors.FailedPrecondition(f"{self.host}: {task.name} does not fit")
        self.used_cpu += cpu
        self.used_mem += mem
        await self._launch(r, task, now, 0.0)

    # --- a cell that changes under it (a trace replayed on a model cell) ----------------------
    def set_capacity(self, cpu: float, mem: float) -> list[str]:
        """The node's capacity is now (cpu cores, mem MiB) (0, 0: it left the cell). Returns the
        running tasks that no longer fit, newest first: the caller stops them."""
        self.cap_cpu, self.cap_mem = float(cpu), float(mem)
        over, c, m = [], self.used_cpu, self.used_mem
        for name in reversed(list(self.running)):
            if c <= self.cap_cpu + EPS and m <= self.cap_mem + EPS:
                break
            over.append(name)
            c, m = c - self.running[name][0], m - self.running[name][1]
        self._wake.set()
        return over

    def resize_task(self, name: str, cpu: float, mem: float) -> bool:
        """A running task's request becomes (cpu, mem) if the node has the room (True)."""
        if name not in self.running:
            raise errors.NotFound(f"task {name!r} does not run on {self.host}")
        oc, om = self.running[name]
        if self.used_cpu - oc + cpu > self.cap_cpu + EPS or self.used_mem - om + mem > self.cap_mem + EPS:
            return False
        self.running[name] = (float(cpu), float(mem))
        self.used_cpu += cpu - oc
        self.used_mem += mem - om
        return True

    async def stop_task(self, name: str) -> None:
        """Stop a running task now (its node left, or shrank); NotFound if it does not run here."""
        if name not in self.running:
            raise errors.NotFound(f"task {name!r} does not run on {self.host}")
        await self._finish(name)

    def _fits(self, r: Reservation) -> bool:
        return self.used_cpu + r.cpu <= self.cap_cpu + EPS and self.used_mem + r.mem <= self.cap_mem + EPS

    async def _serve(self) -> None:
        while True:
            if not self.queue or not self._fits(self.queue[0]):
                self._wake.clear()
                await self._wake.wait()
                continue
            r = self.queue.popleft()
            self.used_cpu += r.cpu                # held while claiming
            self.used_mem += r.mem
            sent = self.clock.now()
            try:
                resp = await self.transport.request(r.scheduler, "SamplingScheduler/ClaimTask", meghapb.ClaimTaskRequest(
                    worker=self.host, task=r.task, sent_unix_s=sent, worker_queue_ms=(sent - r.arrived) * 1000,
                    probe_comm_ms=r.probe_comm * 1000), timeout=10.0)
            except errors.CellbedError as e:
                log.debug("%s: claim of %s failed: %s", self.host, r.task, e)
                resp = meghapb.ClaimTaskResponse(granted=False)
            if not resp.granted:
                self.used_cpu -= r.cpu
                self.used_mem -= r.mem
                self.counters["claims_refused"] += 1
                continue
            self.counters["claims_granted"] += 1
            claim_rtt = self.clock.now() - sent
            await self._launch(r, resp.task, sent, claim_rtt)

    async def _launch(self, r: Reservation, task: meghapb.MeghaTask, claim_sent: float, claim_rtt: float) -> None:
        cpu, mem = task_request(task)
        if (cpu, mem) != (r.cpu, r.mem):          # its request changed after the probe (update_task)
            self.used_cpu += cpu - r.cpu
            self.used_mem += mem - r.mem
            r.cpu, r.mem = cpu, mem
        sent = self.clock.now()
        try:
            rep = await self.node.request(self.host, "NodeAgent/StartVm", npb.StartVmRequest(spec=vm_spec(task)),
                                          timeout=180.0)
        except errors.CellbedError as e:
            self.used_cpu -= r.cpu
            self.used_mem -= r.mem
            self.counters["start_failures"] += 1
            await self._report(r.scheduler, meghapb.TaskEvent(name=task.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                          task=task, detail=f"StartVm on {self.host}: {e}"))
            return
        vm = rep.vm
        start = vm.created_unix_s if vm.created_unix_s >= sent else sent
        self.running[task.name] = (r.cpu, r.mem)
        timing = meghapb.LmTiming(comm_in_ms=r.probe_comm * 1000, queue_ms=0.0,
                              processing_ms=max(0.0, sent - claim_sent - claim_rtt) * 1000,
                              comm_node_ms=(claim_rtt + max(0.0, start - sent)) * 1000,
                              worker_queue_ms=(claim_sent - r.arrived) * 1000,
                              boot_ms=vm.boot_to_workload_s * 1000, start_unix_s=start)
        await self._report(r.scheduler, meghapb.TaskEvent(name=task.name, kind=meghapb.TASK_EVENT_KIND_STARTED,
                                                      placement=meghapb.Placement(host=self.host), timing=timing,
                                                      unix_s=start))
        if task.duration_s > 0:
            self.clock.call_later(task.duration_s, lambda: self._spawn(self._finish(task.name)))

    def _spawn(self, coro) -> None:
        t = asyncio.create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    async def _report(self, scheduler: str, ev: meghapb.TaskEvent) -> None:
        if not scheduler:
            return
        try:
            await self.transport.request(scheduler, "SamplingScheduler/ReportStart", meghapb.ReportStartRequest(event=ev),
                                         timeout=10.0)
        except errors.CellbedError as e:
            log.warning("%s: report of %s to %s failed: %s", self.host, ev.name, scheduler, e)

    async def _finish(self, name: str) -> None:
        if name not in self.running:
            return                                # stopped already (stop_task)
        try:
            await self.node.request(self.host, "NodeAgent/StopVm", npb.StopVmRequest(name=name), timeout=60.0)
        except errors.NotFound:
            pass
        cpu, mem = self.running.pop(name, (0.0, 0.0))
        self.used_cpu -= cpu
        self.used_mem -= mem
        self.counters["finished"] += 1
        self._wake.set()


class SamplingScheduler:
    """The scheduler side: choose d random eligible nodes, probe them, bind late."""

    def __init__(self, name: str, transport, clock, rng: np.random.Generator, *, hosts: list[str],
                 cap_cpu, cap_mem, attributes, probes: int = 2, probe=None,
                 frontend: str = "sampling") -> None:
        self.name = name
        self.transport, self.clock, self.rng = transport, clock, rng
        self.hosts = list(hosts)
        self.cap_cpu = np.asarray(cap_cpu, dtype=float)
        self.cap_mem = np.asarray(cap_mem, dtype=float)
        self.bits = HostBits(attributes)
        self.d = probes
        self.probe = probe          # the probe stage (M5): which eligible nodes to probe; uniform without one
        self.frontend = frontend
        self.tasks: dict[str, tuple[meghapb.MeghaTask, AllocClock]] = {}
        self.unbound: set[str] = set()
        self.records: list[AllocationRow] = []
        self.record_listeners: list = []
        self.counters: Counter = Counter()
        self.unprobed: set[str] = set()         # unbound tasks no node could hold when they were probed
        self._lock = asyncio.Lock()
        self._bg: set[asyncio.Task] = set()

    async def submit(self, task: meghapb.MeghaTask) -> None:
        now = self.clock.now()
        task.arrival_unix_s = now
        clk = AllocClock(arrival=now, queued_at=now)
        self.tasks[task.name] = (task, clk)
        self.unbound.add(task.name)
        await self._probe(task, clk)

    async def _probe(self, task: meghapb.MeghaTask, clk: AllocClock) -> None:
        """Choose d random eligible nodes and probe them; a task no node can hold waits unprobed."""
        async with self._lock:                  # one decision at a time, like a GM
            t0 = self.clock.now()
            clk.dequeue(t0)
            cpu, mem = task_request(task)
            mask = self.bits.mask(wire.constraints_from_pb(task.constraints))
            mask &= (self.cap_cpu >= cpu - EPS) & (self.cap_mem >= mem - EPS)
            eligible = np.flatnonzero(mask)
            await self.clock.charge("sampling_decision")
            clk.proc += self.clock.now() - t0
        if not eligible.size:
            self.counters["unplaceable"] += 1
            self.unprobed.add(task.name)
            return
        if self.probe is None:
            picks = self.rng.choice(eligible, size=min(self.d, eligible.size), replace=False)
        else:
            try:
                picks = eligible[np.asarray(self.probe(int(eligible.size), self.d, self.rng), dtype=np.int64)]
            except PolicyFailed:      # counted by the guard: not probed now, tried again like an unplaceable task
                self.counters["policy_refused"] += 1
                self.unprobed.add(task.name)
                return
        sent = self.clock.now()
        req = dict(scheduler=self.name, task=task.name, request=wire.resources(cpu, mem), sent_unix_s=sent)
        self.counters["probes"] += len(picks)
        results = await asyncio.gather(*(self.transport.request(self.hosts[i], "SamplingWorker/Probe",
                                                                meghapb.ProbeRequest(**req), timeout=10.0)
                                         for i in picks), return_exceptions=True)
        if all(isinstance(r, BaseException) for r in results):
            self.counters["probe_failures"] += 1

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """An unbound task's request, priority and constraints are now *task*'s (the workers
        holding its probes launch it with them); False once a worker has claimed it."""
        if task.name not in self.unbound:
            return False
        t, _ = self.tasks[task.name]
        t.request.CopyFrom(task.request)
        t.priority = task.priority
        del t.constraints[:]
        t.constraints.extend(task.constraints)
        self.counters["task_updates"] += 1
        if task.name in self.unprobed:          # perhaps some node can hold it now
            self._reprobe(task.name)
        return True

    def _reprobe(self, name: str) -> None:
        self.unprobed.discard(name)
        job = asyncio.ensure_future(self._probe(*self.tasks[name]))
        self._bg.add(job)
        job.add_done_callback(self._bg.discard)

    def set_host(self, host: str, cpu: float, mem: float, attributes=None) -> None:
        """A node's capacity (0, 0: it left) or attributes changed: probes go only where a task
        fits, and tasks no node could hold are probed again."""
        i = self.hosts.index(host)
        self.cap_cpu[i], self.cap_mem[i] = float(cpu), float(mem)
        if attributes is not None:
            attrs = list(self.bits.attributes)
            attrs[i] = dict(attributes)
            self.bits = HostBits(attrs)
        for name in sorted(self.unprobed):
            self._reprobe(name)

    def claim(self, req: meghapb.ClaimTaskRequest) -> meghapb.ClaimTaskResponse:
        item = self.tasks.get(req.task)
        if req.task not in self.unbound or item is None:
            self.counters["claims_refused"] += 1
            return meghapb.ClaimTaskResponse(granted=False)
        self.unbound.discard(req.task)
        self.counters["claims_granted"] += 1
        return meghapb.ClaimTaskResponse(granted=True, task=item[0])

    def report(self, ev: meghapb.TaskEvent) -> None:
        item = self.tasks.pop(ev.name, None)
        self.unbound.discard(ev.name)      # an ended task is claimable no more (a claim of it was INTERNAL)
        if item is None:
            return
        task, clk = item
        if ev.kind != meghapb.TASK_EVENT_KIND_STARTED:
            self.counters["start_failures"] += 1
            return
        tm = ev.timing
        start = max(tm.start_unix_s, clk.arrival)   # a worker's clock behind the scheduler's: at the arrival
        rec = record(task.name, task.user, self.frontend, clk, start, ev.placement.host,
                     lm_proc=tm.processing_ms / 1000, comm=(tm.comm_in_ms + tm.comm_node_ms) / 1000,
                     wq=tm.worker_queue_ms / 1000, boot=tm.boot_ms / 1000)
        self.records.append(rec)
        for fn in self.record_listeners:
            fn(rec)

    def pending(self) -> list[str]:
        return list(self.tasks)


class SamplingWorkerServicer(meghapbg.SamplingWorkerServicer):
    def __init__(self, agent: SamplingWorker) -> None:
        self.agent = agent

    @handles_errors
    async def Probe(self, request, context):
        a = self.agent
        check.probe(request, a.clock.now(), MAX_CLOCK_SKEW_S)
        r = request.request
        if r.cpu_cores > a.cap_cpu + EPS or r.mem_mib > a.cap_mem + EPS:   # it could never start: the queue
            raise errors.InvalidArgument(                                  # would stop at it for good
                f"request=({r.cpu_cores:g} cores, {r.mem_mib:g} MiB) is out of range: allowed up to this worker's "
                f"capacity ({a.cap_cpu:g} cores, {a.cap_mem:g} MiB)", reason="out_of_range")
        return meghapb.ProbeResponse(queue_length=self.agent.probe(request))


class SamplingSchedulerServicer(meghapbg.SamplingSchedulerServicer):
    def __init__(self, agent: SamplingScheduler) -> None:
        self.agent = agent

    @handles_errors
    async def ClaimTask(self, request, context):
        check.claim_task(request, self.agent.clock.now(), MAX_CLOCK_SKEW_S)
        return self.agent.claim(request)

    @handles_errors
    async def ReportStart(self, request, context):
        check.report_start(request, self.agent.clock.now(), MAX_CLOCK_SKEW_S)
        self.agent.report(request.event)
        return meghapb.ReportStartResponse()
