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

Within a timestamp, events follow the table order machine_events,
machine_attributes, task_events, task_constraints, task_usage (see
:mod:`~cellbed.workload.events`).

Anomalies are tolerated and counted in :attr:`TraceReader.stats` (a
``collections.Counter``; the keys are listed in :data:`STAT_KEYS`) and logged
at the end: malformed rows (a mandatory field missing or unparsable), rows at
2⁶³−1 ("after the window"), out-of-order rows (their time is clamped to the
previous row's), usage for unknown tasks, usage arriving at or just after its
task's removal, removals and updates of unknown tasks, missing requests, and
so on.

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
from typing import Iterator

import numpy as np

from cellbed.workload.events import (
    AddNode,
    AddNodeAttributes,
    AttrValue,
    Constraint,
    ConstraintOp,
    WorkloadEvent,
)
from cellbed.workload.trace_tables import (
    AFTER_WINDOW_US,
    INFO_KEYS,
    MachineEventType,
    Malformed,
    NCOLS,
    STAT_KEYS,
    TABLES,
    TaskEventType,
    TaskState,
    mix64,
    p_attr_value,
    p_bool,
    p_int,
    p_opt_bool,
    p_opt_float,
    p_opt_int,
    p_opt_str,
    pack_task,
    read_rows,
    table_files,
)
from cellbed.workload.trace_writer import TraceWriter, write_trace
from cellbed.workload.trace_rows import RowsMixin

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

    def __post_init__(self) -> None:
        if not 0 < self.node_fraction <= 1:
            raise ValueError(f"TraceOptions.node_fraction must be in (0, 1], got {self.node_fraction!r}")
        if self.node_seed < 0:
            raise ValueError(f"TraceOptions.node_seed must be >= 0, got {self.node_seed!r}")
        if self.removed_task_grace_us < 0:
            raise ValueError(f"TraceOptions.removed_task_grace_us must be >= 0, got {self.removed_task_grace_us!r}")
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


class TraceReader(RowsMixin):
    """Stream a GCD-2011 trace directory as workload events (iterate once).

    ``stats`` counts rows and anomalies (see :data:`STAT_KEYS`); it is complete
    once iteration has finished.
    """

    def __init__(self, root: str | os.PathLike, options: TraceOptions | None = None) -> None:
        self.root = Path(root)
        self.options = options or TraceOptions()
        self.stats: collections.Counter[str] = collections.Counter()
        self._files = {t: table_files(self.root, t) for t in TABLES}
        if not any(self._files.values()):
            raise FileNotFoundError(f"no GCD-2011 tables under {self.root} (expected <table>/part-*.csv[.gz])")
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

    # ------------------------------------------------------------ row streams
    def _ordered(self, rows: Iterator[tuple]) -> Iterator[tuple]:
        """Skip 2^63-1 rows and clamp out-of-order times (counting both)."""
        stats = self.stats
        last = None
        for r in rows:
            t = r[0]
            if t == AFTER_WINDOW_US:
                stats["after_window_rows"] += 1
                continue
            if last is not None and t < last:
                stats["out_of_order_rows"] += 1
                t = last
                r = (t,) + r[1:]
            last = t
            yield r

    def _parsed(self, table: str) -> Iterator[tuple]:
        stats = self.stats
        ncols = NCOLS[table]
        parse = getattr(self, f"_parse_{table}")
        rows_key, bad_key = f"rows.{table}", f"malformed_rows.{table}"
        for row in read_rows(self._files[table]):
            stats[rows_key] += 1
            if len(row) < ncols:
                row = row + [""] * (ncols - len(row))
            try:
                yield parse(row)
            except (Malformed, ValueError, KeyError):
                stats[bad_key] += 1

    @staticmethod
    def _parse_machine_events(r: list[str]) -> tuple:
        return (p_int(r[0]), 0, p_int(r[1]), p_int(r[2]), p_opt_str(r[3]), p_opt_float(r[4]), p_opt_float(r[5]))

    @staticmethod
    def _parse_machine_attributes(r: list[str]) -> tuple:
        name = r[2]
        if name == "":
            raise Malformed
        return (p_int(r[0]), 1, p_int(r[1]), name, p_attr_value(r[3]), p_bool(r[4]))

    @staticmethod
    def _parse_task_events(r: list[str]) -> tuple:
        return (p_int(r[0]), 2, p_opt_int(r[1]), p_int(r[2]), p_int(r[3]), p_opt_int(r[4]), p_int(r[5]),
                p_opt_str(r[6]), p_opt_int(r[7]), p_int(r[8]), p_opt_float(r[9]), p_opt_float(r[10]),
                p_opt_float(r[11]), p_opt_bool(r[12]))

    @staticmethod
    def _parse_task_constraints(r: list[str]) -> tuple:
        name = r[4]
        if name == "":
            raise Malformed
        return (p_int(r[0]), 3, p_int(r[1]), p_int(r[2]), ConstraintOp(p_int(r[3])), name, p_attr_value(r[5]))

    @staticmethod
    def _parse_task_usage(r: list[str]) -> tuple:
        start, end = p_int(r[0]), p_int(r[1])
        if end < start:
            raise Malformed
        # (time=end, rank, start, job, idx, machine, cpu, canon mem, assigned mem, max mem, max cpu, sampled cpu)
        return (end, 4, start, p_int(r[2]), p_int(r[3]), p_opt_int(r[4]), p_opt_float(r[5]), p_opt_float(r[6]),
                p_opt_float(r[7]), p_opt_float(r[10]), p_opt_float(r[13]), p_opt_float(r[19]))

    def _usage_by_end(self, rows: Iterator[tuple]) -> Iterator[tuple]:
        """Re-order start-sorted usage rows by end time (a record is safe once its end ≤ the next start)."""
        stats = self.stats
        heap: list[tuple[int, int, tuple]] = []
        seq = 0
        last_start = None
        for r in rows:
            if r[0] == AFTER_WINDOW_US:  # end after the window: not a measurement inside it
                stats["after_window_rows"] += 1
                continue
            start = r[2]
            if last_start is not None and start < last_start:
                start = last_start  # out of order; the time clamp below counts it
            last_start = start
            while heap and heap[0][0] <= start:
                yield heapq.heappop(heap)[2]
            heapq.heappush(heap, (r[0], seq, r))
            seq += 1
        while heap:
            yield heapq.heappop(heap)[2]

    def _grouped(self, rows: Iterator[tuple], key) -> Iterator[list[tuple]]:
        """Group consecutive rows with equal key(row)."""
        group: list[tuple] = []
        gk = None
        for r in rows:
            k = key(r)
            if group and k != gk:
                yield group
                group = []
            gk = k
            group.append(r)
        if group:
            yield group

    def _streams(self) -> list[Iterator[tuple]]:
        out = []
        for table in TABLES:
            if not self._files[table]:
                continue
            rows = self._parsed(table)
            if table == "task_usage":
                rows = self._usage_by_end(rows)
            rows = self._ordered(rows)
            if table == "machine_attributes":
                # group rows (time, machine, deleted) -> (time, rank, machine, deleted, [(name, value)...])
                rows = ((g[0][0], 1, g[0][2], g[0][5], [(r[3], r[4]) for r in g])
                        for g in self._grouped(rows, lambda r: (r[0], r[2], r[5])))
            elif table == "task_constraints":
                rows = ((g[0][0], 3, g[0][2], g[0][3], tuple(Constraint(r[5], r[4], r[6]) for r in g))
                        for g in self._grouped(rows, lambda r: (r[0], r[2], r[3])))
            out.append(rows)
        return out

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

    def _log_stats(self) -> None:
        anomalies = {k: v for k, v in self.stats.items() if not k.startswith("rows.") and k not in INFO_KEYS}
        notes = {k: v for k, v in self.stats.items() if k in INFO_KEYS}
        if anomalies:
            log.warning("trace %s anomalies: %s", self.root,
                        ", ".join(f"{k}={v}" for k, v in sorted(anomalies.items())))
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

