"""Placement front-ends behind one interface, so a run picks one by name (DESIGN §2):
``megha`` (GMs/LMs), ``central`` (Megha with 1 GM × 1 LM), ``sampling`` (Sparrow-style) and
``masb`` (a random Broker Agent places with SIAS: BrokerAgent.allocate, the MASB issue's).

A front-end accepts tasks with ``submit`` and reports each task's allocation (the four parts
of seed 001 eq. 2) to its record listeners when the task starts. ``unstarted`` lists what
was accepted and has not started (pending at the end of a run).
"""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Callable, Protocol

import numpy as np

from cellbed.domain import errors, wire
from cellbed.controller.megha.alloc import AllocClock, record
from cellbed.metrics.rows import AllocationRow
from cellbed.controller.megha.gm import GlobalMaster
from cellbed.controller.megha.gm_task import QUEUED, STARTING
from cellbed.controller.megha.lm_wire import task_request, vm_spec
from cellbed.controller.megha.sampling import SamplingScheduler
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.v1 import masb_pb2 as masbpb

FRONTEND_NAMES = ("megha", "central", "sampling", "masb")


class Frontend(Protocol):
    name: str

    async def submit(self, task: meghapb.MeghaTask) -> None:
        """Accept a task (raises the project's errors on bad input); placement is asynchronous."""

    def on_record(self, fn: Callable[[AllocationRow], None]) -> None:
        """Call *fn* with each task's allocation record when the task starts."""

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """A waiting task's request and constraints change; False if it is not waiting."""

    def unstarted(self) -> list[tuple[str, str, float, int]]:
        """(task, user, arrival unix s, attempts) of every accepted task not started."""

    def counters(self) -> dict[str, int]:
        """Front-end counters (placements, inconsistencies, preemptions, probes...)."""


class MeghaFrontend:
    """Tasks go to the GM that serves their user's queue (directly: arrival = queue insertion)."""

    def __init__(self, gms: dict[str, GlobalMaster], name: str = "megha") -> None:
        self.name = name
        self.gms = gms
        self._route = {u: q.gm for g in gms.values() for u, q in g.queue_cfg.items()}

    async def submit(self, task: meghapb.MeghaTask) -> None:
        gm = self._route.get(task.user)
        if gm is None:
            raise errors.NotFound(f"user {task.user!r} has no queue: users are {', '.join(sorted(self._route))}")
        await self.gms[gm].submit(meghapb.SubmitRequest(task=task))

    def on_record(self, fn) -> None:
        for g in self.gms.values():
            g.record_listeners.append(fn)

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """The queued task *task.name* now has *task*'s request and constraints (False when it
        is not waiting at its GM)."""
        gm = self._route.get(task.user)
        return gm is not None and self.gms[gm].update_task(task)

    def unstarted(self) -> list[tuple[str, str, float, int]]:
        return [(t.name, t.user, t.clk.arrival, t.clk.attempts) for g in self.gms.values() for t in g.tasks.values()
                if t.allocation is None and t.state in (QUEUED, STARTING)]

    def counters(self) -> dict[str, int]:
        c: Counter = Counter()
        for g in self.gms.values():
            c.update(g.counters)
        return dict(c)


class SamplingFrontend:
    def __init__(self, schedulers: list[SamplingScheduler], name: str = "sampling") -> None:
        self.name = name
        self.schedulers = schedulers
        self._rr: dict[str, int] = {}

    async def submit(self, task: meghapb.MeghaTask) -> None:
        i = self._rr.setdefault(task.user, len(self._rr) % len(self.schedulers))
        await self.schedulers[i].submit(task)

    def on_record(self, fn) -> None:
        for s in self.schedulers:
            s.record_listeners.append(fn)

    def update_task(self, task: meghapb.MeghaTask) -> bool:
        """The unbound task *task.name* now has *task*'s request and constraints (False when a
        worker has already claimed it)."""
        return any(s.update_task(task) for s in self.schedulers)

    def unstarted(self) -> list[tuple[str, str, float, int]]:
        return [(t.name, t.user, clk.arrival, clk.attempts) for s in self.schedulers for t, clk in s.tasks.values()]

    def counters(self) -> dict[str, int]:
        c: Counter = Counter()
        for s in self.schedulers:
            c.update(s.counters)
        return dict(c)


class MasbFrontend:
    """Initial allocation by a random Broker Agent (BrokerAgent.AllocateTask with launch).

    The broker reports no breakdown of its time: the client-side time from arrival to the
    reply counts as processing, except the one-way time to the node, taken from the node's
    receive stamp. The front-end stops each task after its duration (StopVm)."""

    def __init__(self, transport, clock, brokers: list[str], rng: np.random.Generator, name: str = "masb") -> None:
        self._mpb = masbpb
        self.name = name
        self.transport, self.clock, self.rng = transport, clock, rng
        self.brokers = list(brokers)
        self._listeners: list = []
        self._pending: dict[str, tuple[str, float]] = {}
        self._counters: Counter = Counter()
        self._bg: set[asyncio.Task] = set()

    async def submit(self, task: meghapb.MeghaTask) -> None:
        now = self.clock.now()
        task.arrival_unix_s = now
        self._pending[task.name] = (task.user, now)
        t = asyncio.create_task(self._allocate(task, now))
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    async def _allocate(self, task: meghapb.MeghaTask, arrival: float) -> None:
        m = self._mpb
        cpu, mem = task_request(task)
        info = m.TaskInfo(name=task.name, requested=wire.resources(cpu, mem), used=wire.resources(cpu, mem),
                          constraints=task.constraints, production=task.production, priority=task.priority,
                          mem_mib=mem)
        ba = self.brokers[int(self.rng.integers(len(self.brokers)))]
        clk = AllocClock(arrival=arrival, queued_at=arrival)
        try:
            rep = await self.transport.request(ba, "BrokerAgent/AllocateTask", m.AllocateTaskRequest(
                task=info, spec=vm_spec(task), launch=True), timeout=200.0)
        except errors.CellbedError as e:
            self._counters["allocation_failures"] += 1
            self._counters[f"failed_{type(e).__name__}"] += 1
            return
        done = self.clock.now()
        clk.proc = done - arrival
        self._pending.pop(task.name, None)
        self._counters["placed"] += 1
        rec = record(task.name, task.user, self.name, clk, done, rep.host)
        for fn in self._listeners:
            fn(rec)
        if task.duration_s > 0:
            await self.clock.sleep(task.duration_s)
            try:
                await self.transport.request(rep.host, "NodeAgent/StopVm", npb.StopVmRequest(name=task.name),
                                             timeout=60.0)
            except errors.CellbedError:
                pass

    def on_record(self, fn) -> None:
        self._listeners.append(fn)

    def unstarted(self) -> list[tuple[str, str, float, int]]:
        return [(n, u, a, 0) for n, (u, a) in self._pending.items()]

    def counters(self) -> dict[str, int]:
        return dict(self._counters)
