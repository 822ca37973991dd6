"""Immutable, timestamped workload events (DESIGN §10.1, digest §C.2).

Everything that changes the cell is one of the ten event types below.  Both the
synthetic generator (:mod:`cellbed.workload.generator`) and the Google
cluster-data 2011 reader (:mod:`cellbed.workload.trace`) emit them, as one
stream ordered by ``time_us``; the experiment runner consumes that stream.

Conventions
-----------
- Time is an integer number of microseconds.  The trace reader keeps the trace's
  own clock (µs since 600 s before the trace start, digest §E.1); the generator
  starts at ``GeneratorConfig.start_us`` (600 s by default, like the trace).
- Resources are normalised like GCD-2011: 1.0 is the largest machine's CPU (or
  memory) capacity (digest §C.6).
- A task is named by ``(job_id, task_index)``; ``task_key`` returns that pair.
- Priorities are 0–11 (digest §E.1) and fall into three bands: free 0–1,
  middle 2–8, production 9–11.  ``band`` is derived from ``priority``, so the
  two can never disagree.
- Events are frozen dataclasses with ``__slots__``.  Only cheap validation is
  done (priority range, non-negative requests) because usage events are on the
  generator's hot path.

Within one timestamp, producers keep this order (the trace reader's table
order, which the generator follows too):

1. machine events (``AddNode``, ``UpdateNodeTotalResources``, ``RemoveNode``);
2. node attribute events;
3. task life-cycle events (``AddTask``, ``UpdateTaskRequiredResources``,
   ``UpdateTaskConstraints``, ``RemoveTask``), in source order;
4. ``UpdateTaskUsedResources``, only for tasks alive after step 3.

:func:`merge` keeps each input's order and breaks ties between inputs by
argument position.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass
from typing import Iterable, Iterator

from cellbed.domain.constraints import AttrValue, Constraint, ConstraintOp, constraints_match

__all__ = [
    "MAX_PRIORITY",
    "AttrValue",
    "Band",
    "band_of",
    "ConstraintOp",
    "Constraint",
    "constraints_match",
    "EndReason",
    "WorkloadEvent",
    "TaskEvent",
    "NodeEvent",
    "AddTask",
    "UpdateTaskRequiredResources",
    "UpdateTaskUsedResources",
    "UpdateTaskConstraints",
    "RemoveTask",
    "AddNode",
    "UpdateNodeTotalResources",
    "AddNodeAttributes",
    "RemoveNodeAttributes",
    "RemoveNode",
    "merge",
    "check_ordered",
]

#: Highest task priority in GCD-2011 (digest §E.1: priorities 0–11).
MAX_PRIORITY = 11

class Band(enum.IntEnum):
    """Priority band (digest §E.6): free 0–1, middle 2–8, production 9–11."""

    FREE = 0
    MIDDLE = 1
    PRODUCTION = 2


def band_of(priority: int) -> Band:
    """Band of a GCD priority; raises ValueError outside 0–11."""
    if not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be in 0..{MAX_PRIORITY}, got {priority}")
    if priority <= 1:
        return Band.FREE
    if priority <= 8:
        return Band.MIDDLE
    return Band.PRODUCTION


class EndReason(enum.IntEnum):
    """Why a task ended; values are the GCD-2011 task event-type codes (digest §E.2)."""

    EVICT = 2
    FAIL = 3
    FINISH = 4
    KILL = 5
    LOST = 6


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    """Base of all events: an immutable change to the cell at ``time_us``."""

    time_us: int


@dataclass(frozen=True, slots=True)
class TaskEvent(WorkloadEvent):
    """An event about one task, named by ``(job_id, task_index)``."""

    job_id: int
    task_index: int

    @property
    def task_key(self) -> tuple[int, int]:
        return (self.job_id, self.task_index)


@dataclass(frozen=True, slots=True)
class NodeEvent(WorkloadEvent):
    """An event about one node (GCD machine ID)."""

    node_id: int


@dataclass(frozen=True, slots=True)
class AddTask(TaskEvent):
    """A task became eligible to run (GCD SUBMIT).

    Carries its initial requirements and constraints.  Requests are normalised
    (digest §C.6); ``scheduling_class`` is 0–3 or None if unknown.
    """

    user: str
    priority: int
    scheduling_class: int | None
    cpu_request: float
    mem_request: float
    disk_request: float = 0.0
    constraints: tuple[Constraint, ...] = ()
    different_machines: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.priority <= MAX_PRIORITY:
            raise ValueError(f"AddTask.priority must be in 0..{MAX_PRIORITY}, got {self.priority}")
        if self.cpu_request < 0 or self.mem_request < 0 or self.disk_request < 0:
            raise ValueError(
                "AddTask requests must be >= 0, got "
                f"cpu={self.cpu_request} mem={self.mem_request} disk={self.disk_request}"
            )

    @property
    def band(self) -> Band:
        return band_of(self.priority)


@dataclass(frozen=True, slots=True)
class UpdateTaskRequiredResources(TaskEvent):
    """Requirements changed (GCD UPDATE_PENDING / UPDATE_RUNNING)."""

    priority: int
    scheduling_class: int | None
    cpu_request: float
    mem_request: float
    disk_request: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.priority <= MAX_PRIORITY:
            raise ValueError(
                f"UpdateTaskRequiredResources.priority must be in 0..{MAX_PRIORITY}, got {self.priority}"
            )

    @property
    def band(self) -> Band:
        return band_of(self.priority)


@dataclass(frozen=True, slots=True)
class UpdateTaskUsedResources(TaskEvent):
    """Measured usage over ``[start_us, end_us]`` (one GCD task_usage record).

    Emitted at ``time_us == end_us``: a measurement is known only once its
    window has closed.  ``cpu_rate`` is the window's mean CPU (GCD column 6),
    ``sampled_cpu`` one random 1-s sample inside it (column 20, the
    "instantaneous" usage of digest §B.2), ``max_cpu`` column 14;
    ``canonical_memory`` (column 7), ``assigned_memory`` (8) and
    ``max_memory`` (11).  Any of them may be None when the source left it empty.
    ``machine_id`` is the trace's machine, or None for generated workloads
    (the scheduler under test does the placing).
    """

    machine_id: int | None
    start_us: int
    end_us: int
    cpu_rate: float | None
    canonical_memory: float | None
    assigned_memory: float | None = None
    max_memory: float | None = None
    max_cpu: float | None = None
    sampled_cpu: float | None = None


@dataclass(frozen=True, slots=True)
class UpdateTaskConstraints(TaskEvent):
    """The task's placement constraints are now exactly ``constraints`` (replace, not add)."""

    constraints: tuple[Constraint, ...]


