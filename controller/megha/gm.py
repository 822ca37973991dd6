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
import dataclasses
import logging
import math
from collections import Counter

from cellbed.domain import errors, wire
from cellbed.policy.megha import fairness
from cellbed.controller.megha.alloc import AllocClock, AllocationRecord, record
from cellbed.controller.megha.lm import state_topic, task_request
from cellbed.controller.megha.params import GmParams
from cellbed.controller.megha.queues import QueueStore, UserQueues
from cellbed.policy.megha.view import View
from cellbed.domain.vm import NAME_RE
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import megha_pb2 as mpb, megha_pb2_grpc as mpbg
from cellbed.domain.constraints import Constraint

log = logging.getLogger(__name__)

QUEUED, STARTING, RUNNING = mpb.TASK_STATE_QUEUED, mpb.TASK_STATE_STARTING, mpb.TASK_STATE_RUNNING
FINISHED, REJECTED = mpb.TASK_STATE_FINISHED, mpb.TASK_STATE_REJECTED
_LM_DOWN = (errors.Unavailable, errors.FailedPrecondition, errors.DeadlineExceeded)


@dataclasses.dataclass
class GmTask:
    task: mpb.MeghaTask
    constraints: tuple[Constraint, ...]
    cpu: float
    mem: float
    clk: AllocClock
    state: int = QUEUED
    detail: str = ""
    placement: mpb.Placement | None = None
    allocation: mpb.AllocationTime | None = None
    preemptions: int = 0
    requeues: int = 0
    recovered: bool = False
    inflight: bool = False             # a request for it is out at an LM
    unsure: set = dataclasses.field(default_factory=set)   # LMs that may hold it (a request timed out)
    early: mpb.TaskEvent | None = None
    waiters: list = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def user(self) -> str:
        return self.task.user


