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

GlobalMaster composes its parts and answers for them:
- LmLinks (gm_links): which instance of each LM to ask, over the transport;
- TaskTable (gm_table): the tasks, the user queues (their order of service) and the queue store;
- ViewKeeper (gm_view): bootstrap and the LMs' states into the View;
- TaskEvents (gm_events): the LMs' task events and the allocation records;
- Placer (gm_place): the scheduling loop: match, ask the LM, park, unsure outcomes, fairness;
- Intake (gm_submit): submit and task updates; Recovery (gm_recover): a restart's queue.
"""
from __future__ import annotations

import asyncio
import random
import collections
import logging
from collections import Counter

from cellbed.controller.megha import gm_show
from cellbed.controller.megha.gm_events import TaskEvents
from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_place import Placer
from cellbed.controller.megha.gm_recover import Recovery
from cellbed.controller.megha.gm_submit import Intake
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.gm_task import GmTask
from cellbed.controller.megha.gm_view import ViewKeeper
from cellbed.controller.megha.lm_wire import state_topic
from cellbed.controller.megha.params import GmParams
from cellbed.controller.megha.policies import GmPolicies
from cellbed.runtime.explain import OFF, ExplainLog
from cellbed.controller.megha.queues import QueueStore, UserQueues
from cellbed.domain import errors
from cellbed.domain.vm import NAME_RE
from cellbed.metrics.rows import AllocationRow
from cellbed.policy.megha import fairness
from cellbed.policy.megha.view import View
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class GlobalMaster:
    def __init__(self, name: str, transport, clock, *, lms: dict[str, list[str]],
                 queues: list[fairness.QueueConfig], store: QueueStore, cell: str = "cell",
                 params: GmParams = GmParams(), frontend: str = "megha",
                 known_attributes: tuple[str, ...] = (), policies: GmPolicies | None = None,
                 rng: random.Random | None = None, explain: ExplainLog = OFF) -> None:
        """*known_attributes*: the cell's attribute vocabulary, on top of the attributes the hosts
        report (a constraint may name an attribute that no host has right now)."""
        if not NAME_RE.fullmatch(name) or len(name) > 12:
            raise errors.InvalidArgument(f"GM name {name!r}: allowed [a-z0-9][a-z0-9-]{{0,11}} (it prefixes task ids)")
        self.name = name
        self.clock = clock
        self.queue_cfg = {q.user: q for q in queues}
        self.shares = {q.user: q.share for q in queues}
        self.my_users = [q.user for q in queues if q.gm == name]
        self.store = store
        self.cell = cell
        self.params = params.validate()
        self.frontend = frontend
        self.known_attributes = frozenset(known_attributes)
        pol = policies or GmPolicies()
        rng = rng or random.Random(0)
        self.view = View(name, list(lms), pol.allocation, rng)
        self.records: collections.deque[AllocationRow] = collections.deque(maxlen=self.params.records_kept or None)
        self.record_listeners: list = []
        self.counters: Counter = Counter()
        self.per_user: dict[str, Counter] = {u: Counter() for u in self.shares}
        self.ready = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        p, c = self.params, self.counters
        self._links = LmLinks(transport, lms, c, p.request_timeout_s)
        self._table = TaskTable(name, store, self.my_users, pol.task_order, rng)       # the queue order
        self._keeper = ViewKeeper(name, self.view, self._links, self._table, clock, p, c, self.shares, self.my_users)
        self._events = TaskEvents(name, self._table, self._links, clock, p, c, self.per_user, self.my_users,
                                  frontend, self.records, self.record_listeners)
        self._placer = Placer(name, self.view, self._keeper, self._links, self._table, self._events, clock, p, c,
                              self.per_user, self.shares, pol.preemption, explain)
        self._intake = Intake(name, self.view, self._links, self._table, clock, p, c, self.queue_cfg,
                              self.known_attributes)
        self._recovery = Recovery(name, self._links, self._table, clock, c)

    # --- what the GM holds ---------------------------------------------------------------------
    @property
    def transport(self):
        return self._links.transport

    @transport.setter
    def transport(self, transport) -> None:
        self._links.transport = transport

    @property
    def tasks(self) -> dict[str, GmTask]:
        return self._table.tasks

    @property
    def done(self) -> collections.OrderedDict[str, GmTask]:
        return self._table.done

    @property
    def queues(self) -> UserQueues:
        return self._table.queues

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self, subscribe: bool = True) -> None:
        self._intake.begin(self.clock.now())
        if subscribe:
            self._links.subscribe(state_topic(self.cell), self.on_state, meghapb.LmState)
        await asyncio.gather(*(self._keeper.bootstrap(lm) for lm in self.view.order))
        await self._recovery.recover()
        self._tasks += [asyncio.create_task(self._placer.serve(), name=f"{self.name}-serve"),
                        asyncio.create_task(self._retry_timer(), name=f"{self.name}-retry")]
        if self.params.lost_launch_check_s:
            self._tasks.append(asyncio.create_task(self._events.lost_launch_watch(),
                                                   name=f"{self.name}-lost-launches"))
        self.ready.set()
        log.info("GM %s: serving %s; %d LM(s) in view; %d task(s) recovered", self.name,
                 ", ".join(self.my_users) or "no queue", len(self.view.ready), len(self._table))

    async def stop(self) -> None:
        pending = self._tasks + self._keeper.fetches()
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()

    async def _retry_timer(self) -> None:
        while True:
            await self.clock.sleep(self.params.retry_period_s)
            self._table.unpark()

    # --- requests --------------------------------------------------------------------------------
    async def submit(self, req: meghapb.SubmitRequest) -> meghapb.TaskStatus:
        return await self._intake.submit(req)

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """See Intake.update_task."""
        return self._intake.update_task(task)

    async def wait(self, gt: GmTask, wait_s: float) -> None:
        await self._table.wait(gt, wait_s)

    def find(self, name: str) -> GmTask:
        return self._table.find(name)

    def status(self, gt: GmTask, position: bool = True) -> meghapb.TaskStatus:
        return self._table.status(gt, position)

    async def remote_status(self, name: str) -> meghapb.TaskStatus:
        """A task this GM does not know (it placed it before a restart): ask the LMs."""
        return await self._recovery.remote_status(name)

    def report_events(self, req: meghapb.ReportTaskEventsRequest) -> int:
        if not self.ready.is_set():
            raise errors.Unavailable(f"GM {self.name} is recovering its queues; resend the events")
        return self._events.report(req)

    def on_state(self, topic: str, st: meghapb.LmState) -> None:
        """An LM's periodic state (the MQTT handler): see ViewKeeper.on_state."""
        self._keeper.on_state(topic, st)

    # --- what cellctl shows --------------------------------------------------------------------------
    def get_view(self) -> meghapb.GetViewResponse:
        return gm_show.view_pb(self.name, self.view, self._links, self.counters, self.clock.now())

    def list_queues(self) -> meghapb.ListQueuesResponse:
        q = self._table.queues
        return gm_show.queues_pb(self.name, self.view, self.queue_cfg, {u: q.length(u) for u in self.my_users},
                                 self.per_user)
