"""How the Megha model cell reads the workload stream (pure: events in, a plan out).

The Megha front-ends measure placement: a task is a request held for a duration. The stream is
read up to ``duration_s`` before the run into a :class:`StreamPlan`:

* **runs.** Every ``AddTask`` is a run: the first of a task is named ``t<job>-<index>``, a task
  the trace submits again after its run ended (EVICT, FAIL, LOST, KILL, then a GCD re-SUBMIT)
  gets ``t<job>-<index>-r<k>``. A run lasts from its arrival to its own ``RemoveTask`` (the
  evicted run counts, with its own duration; the new run has its own), or to the end of the
  run; each run's end time and reason are kept (``ends``), and the ends are counted by reason.
  Runs arriving at 0 s are the warm start.
* **task updates.** An ``UpdateTaskRequiredResources`` or ``UpdateTaskConstraints`` at the
  instant of its run's arrival is folded into the run (as the trace reader folds constraint
  rows carrying the submit time); a later one is an action at its time, carrying the run's
  whole request, priority and constraints after it.
* **machines.** Every machine the stream adds, in order of first appearance, with its
  capacity and attributes at 0 s (or at its first ``AddNode``), and whether it is there at
  0 s. Every later machine event is an action at its time carrying the machine's whole state
  after it (present or not, capacity, attributes); events of one instant on one machine
  become one action.

Requests are normalised like GCD (1.0 = the largest machine: ``CPU_SCALE_CORES`` cores,
``MEM_SCALE_MIB`` MiB).
"""
from __future__ import annotations

import collections
import dataclasses
import zlib
from typing import Iterable

from cellbed.domain import wire
from cellbed.domain.constraints import AttrValue, Constraint
from cellbed.domain.names import task_name
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.workload import events as ev

CPU_SCALE_CORES = 32.0
MEM_SCALE_MIB = 65536.0
"""GCD requests are normalised to the largest machine: 32 cores / 64 GiB."""

__all__ = ["CPU_SCALE_CORES", "MEM_SCALE_MIB", "Machine", "NodeState", "RunEnd", "StreamPlan", "TaskUpdate",
           "read_stream", "request_of"]


@dataclasses.dataclass
class Machine:
    """A machine of the stream as the cell starts with it (normalised capacity)."""

    node_id: int
    cpu: float
    mem: float
    attributes: dict[str, AttrValue]
    present: bool                     # in the cell at 0 s


@dataclasses.dataclass(frozen=True)
class NodeState:
    """A machine's whole state after the node events of one instant."""

    node_id: int
    present: bool
    cpu: float
    mem: float
    attributes: tuple[tuple[str, AttrValue], ...]


@dataclasses.dataclass(frozen=True)
class TaskUpdate:
    """A run's whole request after an update (normalised cpu and memory)."""

    run: str
    cpu: float
    mem: float
    priority: int
    constraints: tuple[Constraint, ...]
    kind: str                         # "request" or "constraints"


@dataclasses.dataclass(frozen=True)
class RunEnd:
    t: float
    reason: ev.EndReason


@dataclasses.dataclass
class StreamPlan:
    warm: list[tuple[float, meghapb.MeghaTask]]
    arrivals: list[tuple[float, meghapb.MeghaTask]]
    machines: list[Machine]
    actions: list[tuple[float, NodeState | TaskUpdate]]
    ends: dict[str, RunEnd]
    counts: collections.Counter


def request_of(cpu: float, mem: float) -> npb.Resources:
    """A normalised (cpu, mem) request in cores and MiB, as a Megha task holds it."""
    return wire.resources(max(1e-3, cpu * CPU_SCALE_CORES), max(1, int(round(mem * MEM_SCALE_MIB))))


@dataclasses.dataclass
class _Run:
    name: str
    t: float
    task: meghapb.MeghaTask           # as submitted (updates at its arrival instant folded in)
    cpu: float                        # the request now (normalised), after every update so far
    mem: float
    priority: int
    constraints: tuple[Constraint, ...]
    end: RunEnd | None = None


