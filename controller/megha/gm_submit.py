"""How a task enters a GM: checked against the cell as the view knows it, named, made durable in
the queue store before Submit answers, and queued (or forwarded to the GM that serves its
user's queue). Also the change of a queued task's request (a trace's UPDATE_PENDING)."""
from __future__ import annotations

import math
from collections import Counter

from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.gm_task import QUEUED
from cellbed.controller.megha.lm_wire import task_request
from cellbed.controller.megha.params import GmParams
from cellbed.domain import errors, wire
from cellbed.domain.constraints import Constraint
from cellbed.domain.vm import NAME_RE
from cellbed.policy.megha import fairness
from cellbed.policy.megha.view import View
from cellbed.v1 import megha_pb2 as meghapb


class Intake:
    def __init__(self, name: str, view: View, links: LmLinks, table: TaskTable, clock, params: GmParams,
                 counters: Counter, queue_cfg: dict[str, fairness.QueueConfig],
                 known_attributes: frozenset[str]) -> None:
        self.name = name
        self._view = view
        self._links = links
        self._table = table
        self._clock = clock
        self._params = params
        self._counters = counters
        self._queue_cfg = queue_cfg
        self._known_attributes = known_attributes
        self._seq = 0
        self._incarnation = ""

    def begin(self, now: float) -> None:
        """A new incarnation of the GM (its start): the names it gives carry it."""
        self._incarnation = _base36(int(now * 1000))[-6:]

    def _next_name(self) -> str:
        while True:
            self._seq += 1
            name = f"{self.name}-{self._incarnation}-{self._seq}"
            if not self._table.taken(name):
                return name

    def _validate(self, t: meghapb.MeghaTask) -> tuple[tuple[Constraint, ...], float, float]:
        if not self._view.ready:
            raise errors.Unavailable(f"GM {self.name} has no LM state yet (no update from "
                                     f"{', '.join(self._view.order)}); retry shortly")
        if t.name and not NAME_RE.fullmatch(t.name):
            raise errors.InvalidArgument(f"task.name={t.name!r} is invalid: allowed [a-z0-9][a-z0-9-]{{0,30}}")
        cpu, mem = t.request.cpu_cores, t.request.mem_mib
        big_c, big_m, hc, hm = self._view.largest_host()
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
        known = self._view.known_attributes() | self._known_attributes
        unknown = sorted({c.attribute for c in cons} - known)
        if unknown:
            shown = ", ".join(sorted(known)[:30]) + (" …" if len(known) > 30 else "")
            raise errors.InvalidArgument(f"constraint attribute(s) {', '.join(unknown)} unknown: the cell's hosts have "
                                         f"{len(known)} attribute(s): {shown or 'none'}")
        return cons, cpu, float(math.ceil(mem - 1e-9))

    async def submit(self, req: meghapb.SubmitRequest) -> meghapb.TaskStatus:
        t = meghapb.MeghaTask()
        t.CopyFrom(req.task)
        users = ", ".join(sorted(self._queue_cfg))
        if not t.user:
            raise errors.InvalidArgument(f"task.user must be set: users with a queue are {users}")
        q = self._queue_cfg.get(t.user)
        if q is None:
            raise errors.NotFound(f"user {t.user!r} has no queue: users are {users or 'none'}")
        if not (math.isfinite(req.wait_s) and 0 <= req.wait_s <= 3600):
            raise errors.InvalidArgument(f"wait_s={req.wait_s!r} is out of range: allowed 0..3600 s")
        if q.gm != self.name:
            self._counters["forwarded"] += 1
            return (await self._links.forward(q.gm, "GlobalMaster/Submit", req,
                                              timeout=req.wait_s + self._params.request_timeout_s)).status
        self._validate(t)
        if not t.name:
            t.name = self._next_name()
        elif self._table.in_use(t.name):
            raise errors.AlreadyExists(f"task {t.name!r} was already submitted (state "
                                       f"{meghapb.TaskState.Name(self._table.find(t.name).state)})")
        now = self._clock.now()
        t.arrival_unix_s = now
        gt = self._table.new_task(t, now, now)         # the name is taken from here on
        self._table.persist(t)
        try:
            await self._table.sync()             # accepted = durable (one fsync for concurrent submits)
        except BaseException:
            self._table.drop(t.name)
            raise
        self._table.enqueue(gt)
        self._counters["submitted"] += 1
        self._table.signal()
        if req.wait_s > 0:
            await self._table.wait(gt, req.wait_s)
            return self._table.status(gt)
        st = self._table.status(gt, position=False)
        if gt.state == QUEUED:
            st.queue_position = self._table.ready_count(gt.user)    # just pushed at the tail: O(1)
        return st

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """A queued task's request, priority or constraints are now *task*'s (a trace's
        UPDATE_PENDING or constraint update): it is matched with them from now on (its user's
        parked tasks are reconsidered). False when the task is not waiting here (it is being
        placed, runs, or is unknown). InvalidArgument when the new request cannot be placed in
        this cell at all (as at submit)."""
        gt = self._table.get(task.name)
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
        self._table.persist(t)
        self._counters["task_updates"] += 1
        self._table.unpark([gt.user])
        return True


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out
