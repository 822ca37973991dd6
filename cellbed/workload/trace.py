"""Google cluster-data 2011 (clusterdata-2011-2) reader and writer (DESIGN §10.3, digest §E.2).

Reader
------
:class:`TraceReader` streams the five tables ``machine_events``,
``machine_attributes``, ``task_events``, ``task_constraints`` and
``task_usage`` from ``<root>/<table>/part-NNNNN-of-MMMMM.csv[.gz]`` (no
header; column order exactly as in digest §E.2) and turns them into one
time-ordered stream of :mod:`~cellbed.workload.events`, the same types the
generator emits.  Only the live state (running machines, their attributes,
live tasks) is kept in memory.

Mapping (digest §C.3 Table I):

- machine ADD / REMOVE / UPDATE → ``AddNode`` / ``RemoveNode`` /
  ``UpdateNodeTotalResources``; attribute rows → ``AddNodeAttributes`` /
  ``RemoveNodeAttributes`` (consecutive rows with the same time, machine and
  deleted flag become one event).  A machine that is re-added gets its
  remembered attributes re-sent right after its ``AddNode``.
- task SUBMIT → ``AddTask``; SCHEDULE → nothing (placement is the scheduler's
  job; the trace's machine stays visible in usage records); EVICT, FAIL,
  FINISH, KILL, LOST → ``RemoveTask(reason)``; UPDATE_PENDING / UPDATE_RUNNING
  → ``UpdateTaskRequiredResources`` (empty fields keep their last value).  A
  re-submitted task (after EVICT, say) gets a new ``AddTask`` with the same
  ``(job_id, task_index)`` ([RECON] digest §C.3).
- constraint rows → the task's constraint set: folded into its ``AddTask``
  when they carry the task's submit time (the usual case), else
  ``UpdateTaskConstraints`` (consecutive rows with the same time and task form
  one set, which replaces the previous one).
- usage rows → ``UpdateTaskUsedResources`` at the record's **end** time (a
  measurement is known when its window closes).  Rows are re-ordered from the
  file's start-time order with a buffer of one record length.

Each table is kept in time order without losing rows before the tables are merged: a row that
comes after rows with a later time is put back in order if it is within
``TraceOptions.reorder_window_us`` of the latest time seen (usage rows: by start time), see
:mod:`~cellbed.workload.reorder`. A row further back than that is released at once with its
time raised to the last released one, and counted as ``late_rows``. The rows moved and the
largest distance are kept per table (:meth:`TraceReader.report`).

Within a timestamp, events follow the table order machine_events,
machine_attributes, task_events, task_constraints, task_usage (see
:mod:`~cellbed.workload.events`).

Anomalies are tolerated and counted in :attr:`TraceReader.stats` (a
``collections.Counter``; the keys are listed in :data:`STAT_KEYS`), with the file and line of
each one's first example (:attr:`TraceReader.first`, :meth:`TraceReader.report`), and logged
at the end: malformed rows (a mandatory field missing or unparsable), rows at
2⁶³−1 ("after the window"), out-of-order rows (put back in order) and late rows (beyond the
reorder window), usage for unknown tasks, usage arriving at or just after its
task's removal, removals and updates of unknown tasks, missing requests, and
so on. A damaged part (truncated, not gzip, not UTF-8) raises InvalidArgument naming the file
and line; :func:`cellbed.workload.trace_check.check_trace` finds such files before a run.

Time window and sub-sampling
----------------------------
``window_start_us`` / ``window_end_us`` select ``[start, end)`` in trace time.
The reader still scans everything before ``start`` to build the state, then
emits a snapshot at ``start`` (every live machine with its attributes, every
live task with its requirements and constraints) so the window opens on a
warm cell; usage rows before ``start`` are skipped.

``node_fraction < 1`` keeps a seeded, deterministic subset of the machines
listed in ``machine_events`` (exactly ``round(f · n)`` of them, chosen with
``numpy.random.default_rng(node_seed)``).  Tasks follow the machines: a first
pass over ``task_events`` finds where each task was SCHEDULEd; a task is kept
if it was ever placed on a kept machine, dropped if it was placed only on
dropped machines, and, if it was never placed at all, kept with probability
``f`` by a deterministic hash of ``(node_seed, job_id, task_index)``.  A kept
task keeps all its events, including usage measured on a dropped machine.

Writer
------
:class:`TraceWriter` (and :func:`write_trace`) writes any event stream in the
same format, so generated workloads can be converted, and tests can make
sample files.  Round trip caveats: an ``UpdateTaskConstraints`` with an empty
set cannot be represented (GCD has no "constraints cleared" row), and two
attribute events for the same machine at the same time come back as one.
"""