class _Reader:
    def __init__(self, duration_s: float, users: tuple[str, ...]) -> None:
        self.duration_s = duration_s
        self.users = users
        self.runs: list[_Run] = []
        self.current: dict[tuple[int, int], _Run] = {}
        self.count: collections.Counter = collections.Counter()        # runs per task
        self.machines: dict[int, Machine] = {}
        self.state: dict[int, list] = {}          # node -> [present, cpu, mem, attributes]
        self.actions: list[tuple[float, NodeState | TaskUpdate]] = []
        self.at_t: dict[int, int] = {}            # node -> index of its action at the current instant
        self.t_actions = None
        self.counts: collections.Counter = collections.Counter()

    # --- tasks ---------------------------------------------------------------------------------
    def add(self, t: float, e: ev.AddTask) -> None:
        k = self.count[e.task_key]
        self.count[e.task_key] += 1
        base = task_name(e.job_id, e.task_index)
        u = self.users[zlib.crc32(e.user.encode()) % len(self.users)]      # stable across processes
        task = meghapb.MeghaTask(name=base if k == 0 else f"{base}-r{k}", user=u,
                                 request=request_of(e.cpu_request, e.mem_request),
                                 constraints=wire.constraints_pb(e.constraints), workload=npb.Workload(cpu_load=0.0))
        r = _Run(task.name, t, task, e.cpu_request, e.mem_request, e.priority, tuple(e.constraints))
        if k:
            self.counts["resubmissions"] += 1
        self.runs.append(r)
        self.current[e.task_key] = r

    def remove(self, t: float, e: ev.RemoveTask) -> None:
        r = self.current.get(e.task_key)
        if r is None:
            return
        r.end = RunEnd(t, e.reason)
        self.counts[f"tasks_ended_{e.reason.name.lower()}"] += 1
        del self.current[e.task_key]

    def update(self, t: float, e: ev.UpdateTaskRequiredResources | ev.UpdateTaskConstraints) -> None:
        r = self.current.get(e.task_key)
        if r is None:
            self.counts["update_unknown_task"] += 1
            return
        if isinstance(e, ev.UpdateTaskConstraints):
            r.constraints, kind = tuple(e.constraints), "constraints"
        else:
            r.cpu, r.mem, r.priority, kind = e.cpu_request, e.mem_request, e.priority, "request"
        if t == r.t:                  # at its arrival: the run is submitted with it
            r.task.request.CopyFrom(request_of(r.cpu, r.mem))
            del r.task.constraints[:]
            r.task.constraints.extend(wire.constraints_pb(r.constraints))
            self.counts[f"{kind}_updates_folded"] += 1
            return
        self.counts[f"{kind}_updates"] += 1
        self.actions.append((t, TaskUpdate(r.name, r.cpu, r.mem, r.priority, r.constraints, kind)))

    # --- machines ------------------------------------------------------------------------------
    def node(self, t: float, e: ev.NodeEvent) -> None:
        st = self.state.get(e.node_id)
        if st is None:
            if not isinstance(e, ev.AddNode):
                self.counts["node_event_unknown_machine"] += 1
                return
            st = self.state[e.node_id] = [False, e.cpu, e.mem, {}]
            self.machines[e.node_id] = Machine(e.node_id, e.cpu, e.mem, {}, t == 0.0)
        if isinstance(e, (ev.AddNode, ev.UpdateNodeTotalResources)):
            st[0] = st[0] or isinstance(e, ev.AddNode)
            st[1], st[2] = e.cpu, e.mem
        elif isinstance(e, ev.RemoveNode):
            st[0] = False
        elif isinstance(e, ev.AddNodeAttributes):
            st[3].update(e.as_dict())
        elif isinstance(e, ev.RemoveNodeAttributes):
            for n in e.names:
                st[3].pop(n, None)
        if t == 0.0:
            m = self.machines[e.node_id]
            m.present, m.cpu, m.mem, m.attributes = st[0], st[1], st[2], dict(st[3])
            return
        self.counts[f"node_events_{type(e).__name__}"] += 1
        if self.t_actions != t:
            self.t_actions, self.at_t = t, {}
        s = NodeState(e.node_id, st[0], st[1], st[2], tuple(sorted(st[3].items(), key=lambda kv: kv[0])))
        i = self.at_t.get(e.node_id)
        if i is None:
            self.at_t[e.node_id] = len(self.actions)
            self.actions.append((t, s))
        else:
            self.actions[i] = (t, s)


def read_stream(events: Iterable[ev.WorkloadEvent], duration_s: float, users: tuple[str, ...]) -> StreamPlan:
    """The plan of the stream up to *duration_s* (see the module docstring); *users* are the
    cell's queues, each task's user mapped onto one of them by a stable hash."""
    rd = _Reader(duration_s, users)
    t0 = None
    for e in events:
        if t0 is None:
            t0 = e.time_us
        t = (e.time_us - t0) / 1e6
        if t > duration_s:
            break
        if isinstance(e, ev.AddTask):
            rd.add(t, e)
        elif isinstance(e, ev.RemoveTask):
            rd.remove(t, e)
        elif isinstance(e, (ev.UpdateTaskRequiredResources, ev.UpdateTaskConstraints)):
            rd.update(t, e)
        elif isinstance(e, ev.NodeEvent):
            rd.node(t, e)
    warm, arr = [], []
    ends = {}
    for r in rd.runs:
        r.task.duration_s = max(1e-3, r.end.t - r.t) if r.end is not None else 0.0    # 0: until the run ends
        (warm if r.t == 0.0 else arr).append((r.t, r.task))
        if r.end is not None:
            ends[r.name] = r.end
    rd.counts["runs"] = len(rd.runs)
    return StreamPlan(warm, arr, list(rd.machines.values()), rd.actions, ends, rd.counts)