class GlobalMaster:
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
        self.records: collections.deque[AllocationRecord] = collections.deque(maxlen=self.params.records_kept or None)
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
            self.transport.subscribe(state_topic(self.cell), self.on_state, mpb.LmState)
        await asyncio.gather(*(self._bootstrap(lm) for lm in self.view.order))
        await self._recover()
        self._tasks += [asyncio.create_task(self._serve(), name=f"{self.name}-serve"),
                        asyncio.create_task(self._retry_timer(), name=f"{self.name}-retry")]
        self.ready.set()
        log.info("GM %s: serving %s; %d LM(s) in view; %d task(s) recovered", self.name,
                 ", ".join(self.my_users) or "no queue", len(self.view.ready), len(self.queues))

    async def stop(self) -> None:
        for t in self._tasks + list(self._fetching.values()):
            t.cancel()
        await asyncio.gather(*self._tasks, *self._fetching.values(), return_exceptions=True)
        self._tasks.clear()

    def _target(self, lm: str) -> str:
        inst = self.lm_instances[lm]
        return inst[self._active[lm] % len(inst)]

    def _failover(self, lm: str) -> None:
        if len(self.lm_instances[lm]) > 1:
            self._active[lm] = (self._active[lm] + 1) % len(self.lm_instances[lm])
            self.counters["lm_failovers"] += 1

    async def _bootstrap(self, lm: str) -> None:
        """Ask an LM for its hosts and state once (best effort; updates will follow anyway)."""
        for _ in range(len(self.lm_instances[lm])):
            try:
                st = (await self.transport.request(self._target(lm), "LocalMaster/GetState", mpb.GetStateRequest(),
                                                   timeout=self.params.request_timeout_s)).state
            except errors.CellbedError as e:
                log.info("GM %s: no state from %s yet: %s", self.name, self._target(lm), e)
                self._failover(lm)
                continue
            if self.view[lm].apply(st) == "need_hosts":
                await self._fetch_hosts(lm, st.instance)
            return

    async def _fetch_hosts(self, lm: str, instance: str = "") -> None:
        target = instance if instance in self.lm_instances[lm] else self._target(lm)
        try:
            h = await self.transport.request(target, "LocalMaster/GetHosts", mpb.GetHostsRequest(),
                                             timeout=self.params.request_timeout_s)
        except errors.CellbedError as e:
            log.info("GM %s: GetHosts from %s failed: %s", self.name, target, e)
            return
        v = self.view[lm]
        v.set_hosts(h.digest, [x.name for x in h.hosts], [x.capacity.cpu_cores for x in h.hosts],
                    [x.capacity.mem_mib for x in h.hosts], [wire.attributes_from_pb(x.attributes) for x in h.hosts])
        pend, v.pending_full = v.pending_full, None
        if pend is not None and pend.hosts_digest == h.digest:
            self._apply(lm, pend)
        self.counters["hosts_fetched"] += 1

    async def _recover(self) -> None:
        """Reload accepted tasks from the store; those an LM already holds are not queued again."""
        items = self.store.load(self.name)
        if not items:
            return
        tasks = [mpb.MeghaTask.FromString(b) for _, b in items]
        held: dict[str, tuple[str, mpb.LmTaskRecord]] = {}
        names = [t.name for t in tasks]
        for lm in self.view.order:
            for _ in range(len(self.lm_instances[lm])):
                try:
                    r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                     mpb.FindTasksRequest(names=names),
                                                     timeout=self.params.request_timeout_s)
                    for rec in r.found:
                        held[rec.task.name] = (lm, rec)
                    break
                except errors.CellbedError as e:
                    log.warning("GM %s: recovery: FindTasks on %s failed: %s", self.name, self._target(lm), e)
                    self._failover(lm)
        now = self.clock.now()
        for t in tasks:
            gt = self._new_task(t, t.arrival_unix_s or now, now)
            gt.recovered = True
            found = held.get(t.name)
            if found is not None:
                lm, rec = found
                gt.state = RUNNING if rec.state == mpb.TASK_STATE_RUNNING else STARTING
                gt.placement = mpb.Placement(lm=lm, host=rec.host, partition=rec.partition,
                                             repartitioned=rec.logical)
                self.store.remove(self.name, t.name)
                self.counters["recovered_placed"] += 1
            else:
                self.queues.push(t.user, t.name)
                self.counters["recovered_queued"] += 1
        self._work.set()

    # --- view ---------------------------------------------------------------------------------
    def on_state(self, topic: str, st: mpb.LmState) -> None:
        if st.lm not in self.view.lms:
            self.counters["states_unknown_lm"] += 1
            return
        self.counters["states_received"] += 1
        self._apply(st.lm, st)

    def _apply(self, lm: str, st: mpb.LmState) -> None:
        v = self.view[lm]
        before_c = v.free_cpu.copy() if st.full and v.ready else None
        before_m = v.free_mem.copy() if before_c is not None else None
        usage_before = v.usage
        r = v.apply(st)
        if r == "applied":
            self._gen += 1
        if r == "need_hosts":
            if lm not in self._fetching or self._fetching[lm].done():
                self._fetching[lm] = asyncio.create_task(self._fetch_hosts(lm, st.instance))
            return
        if r != "applied":
            return
        if st.instance in self.lm_instances[lm]:
            self._active[lm] = self.lm_instances[lm].index(st.instance)
        if before_c is not None:
            freed = bool((v.free_cpu > before_c + 1e-9).any() or (v.free_mem > before_m + 1e-9).any())
        else:
            freed = bool(st.full)       # the first full state of this LM
        if freed:
            if self.queues.unpark():
                self._work.set()
        elif v.usage != usage_before and self.shares and self.params.fairness:
            under = self._users_under_share()
            if under and self.queues.unpark(under):
                self._work.set()

    def _users_under_share(self) -> list[str]:
        cap_c, cap_m = self.view.capacity()
        cons = fairness.consumption(self.view.usage(), cap_c, cap_m)
        return [u for u in self.my_users if cons.get(u, 0.0) < self.shares.get(u, 0.0)]

    async def _retry_timer(self) -> None:
        while True:
            await self.clock.sleep(self.params.retry_period_s)
            if self.queues.unpark():
                self._work.set()

    # --- submit ---------------------------------------------------------------------------------
    def _validate(self, t: mpb.MeghaTask) -> tuple[tuple[Constraint, ...], float, float]:
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

    def _new_task(self, t: mpb.MeghaTask, arrival: float, now: float) -> GmTask:
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

    async def submit(self, req: mpb.SubmitRequest) -> mpb.TaskStatus:
        t = mpb.MeghaTask()
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
                                       f"{mpb.TaskState.Name((self.tasks.get(t.name) or self.done[t.name]).state)})")
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

    async def remote_status(self, name: str) -> mpb.TaskStatus:
        """A task this GM does not know (it placed it before a restart): ask the LMs."""
        for lm in self.view.order:
            try:
                r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                 mpb.FindTasksRequest(names=[name]), timeout=self.params.request_timeout_s)
            except errors.CellbedError:
                continue
            for rec in r.found:
                return mpb.TaskStatus(name=name, user=rec.task.user, state=rec.state, gm=self.name,
                                      placement=mpb.Placement(lm=lm, host=rec.host, partition=rec.partition,
                                                              repartitioned=rec.logical),
                                      detail="placed before this GM restarted; allocation time unknown here")
        raise errors.NotFound(f"task {name!r} is unknown to GM {self.name} and to every LM")

    def status(self, gt: GmTask, position: bool = True) -> mpb.TaskStatus:
        st = mpb.TaskStatus(name=gt.name, user=gt.user, state=gt.state, gm=self.name, detail=gt.detail,
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

    def _known_to_fail(self, gt: GmTask) -> bool:
        """A task no smaller than one that just failed, with the same constraints and user, on the
        same view, fails too: park it without matching again (Borg-style equivalence classes)."""
        if self._memo_gen != self._gen:
            self._memo.clear()
            self._memo_gen = self._gen
            return False
        for c, m in self._memo.get((gt.constraints, gt.user), ()):
            if gt.cpu >= c - 1e-9 and gt.mem >= m - 1e-9:
                return True
        return False

    def _remember_failure(self, gt: GmTask) -> None:
        if self._memo_gen == self._gen:
            self._memo.setdefault((gt.constraints, gt.user), []).append((gt.cpu, gt.mem))

    async def _resolve_unsure(self, gt: GmTask) -> str:
        """A request to an LM timed out or broke: did the LM take the task? "placed", "free" (no LM
        that may hold it does) or "unknown" (one did not answer: keep waiting, never place it twice)."""
        for lm in sorted(gt.unsure):
            try:
                r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                 mpb.FindTasksRequest(names=[gt.name]),
                                                 timeout=self.params.request_timeout_s)
            except errors.CellbedError as e:
                gt.detail = f"waiting to learn whether LM {lm} took it: {e}"
                self._failover(lm)
                return "unknown"
            if r.found:
                rec = r.found[0]
                gt.unsure.clear()
                gt.state = RUNNING if rec.state == mpb.TASK_STATE_RUNNING else STARTING
                gt.placement = mpb.Placement(lm=lm, host=rec.host, partition=rec.partition, repartitioned=rec.logical)
                self.store.remove(self.name, gt.name)
                self.counters["found_after_timeout"] += 1
                return "placed"
            gt.unsure.discard(lm)
        return "free"

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

    def _park(self, gt: GmTask, detail: str) -> None:
        gt.state, gt.detail = QUEUED, detail
        gt.clk.requeue(self.clock.now())
        gt.requeues += 1
        self.queues.park(gt.user, gt.name)
        self.counters["requeued"] += 1

    async def _place(self, gt: GmTask, kind: str, lm: str, host: str = "", victim: str = "") -> str:
        """One request to an LM: "ok", "refused" (inconsistency; state applied) or "lm_down"."""
        now = self.clock.now()
        if kind == "launch":
            method, req = "Launch", mpb.LaunchRequest(task=gt.task, gm=self.name, host=host, sent_unix_s=now)
        elif kind == "repartition":
            method, req = "Repartition", mpb.RepartitionRequest(task=gt.task, gm=self.name, host=host, sent_unix_s=now)
        else:
            method, req = "Preempt", mpb.PreemptRequest(task=gt.task, gm=self.name, victim_user=victim, sent_unix_s=now)
        target = self._target(lm)
        self.counters[f"{kind}_requests"] += 1
        gt.inflight = True
        try:
            resp = await self.transport.request(target, f"LocalMaster/{method}", req,
                                                timeout=self.params.request_timeout_s)
        except _LM_DOWN as e:
            gt.inflight = False
            if not isinstance(e, errors.FailedPrecondition):   # a standby's refusal accepted nothing
                gt.unsure.add(lm)                               # the LM may have taken it: ask before placing elsewhere
            gt.clk.failed_attempt(self.clock.now() - now, 0.0, 0.0)
            gt.detail = f"LM {lm} ({target}) unavailable: {e}"
            self.counters["lm_unavailable"] += 1
            self._failover(lm)
            return "lm_down"
        except errors.CellbedError as e:   # a bug or a config mismatch between GM and LM
            gt.inflight = False
            gt.clk.failed_attempt(self.clock.now() - now, 0.0, 0.0)
            gt.detail = f"LM {lm} refused {method}: {e}"
            self.counters["lm_errors"] += 1
            log.warning("GM %s: %s %s on %s: %s", self.name, method, gt.name, target, e)
            return "lm_down"
        gt.inflight = False
        rtt = self.clock.now() - now
        if resp.HasField("state"):
            self._apply(lm, resp.state)
        if not resp.ok:
            tm = resp.timing
            gt.clk.failed_attempt(rtt, tm.queue_ms / 1000, tm.processing_ms / 1000)
            gt.detail = f"{lm}: {resp.detail}"
            self.counters[f"inconsistency_{mpb.Inconsistency.Name(resp.inconsistency).split('_', 1)[1].lower()}"] += 1
            return "refused"
        gt.state = STARTING
        gt.placement = resp.placement
        gt.detail = ""
        self.store.remove(self.name, gt.name)
        pu = self.per_user.setdefault(gt.user, Counter())
        if kind == "repartition" or resp.placement.repartitioned:
            self.counters["repartitions"] += 1
            pu["repartitions"] += 1
        if kind == "preempt":
            self.counters["preemptions"] += len(resp.placement.preempted)
            pu["preemptions"] += len(resp.placement.preempted)
        self.counters["placed"] += 1
        pu["placed"] += 1
        if gt.early is not None:
            ev, gt.early = gt.early, None
            if ev.placement.lm and ev.placement.lm != resp.placement.lm:
                # it started elsewhere meanwhile (a takeover reported a start this GM took for lost):
                # keep that one, stop this duplicate
                self.counters["duplicates_stopped"] += 1
                log.warning("GM %s: %s already runs on %s; stopping its duplicate on %s", self.name, gt.name,
                            ev.placement.host, resp.placement.host)
                asyncio.ensure_future(self._stop_duplicate(lm, gt.name))
            self._started(gt, ev)
        return "ok"

    async def _stop_duplicate(self, lm: str, name: str) -> None:
        try:
            await self.transport.request(self._target(lm), "LocalMaster/StopTask", mpb.StopTaskRequest(name=name),
                                         timeout=self.params.request_timeout_s)
        except errors.CellbedError as e:
            log.warning("GM %s: stopping the duplicate of %s on %s failed: %s", self.name, name, lm, e)

    async def _preempt(self, gt: GmTask) -> bool:
        """Algorithm 2: under contention, preempt the user with the largest share violation."""
        cap_c, cap_m = self.view.capacity()
        usage = self.view.usage()
        cons = fairness.consumption(usage, cap_c, cap_m)
        victims = fairness.victims(gt.user, self.shares, cons)
        if not victims:
            if cons.get(gt.user, 0.0) >= self.shares.get(gt.user, 0.0):
                gt.detail = (f"{self.view.why_not(gt.constraints, gt.cpu, gt.mem)}; {gt.user} uses "
                             f"{cons.get(gt.user, 0.0):.1%} ≥ its share {self.shares.get(gt.user, 0.0):.1%}: no preemption")
            return False
        pu = self.per_user.setdefault(gt.user, Counter())
        asked = 0
        for victim in victims:
            lms = [lm for lm in self.view.order if self.view[lm].usage.get(victim)]
            for lm in lms:
                if asked >= self.params.max_preempt_lms:
                    return False
                asked += 1
                pu["preemption_attempts"] += 1
                self.counters["preemption_attempts"] += 1
                await self.clock.charge("gm_preempt")
                res = await self._place(gt, "preempt", lm, victim=victim)
                if res == "ok":
                    return True
                self.counters["preemption_failures"] += 1
        return False

    # --- task events from the LMs ------------------------------------------------------------------------
    def report_events(self, req: mpb.ReportTaskEventsRequest) -> int:
        if not self.ready.is_set():
            raise errors.Unavailable(f"GM {self.name} is recovering its queues; resend the events")
        for ev in req.events:
            k = ev.kind
            gt = self.tasks.get(ev.name)
            if k == mpb.TASK_EVENT_KIND_STARTED:
                if gt is None and ev.task.name == ev.name and ev.task.user in self.my_users:
                    gt = self._new_task(ev.task, ev.task.arrival_unix_s or ev.unix_s, ev.unix_s)  # placed before
                    gt.state, gt.placement, gt.recovered = STARTING, ev.placement, True         # a restart
                    self.counters["started_unknown_rebuilt"] += 1
                if gt is None:
                    self.counters["events_unknown"] += 1
                elif gt.state == QUEUED and gt.inflight:
                    gt.early = ev          # the LM's reply has not been processed yet
                elif gt.state == QUEUED:   # placed after all (an LM answered UNAVAILABLE, then its standby
                    self.queues.remove(gt.user, gt.name)     # found the task running): not queued any more
                    self.store.remove(self.name, gt.name)
                    gt.placement = ev.placement
                    self._started(gt, ev)
                    self.counters["started_while_queued"] += 1
                elif gt.state == STARTING:
                    self._started(gt, ev)
            elif k == mpb.TASK_EVENT_KIND_FINISHED:
                if gt is not None and gt.state in (STARTING, RUNNING):
                    gt.state = FINISHED
                    gt.detail = ev.detail
                    self._retire(gt)
                self.counters["finished"] += 1
            elif k in (mpb.TASK_EVENT_KIND_PREEMPTED, mpb.TASK_EVENT_KIND_FAILED):
                self._requeue(gt, ev)
            elif k == mpb.TASK_EVENT_KIND_REJECTED:
                if gt is not None:
                    gt.state, gt.detail = REJECTED, ev.detail
                    self.store.remove(self.name, gt.name)
                    self._wake(gt)
                    self._retire(gt)
                self.counters["rejected"] += 1
        self._work.set()
        return len(req.events)

    def _retire(self, gt: GmTask) -> None:
        self.tasks.pop(gt.name, None)
        self.done[gt.name] = gt
        while len(self.done) > 10_000:
            self.done.popitem(last=False)

    def _wake(self, gt: GmTask) -> None:
        for f in gt.waiters:
            if not f.done():
                f.set_result(None)

    def _started(self, gt: GmTask, ev: mpb.TaskEvent) -> None:
        tm = ev.timing
        comm = (tm.comm_in_ms + tm.comm_node_ms) / 1000
        start = tm.start_unix_s or ev.unix_s
        clk = gt.clk
        measured = clk.fq + clk.proc + clk.comm + clk.wq + (tm.queue_ms + tm.processing_ms + tm.worker_queue_ms) / 1000 + comm
        # Time no interval measured (a GM restart; event-loop delays on a real cell) was spent
        # waiting in the framework: it counts as framework queueing, so eq. 1 = eq. 2 exactly.
        unaccounted = (start - clk.arrival) - measured
        if unaccounted > 0:
            clk.fq += unaccounted
        self.counters["unaccounted_ms"] += int(max(0.0, unaccounted) * 1000)
        rec = record(gt.name, gt.user, self.frontend, clk, start, ev.placement.host or gt.placement.host,
                     lm_queue=tm.queue_ms / 1000, lm_proc=tm.processing_ms / 1000, comm=comm,
                     wq=tm.worker_queue_ms / 1000, boot=tm.boot_ms / 1000, lm=ev.placement.lm,
                     repartitioned=ev.placement.repartitioned, preempted_others=len(ev.placement.preempted),
                     requeues=gt.requeues)
        gt.state = RUNNING
        gt.placement = ev.placement
        gt.allocation = mpb.AllocationTime(
            framework_queue_ms=rec.framework_queue_ms, processing_ms=rec.processing_ms,
            worker_queue_ms=rec.worker_queue_ms, communication_ms=rec.communication_ms, total_ms=rec.total_ms,
            boot_ms=rec.boot_ms, attempts=rec.attempts, arrival_unix_s=clk.arrival, start_unix_s=start)
        self.records.append(rec)
        for fn in self.record_listeners:
            fn(rec)
        self._wake(gt)

    def _requeue(self, gt: GmTask | None, ev: mpb.TaskEvent) -> None:
        preempted = ev.kind == mpb.TASK_EVENT_KIND_PREEMPTED
        if gt is None:
            if not ev.task.name or ev.task.user not in self.my_users:
                self.counters["events_unknown"] += 1
                return
            gt = self._new_task(ev.task, self.clock.now(), self.clock.now())
        elif gt.state == QUEUED:
            return                                  # a resent event: already requeued
        now = self.clock.now()
        gt.task.arrival_unix_s = now                # a new allocation starts now
        gt.clk = AllocClock(arrival=now, queued_at=now)
        gt.state, gt.placement, gt.allocation = QUEUED, None, None
        gt.detail = ev.detail
        if preempted:
            gt.preemptions += 1
            self.per_user.setdefault(gt.user, Counter())["preempted"] += 1
            self.counters["preempted"] += 1
        else:
            self.counters["launch_failures"] += 1
        self.tasks[gt.name] = gt
        self.done.pop(gt.name, None)
        self.store.put(self.name, gt.name, gt.task.SerializeToString())
        self.queues.push(gt.user, gt.name)

    # --- what cellctl shows --------------------------------------------------------------------------
    def get_view(self) -> mpb.GetViewResponse:
        now = self.clock.now()
        out = mpb.GetViewResponse(gm=self.name, counters=dict(self.counters))
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

    def list_queues(self) -> mpb.ListQueuesResponse:
        cap_c, cap_m = self.view.capacity()
        usage = self.view.usage()
        out = mpb.ListQueuesResponse(gm=self.name, capacity=wire.resources(cap_c, cap_m))
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