@dataclass(frozen=True, slots=True)
class RemoveTask(TaskEvent):
    """The task ended (GCD EVICT, FAIL, FINISH, KILL or LOST)."""

    reason: EndReason


@dataclass(frozen=True, slots=True)
class AddNode(NodeEvent):
    """A node joined the cell with normalised capacity ``cpu``/``mem``."""

    cpu: float
    mem: float
    platform: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateNodeTotalResources(NodeEvent):
    """A node's total capacity changed (GCD machine UPDATE)."""

    cpu: float
    mem: float
    platform: str | None = None


@dataclass(frozen=True, slots=True)
class AddNodeAttributes(NodeEvent):
    """Attributes added or updated, as sorted ``(name, value)`` pairs."""

    attributes: tuple[tuple[str, AttrValue], ...]

    def as_dict(self) -> dict[str, AttrValue]:
        return dict(self.attributes)


@dataclass(frozen=True, slots=True)
class RemoveNodeAttributes(NodeEvent):
    """Attributes removed from the node."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RemoveNode(NodeEvent):
    """The node left the cell (maintenance, failure or removal)."""


def check_ordered(stream: Iterable[WorkloadEvent], name: str = "stream") -> Iterator[WorkloadEvent]:
    """Pass events through, raising ValueError if ``time_us`` ever decreases."""
    last = None
    for ev in stream:
        t = ev.time_us
        if last is not None and t < last:
            raise ValueError(f"{name} is not time-ordered: {t} after {last} ({type(ev).__name__})")
        last = t
        yield ev


def _time_of(ev: WorkloadEvent) -> int:
    return ev.time_us


def merge(*streams: Iterable[WorkloadEvent]) -> Iterator[WorkloadEvent]:
    """Merge several time-ordered streams into one time-ordered stream.

    Lazy (``heapq.merge``), so nothing is materialised.  The tiebreak is
    stable: events with the same ``time_us`` come out in the order of the
    ``streams`` arguments, and each stream keeps its own internal order.  An
    input that goes back in time raises ValueError.
    """
    checked = [check_ordered(s, f"stream {i}") for i, s in enumerate(streams)]
    return heapq.merge(*checked, key=_time_of)