from __future__ import annotations

import collections
import heapq
import logging
import os
from array import array
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from cellbed.workload.events import AddNode, AddNodeAttributes, AttrValue, WorkloadEvent
from cellbed.workload.reorder import ReorderStats
from cellbed.workload.trace_tables import (
    AFTER_WINDOW_US,
    INFO_KEYS,
    LINE_BITS,
    MachineEventType,
    Malformed,
    STAT_KEYS,
    TABLES,
    TaskEventType,
    TaskState,
    mix64,
    p_int,
    pack_task,
    read_rows,
    table_files,
)
from cellbed.workload.trace_writer import TraceWriter, write_trace
from cellbed.workload.trace_rows import RowsMixin
from cellbed.workload.trace_streams import StreamsMixin

__all__ = [
    "AFTER_WINDOW_US",
    "TABLES",
    "STAT_KEYS",
    "TaskEventType",
    "MachineEventType",
    "TraceOptions",
    "TraceReader",
    "read_trace",
    "TraceWriter",
    "write_trace",
]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class TraceOptions:
    """What to read: a time window, a node sub-sample, and how long to remember removed tasks."""

    window_start_us: int | None = None  # inclusive, trace µs; None = from the beginning
    window_end_us: int | None = None  # exclusive, trace µs; None = to the end
    node_fraction: float = 1.0  # (0, 1]: share of machines kept
    node_seed: int = 0  # seed of the machine subset and of the unplaced-task hash
    removed_task_grace_us: int = 600_000_000  # late usage of a removed task within this is 'usage_after_remove'
    reorder_window_us: int = 600_000_000  # rows up to this far back in time within a table are put in order

    def __post_init__(self) -> None:
        if not 0 < self.node_fraction <= 1:
            raise ValueError(f"TraceOptions.node_fraction must be in (0, 1], got {self.node_fraction!r}")
        if self.node_seed < 0:
            raise ValueError(f"TraceOptions.node_seed must be >= 0, got {self.node_seed!r}")
        if self.removed_task_grace_us < 0:
            raise ValueError(f"TraceOptions.removed_task_grace_us must be >= 0, got {self.removed_task_grace_us!r}")
        if self.reorder_window_us < 0:
            raise ValueError(f"TraceOptions.reorder_window_us must be >= 0, got {self.reorder_window_us!r}")
        s, e = self.window_start_us, self.window_end_us
        if s is not None and s < 0:
            raise ValueError(f"TraceOptions.window_start_us must be >= 0, got {s!r}")
        if s is not None and e is not None and e <= s:
            raise ValueError(f"TraceOptions.window_end_us must be > window_start_us, got [{s}, {e})")


# ---------------------------------------------------------------------------
# parsing helpers
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# reader
# ---------------------------------------------------------------------------


