"""The Megha model cell acting on the stream's actions during a run (the mechanism; what the
actions are is :mod:`cellbed.model.megha_stream`'s pure plan):

* a machine leaves: its host leaves the cell (the ticks count one node fewer), its LM (or
  sampling worker and schedulers) sees capacity 0, and the runs on it stop. A run whose own
  end in the trace comes within ``END_WITH_HOST_S`` of the removal (the trace's EVICT, LOST,
  FAIL of it) ends there, with its host; any other run the model had placed there is *displaced*: it goes back to
  the front-end, as ``<name>-m<k>``, for what is left of its duration (``tasks_displaced``);
* a machine comes back, or changes capacity or attributes: its host follows (capacity in the
  LM and in its node agent; runs that no longer fit are displaced the same way). With the
  homogeneous cell (``megha.machines = "homogeneous"``, the generator) a machine's capacity
  and attributes stay the cell's own: only its joins and leaves apply;
* a run's request or constraints change: a run waiting at its GM (or sampling scheduler) is
  matched with the new ones; a placed run is resized on its host if the host has the room,
  and displaced with its new request if not; new constraints do not move a placed run.
"""
from __future__ import annotations

import asyncio
import collections

from cellbed.controller.megha.lm_wire import ACTIVE
from cellbed.domain import errors, wire
from cellbed.model.megha_stream import NodeState, StreamPlan, TaskUpdate, request_of
from cellbed.model.params import END_WITH_HOST_S
from cellbed.v1 import megha_pb2 as meghapb

RETRIES = 20
RETRY_S = 0.05
"""A run's update while it is between its GM and its LM (neither holds it) is tried again every
RETRY_S, RETRIES times."""