class GlobalMasterServicer(mpbg.GlobalMasterServicer):
    """Thin: translate, delegate."""

    def __init__(self, agent: GlobalMaster) -> None:
        self.agent = agent

    @handles_errors
    async def Submit(self, request, context):
        return mpb.SubmitResponse(status=await self.agent.submit(request))

    @handles_errors
    async def GetTask(self, request, context):
        if not request.name:
            raise errors.InvalidArgument("name must be set")
        if not (math.isfinite(request.wait_s) and 0 <= request.wait_s <= 3600):
            raise errors.InvalidArgument(f"wait_s={request.wait_s!r} is out of range: allowed 0..3600 s")
        try:
            gt = self.agent.find(request.name)
        except errors.NotFound:
            return mpb.GetTaskResponse(status=await self.agent.remote_status(request.name))
        if request.wait_s > 0:
            await self.agent.wait(gt, request.wait_s)
        return mpb.GetTaskResponse(status=self.agent.status(gt))

    @handles_errors
    async def GetView(self, request, context):
        return self.agent.get_view()

    @handles_errors
    async def ListQueues(self, request, context):
        return self.agent.list_queues()

    @handles_errors
    async def ReportTaskEvents(self, request, context):
        return mpb.ReportTaskEventsResponse(accepted=self.agent.report_events(request))
