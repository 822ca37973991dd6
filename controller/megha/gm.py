"""The Global Master (seed 001 §IV): user queues served round-robin, an eventually consistent
view of every LM, the match (internal partitions, then external ones with a repartition),
fair shares with preemption under contention, and each task's allocation time.

Transport, clock and RNG are injected; nothing here calls time, asyncio.sleep or random.

The GM holds no state that cannot be rebuilt (§IV-D):
- its view comes from the LMs' periodic updates (and the state piggy-backed on every reply);
  at start it also asks each LM once, so it need not wait a whole update period;
- accepted tasks live in the queue store until an LM accepts them; a restarted GM reloads
  them, asks the LMs which of them they already hold (FindTasks), and queues the rest;
- task events (started, preempted, failed) are resent by the LMs until acknowledged.

One task is decided at a time, and the GM waits for the LM's answer before the next one, as
the paper's prototype does (synchronous REST); this is what makes a single GM (``central``)
the bottleneck under load, and more GMs add throughput.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import math
from collections import Counter

from cellbed.domain import errors, wire
from cellbed.policy.megha import fairness
from cellbed.controller.megha.alloc import AllocClock
from cellbed.metrics.rows import AllocationRow
from cellbed.controller.megha.lm_wire import state_topic, task_request
from cellbed.controller.megha.params import GmParams
from cellbed.controller.megha.queues import QueueStore, UserQueues
from cellbed.policy.megha.view import View
from cellbed.domain.vm import NAME_RE
from cellbed.v1 import megha_pb2 as meghapb
from cellbed.domain.constraints import Constraint
from cellbed.controller.megha.gm_task import FINISHED, QUEUED, REJECTED, RUNNING, GmTask
from cellbed.controller.megha.gm_events import EventsMixin
from cellbed.controller.megha.gm_view import ViewMixin
from cellbed.controller.megha.gm_place import PlaceMixin

log = logging.getLogger(__name__)

class GlobalMaster(PlaceMixin, ViewMixin, EventsMixin):
    def __init__(self, name: str, transport, clock, *, lms: dict[str, list[str]],
                 queues: list[fairness.QueueConfig], store: QueueStore, cell: str = "cell",
                 params: GmParams = GmParams(), frontend: str = "megha",
                 known_attributes: tuple[str, ...] = ()) -> None:
        """*known_attributes*: the cell's attribute vocabulary, on top of the attributes the hosts
        report (a constraint may name an attribute that no host has right now)."""
        if not NAME_RE.fullmatch(name) or len(name) > 12:
            raise errors.InvalidArgument(f"GM name {name!r}: allowed [a-z0-9][a-z0-9-]{{0,11}} (it prefixes task ids)")
        self.name = name
        self.transport, self.clock = transport, clock
        self.lm_instances = {lm: list(inst) for lm, inst in lms.items()}
        self._active = {lm: 0 for lm in lms}
        self.queue_cfg = {q.user: q for q in queues}
        self.shares = {q.user: q.share for q in queues}
        self.my_users = [q.user for q in queues if q.gm == name]
        self.store = store
        self.cell = cell
        self.params = params.validate()
        self.frontend = frontend
        self.known_attributes = frozenset(known_attributes)
        self.view = View(name, list(lms))
        self.queues = UserQueues(self.my_users)
        self.tasks: dict[str, GmTask] = {}
        self.done: collections.OrderedDict[str, GmTask] = collections.OrderedDict()
        self.records: collections.deque[AllocationRow] = collections.deque(maxlen=self.params.records_kept or None)
        self.record_listeners: list = []
        self.counters: Counter = Counter()
        self.per_user: dict[str, Counter] = {u: Counter() for u in self.shares}
        self._work = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._fetching: dict[str, asyncio.Task] = {}
        self._seq = 0
        self._incarnation = ""
        self._gen = 0                       # bumped by every view change
        self._memo: dict[tuple, list[tuple[float, float]]] = {}
        self._memo_gen = -1
        self.ready = asyncio.Event()

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self, subscribe: bool = True) -> None:
        self._incarnation = _base36(int(self.clock.now() * 1000))[-6:]
        if subscribe:
            self.transport.subscribe(state_topic(self.cell), self.on_state, meghapb.LmState)
        await asyncio.gather(*(self._bootstrap(lm) for lm in self.view.order))
        await self._recover()
        self._tasks += [asyncio.create_task(self._serve(), name=f"{self.name}-serve"),
                        asyncio.create_task(self._retry_timer(), name=f"{self.name}-retry")]
        if self.params.lost_launch_check_s:
            self._tasks.append(asyncio.create_task(self._lost_launch_watch(), name=f"{self.name}-lost-launches"))
        self.ready.set()
        log.info("GM %s: serving %s; %d LM(s) in view; %d task(s) recovered", self.name,
                 ", ".join(self.my_users) or "no queue", len(self.view.ready), len(self.queues))

    async def stop(self) -> None:
        for t in self._tasks + list(self._fetching.values()):
            t.cancel()
        await asyncio.gather(*self._tasks, *self._fetching.values(), return_exceptions=True)
        self._tasks.clear()

    async def _retry_timer(self) -> None:
        while True:
            await self.clock.sleep(self.params.retry_period_s)
            if self.queues.unpark():
                self._work.set()

    # --- submit ---------------------------------------------------------------------------------
    def _validate(self, t: meghapb.MeghaTask) -> tuple[tuple[Constraint, ...], float, float]:
        if not self.view.ready:
            raise errors.Unavailable(f"GM {self.name} has no LM state yet (no update from "
                                     f"{', '.join(self.view.order)}); retry shortly")
        if t.name and not NAME_RE.fullmatch(t.name):
            raise errors.InvalidArgument(f"task.name={t.name!r} is invalid: allowed [a-z0-9][a-z0-9-]{{0,30}}")
        cpu, mem = t.request.cpu_cores, t.request.mem_mib
        big_c, big_m, hc, hm = self.view.largest_host()
        if not (math.isfinite(cpu) and 0 < cpu <= big_c + 1e-9):
            raise errors.InvalidArgument(f"task.request.cpu_cores={cpu!r} is out of range: allowed (0, {big_c:g}] "
                                         f"cores (the largest host, {hc}, has {big_c:g})")
        if not (math.isfinite(mem) and 0 < mem <= big_m + 1e-9):
            raise errors.InvalidArgument(f"task.request.mem_mib={mem!r} is out of range: allowed (0, {big_m:g}] "
                                         f"MiB (the largest host, {hm}, has {big_m:g})")
        if not (math.isfinite(t.duration_s) and t.duration_s >= 0):
            raise errors.InvalidArgument(f"task.duration_s={t.duration_s!r} is out of range: allowed ≥ 0 s (0 = until stopped)")
        if t.priority > 11:
            raise errors.InvalidArgument(f"task.priority={t.priority} is out of range: allowed 0..11")
        cons = wire.constraints_from_pb(t.constraints)
        known = self.view.known_attributes() | self.known_attributes
        unknown = sorted({c.attribute for c in cons} - known)
        if unknown:
            shown = ", ".join(sorted(known)[:30]) + (" …" if len(known) > 30 else "")
            raise errors.InvalidArgument(f"constraint attribute(s) {', '.join(unknown)} unknown: the cell's hosts have "
                                         f"{len(known)} attribute(s): {shown or 'none'}")
        return cons, cpu, float(math.ceil(mem - 1e-9))

    def _new_task(self, t: meghapb.MeghaTask, arrival: float, now: float) -> GmTask:
        cons = wire.constraints_from_pb(t.constraints)
        cpu, mem = task_request(t)
        gt = GmTask(t, cons, cpu, mem, AllocClock(arrival=arrival, queued_at=now))
        self.tasks[t.name] = gt
        return gt

    def _next_name(self) -> str:
        while True:
            self._seq += 1
            name = f"{self.name}-{self._incarnation}-{self._seq}"
            if name not in self.tasks and name not in self.done:
                return name

    async def submit(self, req: meghapb.SubmitRequest) -> meghapb.TaskStatus:
        t = meghapb.MeghaTask()
        t.CopyFrom(req.task)
        if not t.user:
            raise errors.InvalidArgument(f"task.user must be set: users with a queue are {', '.join(sorted(self.shares))}")
        q = self.queue_cfg.get(t.user)
        if q is None:
            raise errors.NotFound(f"user {t.user!r} has no queue: users are {', '.join(sorted(self.shares)) or 'none'}")
        if not (math.isfinite(req.wait_s) and 0 <= req.wait_s <= 3600):
            raise errors.InvalidArgument(f"wait_s={req.wait_s!r} is out of range: allowed 0..3600 s")
        if q.gm != self.name:
            self.counters["forwarded"] += 1
            return (await self.transport.request(q.gm, "GlobalMaster/Submit", req,
                                                 timeout=req.wait_s + self.params.request_timeout_s)).status
        self._validate(t)
        if not t.name:
            t.name = self._next_name()
        elif (t.name in self.tasks and self.tasks[t.name].state not in (FINISHED, REJECTED)) or t.name in self.done:
            raise errors.AlreadyExists(f"task {t.name!r} was already submitted (state "
                                       f"{meghapb.TaskState.Name((self.tasks.get(t.name) or self.done[t.name]).state)})")
        now = self.clock.now()
        t.arrival_unix_s = now
        gt = self._new_task(t, now, now)         # the name is taken from here on
        self.store.put(self.name, t.name, t.SerializeToString())
        try:
            await self.store.sync()              # accepted = durable (one fsync for concurrent submits)
        except BaseException:
            self.tasks.pop(t.name, None)
            self.store.remove(self.name, t.name)
            raise
        self.queues.push(t.user, t.name)
        self.counters["submitted"] += 1
        self._work.set()
        if req.wait_s > 0:
            await self.wait(gt, req.wait_s)
            return self.status(gt)
        st = self.status(gt, position=False)
        if gt.state == QUEUED:
            st.queue_position = len(self.queues.ready[gt.user])    # just pushed at the tail: O(1)
        return st

    async def wait(self, gt: GmTask, wait_s: float) -> None:
        if gt.state in (RUNNING, FINISHED, REJECTED):
            return
        fut = asyncio.get_running_loop().create_future()
        gt.waiters.append(fut)
        try:
            await asyncio.wait_for(fut, wait_s)
        except asyncio.TimeoutError:
            pass
        finally:
            if fut in gt.waiters:
                gt.waiters.remove(fut)

    def find(self, name: str) -> GmTask:
        gt = self.tasks.get(name) or self.done.get(name)
        if gt is None:
            raise errors.NotFound(f"task {name!r} is unknown to GM {self.name}")
        return gt

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """A queued task's request, priority or constraints are now *task*'s (a trace's
        UPDATE_PENDING or constraint update): it is matched with them from now on (its user's
        parked tasks are reconsidered). False when the task is not waiting here (it is being
        placed, runs, or is unknown). InvalidArgument when the new request cannot be placed in
        this cell at all (as at submit)."""
        gt = self.tasks.get(task.name)
        if gt is None or gt.state != QUEUED or gt.inflight:
            return False
        t = meghapb.MeghaTask()
        t.CopyFrom(gt.task)
        t.request.CopyFrom(task.request)
        t.priority = task.priority
        del t.constraints[:]
        t.constraints.extend(task.constraints)
        cons, _, _ = self._validate(t)
        gt.task, gt.constraints = t, cons
        gt.cpu, gt.mem = task_request(t)
        self.store.put(self.name, t.name, t.SerializeToString())
        self.counters["task_updates"] += 1
        if self.queues.unpark([gt.user]):
            self._work.set()
        return True

    async def remote_status(self, name: str) -> meghapb.TaskStatus:
        """A task this GM does not know (it placed it before a restart): ask the LMs."""
        for lm in self.view.order:
            try:
                r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                 meghapb.FindTasksRequest(names=[name]), timeout=self.params.request_timeout_s)
            except errors.CellbedError:
                continue
            for rec in r.found:
                return meghapb.TaskStatus(name=name, user=rec.task.user, state=rec.state, gm=self.name,
                                      placement=meghapb.Placement(lm=lm, host=rec.host, partition=rec.partition,
                                                              repartitioned=rec.logical),
                                      detail="placed before this GM restarted; allocation time unknown here")
        raise errors.NotFound(f"task {name!r} is unknown to GM {self.name} and to every LM")

    def status(self, gt: GmTask, position: bool = True) -> meghapb.TaskStatus:
        st = meghapb.TaskStatus(name=gt.name, user=gt.user, state=gt.state, gm=self.name, detail=gt.detail,
                            preemptions=gt.preemptions)
        if gt.placement is not None:
            st.placement.CopyFrom(gt.placement)
        if gt.allocation is not None:
            st.allocation.CopyFrom(gt.allocation)
        else:
            st.allocation.arrival_unix_s = gt.clk.arrival
            st.allocation.attempts = gt.clk.attempts
        if gt.state == QUEUED and position:
            st.queue_position = self.queues.position(gt.user, gt.name)
        return st

    # --- the scheduling loop ------------------------------------------------------------------------
    async def _serve(self) -> None:
        while True:
            nxt = self.queues.pop()
            if nxt is None:
                self._work.clear()
                await self._work.wait()
                continue
            gt = self.tasks.get(nxt[1])
            if gt is None or gt.state != QUEUED:
                continue
            try:
                await self._schedule(gt)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("GM %s: scheduling %s failed; requeued", self.name, gt.name)
                self._park(gt, "internal error; requeued")

    async def _schedule(self, gt: GmTask) -> None:
        gt.clk.dequeue(self.clock.now())
        if gt.unsure:
            res = await self._resolve_unsure(gt)
            if res == "placed":
                return
            if res == "unknown":
                self._park(gt, gt.detail)
                return
        if self._known_to_fail(gt):
            self.counters["skipped_known_to_fail"] += 1
            self._park(gt, gt.detail)
            return
        gen0 = self._gen
        choice = None
        for _ in range(1 + self.params.immediate_retries):
            t0 = self.clock.now()
            choice, scanned = self.view.match(gt.constraints, gt.cpu, gt.mem)
            await self.clock.charge("gm_match", scanned)
            gt.clk.proc += self.clock.now() - t0
            if choice is None:
                break
            res = await self._place(gt, choice.kind, choice.lm, host=choice.host)
            if res == "ok":
                return
            if res == "lm_down":
                break
        if choice is None and self.params.fairness and len(self.shares) > 1:
            if await self._preempt(gt):
                return
        if choice is None:
            if not gt.detail.endswith("no preemption"):
                gt.detail = self.view.why_not(gt.constraints, gt.cpu, gt.mem)
            if self._gen == gen0:
                self._remember_failure(gt)
        self._park(gt, gt.detail)

    # --- what cellctl shows --------------------------------------------------------------------------
    def get_view(self) -> meghapb.GetViewResponse:
        now = self.clock.now()
        out = meghapb.GetViewResponse(gm=self.name, counters=dict(self.counters))
        for lm in self.view.order:
            v = self.view[lm]
            lv = out.lms.add(lm=lm, instance=v.instance or self._target(lm), epoch=v.epoch, version=v.version,
                             staleness_s=now - v.updated_unix_s if v.updated_unix_s else -1.0,
                             full_staleness_s=now - v.full_unix_s if v.full_unix_s else -1.0, hosts=len(v.hosts))
            for gi, gm in enumerate(v.gms):
                m = v.owner == gi
                lv.partitions.add(gm=gm, internal=gm == self.name, nodes=int(m.sum()),
                                  logical_nodes=int(v.logical.get(gm, 0)),
                                  free=wire.resources(float(v.free_cpu[m].sum()), float(v.free_mem[m].sum())),
                                  capacity=wire.resources(float(v.total_cpu[m].sum()), float(v.total_mem[m].sum())))
        return out

    def list_queues(self) -> meghapb.ListQueuesResponse:
        cap_c, cap_m = self.view.capacity()
        usage = self.view.usage()
        out = meghapb.ListQueuesResponse(gm=self.name, capacity=wire.resources(cap_c, cap_m))
        for u in sorted(self.queue_cfg):
            q = self.queue_cfg[u]
            c, m, n = usage.get(u, (0.0, 0.0, 0))
            pu = self.per_user.get(u, Counter())
            out.queues.add(user=u, share=q.share, gm=q.gm, length=self.queues.length(u) if u in self.my_users else 0,
                           running=n, usage=wire.resources(c, m),
                           usage_share=fairness.dominant_share(c, m, cap_c, cap_m), preempted=pu["preempted"],
                           preemption_attempts=pu["preemption_attempts"], preemptions=pu["preemptions"],
                           repartitions=pu["repartitions"], placed=pu["placed"])
        return out


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out