class StreamActions:
    """Applies *plan*'s actions to *front* at their times (seconds after *t0*, the run's start)."""

    def __init__(self, front, plan: StreamPlan, t0: float, duration_s: float) -> None:
        self.front, self.plan, self.t0, self.duration_s = front, plan, t0, duration_s
        self.clock = front.clock
        self.tasks: dict[str, meghapb.MeghaTask] = {t.name: t for _, t in plan.warm + plan.arrivals}
        self.moved: collections.Counter = collections.Counter()     # run -> displacements so far
        self.origin: dict[str, str] = {}                             # displaced run's name -> the run's
        self.alias: dict[str, str] = {}                              # run -> the name it runs under now
        self.counters: collections.Counter = collections.Counter()
        self._bg: set[asyncio.Task] = set()

    # --- the loop --------------------------------------------------------------------------------
    async def run(self) -> None:
        for t, a in self.plan.actions:
            dt = self.t0 + t - self.clock.monotonic()
            if dt > 0:
                await self.clock.sleep(dt)
            if isinstance(a, NodeState):
                self.node(a)
            else:
                self._spawn(self.update(a))

    async def cancel(self) -> None:
        """The run is over: what is still under way stops."""
        for t in list(self._bg):
            t.cancel()
        await asyncio.gather(*list(self._bg), return_exceptions=True)

    def _spawn(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    def now_s(self) -> float:
        return self.clock.monotonic() - self.t0

    # --- machines ---------------------------------------------------------------------------------
    def node(self, a: NodeState) -> None:
        f = self.front
        host = f.machine_host.get(a.node_id)
        if host is None:
            self.counters["node_events_unmapped"] += 1
            return
        stream = f.m.machines == "stream"
        if not a.present:
            cpu, mem, attrs = 0.0, 0.0, None
        elif stream:
            cpu, mem = f.stream_capacity(a.cpu, a.mem)
            attrs = dict(a.attributes)
        else:
            cpu, mem, attrs = f.m.node_cpu, f.m.node_mem_mib, None
        was_in = host in f.cell.hosts
        mh = f.all_hosts[host]
        if a.present:
            mh.agent.update_capacity(cpu, int(mem))
            if attrs is not None:
                mh.agent.update_attributes(set_=attrs, remove=[k for k in mh.agent.view().attributes if k not in attrs])
                f.attributes[host] = attrs
            f.cell.hosts[host] = mh
            self.counters["node_joins" if not was_in else "node_updates"] += 1
        elif was_in:
            del f.cell.hosts[host]
            self.counters["node_removals"] += 1
        f.capacity[host] = (cpu, mem)
        if f.workers:
            over = f.worker_for(host).set_capacity(cpu, mem)
            for s in f.schedulers:
                s.set_host(host, cpu, mem, attrs)
        else:
            over = f.lm_for(host).update_host(host, cpu, mem, attrs)
        for name in over:
            self._spawn(self.displace(name, host))

    # --- runs ---------------------------------------------------------------------------------------
    async def _stop(self, name: str, host: str) -> None:
        f = self.front
        if f.workers:
            await f.worker_for(host).stop_task(name)
        else:
            await f.lm_for(host).stop_task(name)

    async def displace(self, name: str, host: str) -> None:
        """Run *name* must leave *host*: it ends there if the trace ends it now, else it goes back
        to the front-end, as ``<run>-m<k>``, for the rest of its duration."""
        now = self.now_s()
        origin = self.origin.get(name, name)
        end = self.plan.ends.get(origin)
        try:
            await self._stop(name, host)
        except errors.NotFound:                 # it has just ended on its own
            return
        except errors.CellbedError:
            self.counters["stop_failures"] += 1
        if end is not None and end.t <= now + END_WITH_HOST_S:
            self.counters[f"ended_with_host_{end.reason.name.lower()}"] += 1
            return
        left = (end.t if end is not None else self.duration_s) - now
        if left <= 0:
            return
        self.moved[origin] += 1
        t = meghapb.MeghaTask()
        t.CopyFrom(self.tasks[origin])
        t.name, t.duration_s, t.arrival_unix_s = f"{origin}-m{self.moved[origin]}", left, 0.0
        self.origin[t.name] = origin
        self.alias[origin] = t.name
        self.counters["tasks_displaced"] += 1
        try:
            await self.front.submitter.submit(t)
        except errors.CellbedError as e:
            self.counters[f"displaced_rejected_{type(e).__name__}"] += 1

    async def update(self, u: TaskUpdate) -> None:
        """Run *u.run*'s request or constraints change (see the module docstring)."""
        t = self.tasks.get(u.run)
        if t is None:
            self.counters["update_unknown_run"] += 1
            return
        t.request.CopyFrom(request_of(u.cpu, u.mem))       # the run's own record: a displacement uses it
        del t.constraints[:]
        t.constraints.extend(wire.constraints_pb(u.constraints))
        for _ in range(RETRIES):
            name = self.alias.get(u.run, u.run)
            held = self._holder(name)
            if held is None:
                now = meghapb.MeghaTask()
                now.CopyFrom(t)
                now.name = name
                try:
                    if self.front.submitter.update_task(now):
                        self.counters[f"{u.kind}_updates_waiting"] += 1
                        return
                except errors.CellbedError as e:
                    self.counters[f"updates_rejected_{type(e).__name__}"] += 1
                    return
                await self.clock.sleep(RETRY_S)      # between its GM and its LM: try again
                continue
            host, resize = held
            if u.kind == "constraints":
                self.counters["constraints_updates_placed"] += 1     # a placed run stays where it is
            elif resize(name, t.request.cpu_cores, float(t.request.mem_mib)):
                self.counters["request_updates_resized"] += 1
            else:
                self.counters["request_updates_displaced"] += 1
                await self.displace(name, host)
            return
        self.counters["updates_not_applied"] += 1

    def _holder(self, name: str):
        """(host, resize function) of the LM or sampling worker holding run *name*; None while
        it waits for a placement (or is on its way to one)."""
        f = self.front
        for w in f.workers:
            if name in w.running:
                return w.host, w.resize_task
        for a in f.lms.values():
            if a.role == ACTIVE and a.cluster is not None and name in a.cluster.tasks:
                return a.cluster.hosts[a.cluster.tasks[name].host], a.resize_task
        return None