class TraceReader(RowsMixin, StreamsMixin):
    """Stream a GCD-2011 trace directory as workload events (iterate once).

    ``stats`` counts rows and anomalies (see :data:`STAT_KEYS`); it is complete
    once iteration has finished. :meth:`report` gives every count with the file and line of its
    first example, and what the reorder window did per table, at any time (what was read so far).
    """

    def __init__(self, root: str | os.PathLike, options: TraceOptions | None = None) -> None:
        self.root = Path(root)
        self.options = options or TraceOptions()
        self.stats: collections.Counter[str] = collections.Counter()
        self.first: dict[str, int] = {}                    # anomaly -> location of its first example
        self.reorders: dict[str, ReorderStats] = {}        # table -> what the reorder window did
        self._late_usage = 0
        self._files = {t: table_files(self.root, t) for t in TABLES}
        if not any(self._files.values()):
            raise FileNotFoundError(f"no GCD-2011 tables under {self.root} (expected <table>/part-*.csv[.gz])")
        self._paths = [p for t in TABLES for p in self._files[t]]
        self._first_file, k = {}, 0
        for t in TABLES:
            self._first_file[t] = k
            k += len(self._files[t])
        self._started = False
        self.kept_machines: frozenset[int] | None = None
        self._kept_keys: np.ndarray | None = None
        self._dropped_keys: np.ndarray | None = None

    # ----------------------------------------------------------- sub-sampling
    def _prepare_sampling(self) -> None:
        f = self.options.node_fraction
        if f >= 1.0:
            return
        ids = set()
        for row in read_rows(self._files["machine_events"]):
            try:
                ids.add(p_int(row[1]))
            except (ValueError, IndexError, Malformed):
                continue
        all_ids = np.array(sorted(ids), dtype=np.int64)
        k = int(round(f * all_ids.size))
        rng = np.random.default_rng(self.options.node_seed)
        chosen = np.sort(rng.choice(all_ids.size, size=k, replace=False)) if k else np.zeros(0, dtype=np.int64)
        self.kept_machines = frozenset(all_ids[chosen].tolist())
        kept, dropped = array("q"), array("q")
        km = self.kept_machines
        for row in read_rows(self._files["task_events"]):
            try:
                if row[5] != "1" or row[4] == "":
                    continue
                key = pack_task(int(row[2]), int(row[3]))
                (kept if int(row[4]) in km else dropped).append(key)
            except (ValueError, IndexError):
                continue
        self._kept_keys = np.unique(np.frombuffer(kept, dtype=np.int64)) if kept else np.zeros(0, np.int64)
        d = np.unique(np.frombuffer(dropped, dtype=np.int64)) if dropped else np.zeros(0, np.int64)
        self._dropped_keys = np.setdiff1d(d, self._kept_keys, assume_unique=True)
        log.info("node sub-sample: %d of %d machines, %d tasks placed on kept machines",
                 len(km), all_ids.size, self._kept_keys.size)

    def _keep_task(self, job: int, idx: int) -> bool:
        if self._kept_keys is None:
            return True
        key = pack_task(job, idx)
        for arr, verdict in ((self._kept_keys, True), (self._dropped_keys, False)):
            i = int(np.searchsorted(arr, key))
            if i < arr.size and int(arr[i]) == key:
                return verdict
        h = mix64(mix64(self.options.node_seed) ^ key)
        return h < self.options.node_fraction * 2.0**64

    def _keep_machine(self, mid: int) -> bool:
        return self.kept_machines is None or mid in self.kept_machines

    # ------------------------------------------------------------- the stream
    def __iter__(self) -> Iterator[WorkloadEvent]:
        if self._started:
            raise RuntimeError("a TraceReader can be iterated only once")
        self._started = True
        return self._run()

    def _run(self) -> Iterator[WorkloadEvent]:
        opts = self.options
        self._prepare_sampling()
        self._nodes: dict[int, list] = {}  # live machines: id -> [cpu, mem, platform]
        self._attrs: dict[int, dict[str, AttrValue]] = {}  # remembered attributes, live or not
        self._tasks: dict[tuple[int, int], TaskState] = {}
        self._removed: dict[tuple[int, int], int] = {}
        self._removed_q: collections.deque = collections.deque()
        self._batch: list[WorkloadEvent] = []
        self._batch_adds: dict[tuple[int, int], int] = {}
        self._batch_readd: dict[int, int] = {}
        self._emitting = opts.window_start_us is None
        start, end = opts.window_start_us, opts.window_end_us
        handlers = (self._on_machine, self._on_attributes, self._on_task, self._on_constraints, self._on_usage)
        batch_time = None
        merged = heapq.merge(*self._streams(), key=itemgetter(0))
        try:
            for r in merged:
                t = r[0]
                if end is not None and t >= end:
                    break
                if not self._emitting and t >= start:
                    self._emitting = True
                    self._snapshot(start)
                    batch_time = start
                if self._batch and t != batch_time:
                    yield from self._batch
                    self._batch = []
                    self._batch_adds = {}
                    self._batch_readd = {}
                batch_time = t
                handlers[r[1]](r)
            yield from self._batch
            self._batch = []
        finally:
            self._log_stats()

    # ------------------------------------------------------------ statistics
    def _note(self, key: str, loc: int, n: int = 1) -> None:
        """Count *n* of anomaly *key*, remembering where its first example is."""
        self.stats[key] += n
        if key not in self.first:
            self.first[key] = loc

    def where(self, loc: int) -> str:
        """``<table>/<part file>:<line>`` of a row location."""
        path = self._paths[loc >> LINE_BITS]
        try:
            name = path.relative_to(self.root)
        except ValueError:
            name = path
        return f"{name}:{loc & ((1 << LINE_BITS) - 1)}"

    def _fold_reorder(self) -> None:
        """The reorder windows' counts into ``stats`` (idempotent), with their first examples."""
        ooo = sum(r.out_of_order for r in self.reorders.values())
        late = sum(r.late for r in self.reorders.values()) + self._late_usage
        for key, n, attr in (("out_of_order_rows", ooo, "first_out_of_order"), ("late_rows", late, "first_late")):
            if n:
                self.stats[key] = n
            if key not in self.first:
                rows = [getattr(r, attr) for r in self.reorders.values() if getattr(r, attr) is not None]
                if rows:
                    self.first[key] = min(row[-1] for row in rows)

    def report(self) -> dict[str, Any]:
        """What was read so far: rows per table, every anomaly and note with its count and the
        file:line of its first example, and per table what the reorder window did (rows moved,
        rows beyond the window, the largest distance in µs). JSON-ready."""
        self._fold_reorder()

        def entries(keys) -> dict[str, dict[str, Any]]:
            return {k: {"count": int(self.stats[k]),
                        "first": self.where(self.first[k]) if k in self.first else None} for k in sorted(keys)}
        keys = [k for k, v in self.stats.items() if v and not k.startswith("rows.")]
        return {
            "path": str(self.root),
            "rows": {k[5:]: int(v) for k, v in sorted(self.stats.items()) if k.startswith("rows.")},
            "anomalies": entries(k for k in keys if k not in INFO_KEYS),
            "notes": entries(k for k in keys if k in INFO_KEYS),
            "reorder": {"window_us": self.options.reorder_window_us,
                        **{t: {"rows": r.rows, "out_of_order": r.out_of_order, "late": r.late,
                               "max_distance_us": r.max_distance} for t, r in self.reorders.items()}},
        }

    def _log_stats(self) -> None:
        self._fold_reorder()
        anomalies = {k: v for k, v in self.stats.items() if not k.startswith("rows.") and k not in INFO_KEYS}
        notes = {k: v for k, v in self.stats.items() if k in INFO_KEYS}
        if anomalies:
            log.warning("trace %s anomalies: %s", self.root,
                        ", ".join(f"{k}={v} (first {self.where(self.first[k])})" if k in self.first else f"{k}={v}"
                                  for k, v in sorted(anomalies.items())))
        if notes:
            log.info("trace %s notes: %s", self.root, ", ".join(f"{k}={v}" for k, v in sorted(notes.items())))
        log.info("trace %s rows: %s", self.root,
                 ", ".join(f"{k[5:]}={v}" for k, v in sorted(self.stats.items()) if k.startswith("rows.")))

    def _emit(self, ev: WorkloadEvent) -> None:
        if self._emitting:
            self._batch.append(ev)

    def _snapshot(self, t: int) -> None:
        """The warm state at window start: live machines, their attributes, live tasks."""
        for mid, (cpu, mem, platform) in self._nodes.items():
            self._batch.append(AddNode(t, mid, cpu, mem, platform))
        for mid in self._nodes:
            a = self._attrs.get(mid)
            if a:
                self._batch.append(AddNodeAttributes(t, mid, tuple(sorted(a.items()))))
        for (job, idx), task in self._tasks.items():
            self._batch.append(task.add_event(t, job, idx))

def read_trace(root: str | os.PathLike, options: TraceOptions | None = None) -> Iterator[WorkloadEvent]:
    """The event stream of ``TraceReader(root, options)``."""
    return iter(TraceReader(root, options))


# ---------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------

