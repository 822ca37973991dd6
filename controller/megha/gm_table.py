"""The tasks a GM holds, its user queues and the queue store behind them (seed 001 §IV-C, IV-D).

A task is in ``tasks`` from its acceptance until it finishes or is rejected, then in ``done``
(the last 10 000). A queued task's name is in the user queues, ready or parked; the queue
store holds every accepted task until an LM accepts it, so a restarted GM loses none.
``signal`` wakes the scheduling loop, which takes the next task with ``pop``.
"""
from __future__ import annotations

import asyncio
import collections
import random
from typing import Callable

from cellbed.controller.megha.alloc import AllocClock
from cellbed.controller.megha.gm_task import FINISHED, QUEUED, REJECTED, RUNNING, GmTask
from cellbed.controller.megha.lm_wire import task_request
from cellbed.controller.megha.queues import QueueStore, UserQueues
from cellbed.domain import errors, wire
from cellbed.policy.api import QueuedTask
from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.v1 import megha_pb2 as meghapb

DONE_KEPT = 10_000


class TaskTable:
    def __init__(self, gm: str, store: QueueStore, users: list[str], order: Callable | None = None,
                 rng: random.Random | None = None) -> None:
        """The user queues serve round-robin across *users* and, within a user's queue, in the
        order of the ``task_order`` stage's key (*order*, with the GM's *rng*; FIFO without one);
        ``pop`` is the only place that asks them."""
        self.gm = gm
        self._order = order
        self._rng = rng or random.Random(0)
        self.queues = UserQueues(users, self._key if order is not None else None)
        self.tasks: dict[str, GmTask] = {}
        self.done: collections.OrderedDict[str, GmTask] = collections.OrderedDict()
        self._store = store
        self._work = asyncio.Event()

    def _key(self, user: str, name: str, seq: int) -> float:
        """A task's sort key as it enters its user's ready queue (stage task_order, T2)."""
        gt = self.tasks.get(name)
        if gt is None:          # not held (cannot happen for a queued task): last, in entry order
            return float("inf")
        t = gt.task
        qt = QueuedTask(name, user, seq, gt.clk.arrival, float(t.duration_s), (gt.cpu, gt.mem), int(t.priority),
                        bool(t.production), gt.clk.attempts)
        try:
            return float(self._order(qt, self._rng))
        except PolicyFailed:     # counted by the guard; the task is not lost: served last, in entry order
            return float("inf")

    # --- tasks --------------------------------------------------------------------------------------
    def new_task(self, t: meghapb.MeghaTask, arrival: float, now: float) -> GmTask:
        cons = wire.constraints_from_pb(t.constraints)
        cpu, mem = task_request(t)
        gt = GmTask(t, cons, cpu, mem, AllocClock(arrival=arrival, queued_at=now))
        self.tasks[t.name] = gt
        return gt

    def get(self, name: str) -> GmTask | None:
        """A task not finished yet."""
        return self.tasks.get(name)

    def find(self, name: str) -> GmTask:
        gt = self.tasks.get(name) or self.done.get(name)
        if gt is None:
            raise errors.NotFound(f"task {name!r} is unknown to GM {self.gm}")
        return gt

    def taken(self, name: str) -> bool:
        """Whether *name* names a task here, running or done."""
        return name in self.tasks or name in self.done

    def in_use(self, name: str) -> bool:
        """Whether a new task may not take *name*: a task by that name is held here (not finished
        or rejected) or done."""
        return (name in self.tasks and self.tasks[name].state not in (FINISHED, REJECTED)) or name in self.done

    def drop(self, name: str) -> None:
        """A task whose acceptance failed (its store write did not become durable)."""
        self.tasks.pop(name, None)
        self._store.remove(self.gm, name)

    def retire(self, gt: GmTask) -> None:
        self.tasks.pop(gt.name, None)
        self.done[gt.name] = gt
        while len(self.done) > DONE_KEPT:
            self.done.popitem(last=False)

    def readmit(self, gt: GmTask) -> None:
        """A task back in the queue (its LM preempted it or failed to start it): held, recorded
        in the store and pushed at the tail of its user's queue."""
        self.tasks[gt.name] = gt
        self.done.pop(gt.name, None)
        self._store.put(self.gm, gt.name, gt.task.SerializeToString())
        self.queues.push(gt.user, gt.name)

    # --- the queue store ----------------------------------------------------------------------------
    def persist(self, t: meghapb.MeghaTask) -> None:
        self._store.put(self.gm, t.name, t.SerializeToString())

    def unpersist(self, name: str) -> None:
        """An LM accepted the task (or it was rejected): it leaves the store for good."""
        self._store.remove(self.gm, name)

    async def sync(self) -> None:
        await self._store.sync()

    def load(self) -> list[tuple[str, bytes]]:
        return self._store.load(self.gm)

    # --- the user queues ----------------------------------------------------------------------------
    def enqueue(self, gt: GmTask) -> None:
        self.queues.push(gt.user, gt.name)

    def park(self, gt: GmTask) -> None:
        self.queues.park(gt.user, gt.name)

    def dequeue(self, gt: GmTask) -> None:
        self.queues.remove(gt.user, gt.name)

    def unpark(self, users=None) -> None:
        """Parked tasks (of *users*, default all) go back to their ready queue; the scheduling
        loop is woken if there were any."""
        if self.queues.unpark(users):
            self._work.set()

    def pop(self) -> tuple[str, str] | None:
        """The next (user, task name) to serve, in the queues' order."""
        return self.queues.pop()

    def signal(self) -> None:
        """Wake the scheduling loop."""
        self._work.set()

    async def idle(self) -> None:
        """Wait for the next ``signal`` (the scheduling loop, with nothing ready)."""
        self._work.clear()
        await self._work.wait()

    def ready_count(self, user: str) -> int:
        return len(self.queues.ready[user])

    def __len__(self) -> int:
        return len(self.queues)

    # --- what a client sees -------------------------------------------------------------------------
    def status(self, gt: GmTask, position: bool = True) -> meghapb.TaskStatus:
        st = meghapb.TaskStatus(name=gt.name, user=gt.user, state=gt.state, gm=self.gm, detail=gt.detail,
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

    @staticmethod
    async def wait(gt: GmTask, wait_s: float) -> None:
        """Until *gt* is woken (its state changed) or *wait_s* passed."""
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
