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
import csv
import gzip
import heapq
import io
import logging
import os
import re
from array import array
from dataclasses import dataclass, replace
from operator import itemgetter
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from cellbed.workload.events import (
    MAX_PRIORITY,
    AddNode,
    AddNodeAttributes,
    AddTask,
    AttrValue,
    Constraint,
    ConstraintOp,
    EndReason,
    RemoveNode,
    RemoveNodeAttributes,
    RemoveTask,
    UpdateNodeTotalResources,
    UpdateTaskConstraints,
    UpdateTaskRequiredResources,
    UpdateTaskUsedResources,
    WorkloadEvent,
)

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

#: Timestamp meaning "after the trace window" (digest §C.1, §E.1).
AFTER_WINDOW_US = 2**63 - 1

#: Table names, in same-timestamp processing order.
TABLES = ("machine_events", "machine_attributes", "task_events", "task_constraints", "task_usage")

#: Number of CSV columns per table (digest §E.2).
_NCOLS = {"machine_events": 6, "machine_attributes": 5, "task_events": 13, "task_constraints": 6, "task_usage": 20}

#: Counter keys a TraceReader may report.
STAT_KEYS = (
    "rows.<table>",  # rows read per table
    "malformed_rows.<table>",  # mandatory field missing or unparsable; row skipped
    "after_window_rows",  # time (or usage end) = 2^63-1; row skipped
    "out_of_order_rows",  # time went backwards within a table; clamped
    "missing_info_rows",  # task_events rows with the 'missing info' field set (kept)
    "priority_out_of_range",  # task_events priority outside 0..11; row skipped
    "missing_request",  # SUBMIT without CPU or memory request (0.0 used)
    "machine_missing_capacity",  # machine ADD without CPUs or memory (0.0 used)
    "machine_add_while_live",  # ADD of a live machine (emitted as an update)
    "machine_remove_unknown",  # REMOVE of a machine that is not live; skipped
    "machine_update_unknown",  # UPDATE of a machine that is not live (emitted as AddNode)
    "attributes_unknown_machine",  # attribute rows for a machine that is not live (remembered, not emitted)
    "submit_while_live",  # SUBMIT of a live task (emitted as an update)
    "implicit_submit",  # SCHEDULE/UPDATE of an unknown task (AddTask synthesised)
    "remove_unknown_task",  # EVICT/FAIL/FINISH/KILL/LOST of an unknown task; skipped
    "constraints_unknown_task",  # constraint rows for an unknown task; skipped
    "usage_unknown_task",  # usage rows for a task never seen; skipped
    "usage_after_remove",  # usage ending at/just after its task's removal; skipped
    "usage_missing_machine",  # usage row without machine ID (kept, machine_id=None)
    "usage_before_window",  # usage rows ending before window_start_us; skipped
    "dropped_machine_rows",  # rows of machines removed by node sub-sampling
    "dropped_task_rows",  # rows of tasks removed by node sub-sampling
)


# Counters that describe a selection or a known format property rather than bad data: logged at INFO.
_INFO_KEYS = frozenset({"usage_missing_machine", "usage_before_window", "dropped_machine_rows", "dropped_task_rows",
                        "missing_info_rows"})


class TaskEventType:
    """GCD-2011 job/task event-type codes (digest §E.2)."""

    SUBMIT = 0
    SCHEDULE = 1
    EVICT = 2
    FAIL = 3
    FINISH = 4
    KILL = 5
    LOST = 6
    UPDATE_PENDING = 7
    UPDATE_RUNNING = 8


class MachineEventType:
    """GCD-2011 machine event-type codes (digest §E.2)."""

    ADD = 0
    REMOVE = 1
    UPDATE = 2


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

_INT_RE = re.compile(r"-?\d+\Z")
_PART_RE = re.compile(r"part-(\d+)-of-(\d+)\.csv(\.gz)?\Z")


class _Malformed(Exception):
    pass


def _int(s: str) -> int:
    if s == "":
        raise _Malformed
    return int(s)


def _opt_int(s: str) -> int | None:
    return None if s == "" else int(s)


def _opt_float(s: str) -> float | None:
    return None if s == "" else float(s)


def _opt_str(s: str) -> str | None:
    return None if s == "" else s


def _attr_value(s: str) -> AttrValue:
    if s == "":
        return None
    return int(s) if _INT_RE.match(s) else s


def _bool(s: str) -> bool:
    if s in ("1", "true", "True"):
        return True
    if s in ("0", "false", "False"):
        return False
    raise _Malformed


def _opt_bool(s: str) -> bool | None:
    return None if s == "" else _bool(s)


def _table_files(root: Path, table: str) -> list[Path]:
    d = root / table
    if not d.is_dir():
        return []
    files = [p for p in d.iterdir() if p.is_file() and (p.name.endswith(".csv") or p.name.endswith(".csv.gz"))]

    def key(p: Path):
        m = _PART_RE.search(p.name)
        return (int(m.group(1)) if m else -1, p.name)

    return sorted(files, key=key)


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, "r", encoding="utf-8", newline="")


def _rows(files: list[Path]) -> Iterator[list[str]]:
    for path in files:
        with _open_text(path) as fh:
            for row in csv.reader(fh):
                if row:
                    yield row


def _mix64(x: int) -> int:
    """splitmix64 finaliser: a deterministic 64-bit hash of an integer."""
    x &= 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def _pack(job: int, idx: int) -> int:
    """One int64 per task for the sub-sampling sets (GCD job IDs < 2^39, task indices < 2^24)."""
    return (job << 24) | (idx & 0xFFFFFF)


# ---------------------------------------------------------------------------
# reader
# ---------------------------------------------------------------------------


class _Task:
    __slots__ = ("user", "priority", "sclass", "cpu", "mem", "disk", "diff", "constraints")

    def __init__(self, user, priority, sclass, cpu, mem, disk, diff, constraints=()):
        self.user, self.priority, self.sclass = user, priority, sclass
        self.cpu, self.mem, self.disk, self.diff = cpu, mem, disk, diff
        self.constraints = constraints

    def add_event(self, t: int, job: int, idx: int) -> AddTask:
        return AddTask(t, job, idx, self.user, self.priority, self.sclass, self.cpu, self.mem, self.disk,
                       self.constraints, self.diff)


class TraceReader:
    """Stream a GCD-2011 trace directory as workload events (iterate once).

    ``stats`` counts rows and anomalies (see :data:`STAT_KEYS`); it is complete
    once iteration has finished.
    """

    def __init__(self, root: str | os.PathLike, options: TraceOptions | None = None) -> None:
        self.root = Path(root)
        self.options = options or TraceOptions()
        self.stats: collections.Counter[str] = collections.Counter()
        self._files = {t: _table_files(self.root, t) for t in TABLES}
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
        for row in _rows(self._files["machine_events"]):
            try:
                ids.add(_int(row[1]))
            except (ValueError, IndexError, _Malformed):
                continue
        all_ids = np.array(sorted(ids), dtype=np.int64)
        k = int(round(f * all_ids.size))
        rng = np.random.default_rng(self.options.node_seed)
        chosen = np.sort(rng.choice(all_ids.size, size=k, replace=False)) if k else np.zeros(0, dtype=np.int64)
        self.kept_machines = frozenset(all_ids[chosen].tolist())
        kept, dropped = array("q"), array("q")
        km = self.kept_machines
        for row in _rows(self._files["task_events"]):
            try:
                if row[5] != "1" or row[4] == "":
                    continue
                key = _pack(int(row[2]), int(row[3]))
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
        key = _pack(job, idx)
        for arr, verdict in ((self._kept_keys, True), (self._dropped_keys, False)):
            i = int(np.searchsorted(arr, key))
            if i < arr.size and int(arr[i]) == key:
                return verdict
        h = _mix64(_mix64(self.options.node_seed) ^ key)
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
        ncols = _NCOLS[table]
        parse = getattr(self, f"_parse_{table}")
        rows_key, bad_key = f"rows.{table}", f"malformed_rows.{table}"
        for row in _rows(self._files[table]):
            stats[rows_key] += 1
            if len(row) < ncols:
                row = row + [""] * (ncols - len(row))
            try:
                yield parse(row)
            except (_Malformed, ValueError, KeyError):
                stats[bad_key] += 1

    @staticmethod
    def _parse_machine_events(r: list[str]) -> tuple:
        return (_int(r[0]), 0, _int(r[1]), _int(r[2]), _opt_str(r[3]), _opt_float(r[4]), _opt_float(r[5]))

    @staticmethod
    def _parse_machine_attributes(r: list[str]) -> tuple:
        name = r[2]
        if name == "":
            raise _Malformed
        return (_int(r[0]), 1, _int(r[1]), name, _attr_value(r[3]), _bool(r[4]))

    @staticmethod
    def _parse_task_events(r: list[str]) -> tuple:
        return (_int(r[0]), 2, _opt_int(r[1]), _int(r[2]), _int(r[3]), _opt_int(r[4]), _int(r[5]),
                _opt_str(r[6]), _opt_int(r[7]), _int(r[8]), _opt_float(r[9]), _opt_float(r[10]),
                _opt_float(r[11]), _opt_bool(r[12]))

    @staticmethod
    def _parse_task_constraints(r: list[str]) -> tuple:
        name = r[4]
        if name == "":
            raise _Malformed
        return (_int(r[0]), 3, _int(r[1]), _int(r[2]), ConstraintOp(_int(r[3])), name, _attr_value(r[5]))

    @staticmethod
    def _parse_task_usage(r: list[str]) -> tuple:
        start, end = _int(r[0]), _int(r[1])
        if end < start:
            raise _Malformed
        # (time=end, rank, start, job, idx, machine, cpu, canon mem, assigned mem, max mem, max cpu, sampled cpu)
        return (end, 4, start, _int(r[2]), _int(r[3]), _opt_int(r[4]), _opt_float(r[5]), _opt_float(r[6]),
                _opt_float(r[7]), _opt_float(r[10]), _opt_float(r[13]), _opt_float(r[19]))

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
        self._tasks: dict[tuple[int, int], _Task] = {}
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
        anomalies = {k: v for k, v in self.stats.items() if not k.startswith("rows.") and k not in _INFO_KEYS}
        notes = {k: v for k, v in self.stats.items() if k in _INFO_KEYS}
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

    # -------------------------------------------------------------- handlers
    def _on_machine(self, r: tuple) -> None:
        t, _, mid, etype, platform, cpu, mem = r
        stats = self.stats
        if not self._keep_machine(mid):
            stats["dropped_machine_rows"] += 1
            return
        nodes = self._nodes
        if etype == MachineEventType.ADD or (etype == MachineEventType.UPDATE and mid not in nodes):
            if mid in nodes:
                stats["machine_add_while_live"] += 1
                self._update_machine(t, mid, platform, cpu, mem)
                return
            if etype == MachineEventType.UPDATE:
                stats["machine_update_unknown"] += 1
            if cpu is None or mem is None:
                stats["machine_missing_capacity"] += 1
            nodes[mid] = [cpu or 0.0, mem or 0.0, platform]
            self._emit(AddNode(t, mid, cpu or 0.0, mem or 0.0, platform))
            a = self._attrs.get(mid)
            if a and self._emitting:
                # re-added machine: re-send what we remember; attribute rows at this same time
                # update this event instead of adding another (see _on_attributes)
                self._batch_readd[mid] = len(self._batch)
                self._batch.append(AddNodeAttributes(t, mid, tuple(sorted(a.items()))))
        elif etype == MachineEventType.REMOVE:
            if mid not in nodes:
                stats["machine_remove_unknown"] += 1
                return
            del nodes[mid]
            self._emit(RemoveNode(t, mid))
        elif etype == MachineEventType.UPDATE:
            self._update_machine(t, mid, platform, cpu, mem)
        else:
            stats["malformed_rows.machine_events"] += 1

    def _update_machine(self, t, mid, platform, cpu, mem) -> None:
        n = self._nodes[mid]
        if cpu is not None:
            n[0] = cpu
        if mem is not None:
            n[1] = mem
        if platform is not None:
            n[2] = platform
        self._emit(UpdateNodeTotalResources(t, mid, n[0], n[1], n[2]))

    def _on_attributes(self, r: tuple) -> None:
        t, _, mid, deleted, pairs = r
        if not self._keep_machine(mid):
            self.stats["dropped_machine_rows"] += len(pairs)
            return
        a = self._attrs.setdefault(mid, {})
        if deleted:
            for name, _ in pairs:
                a.pop(name, None)
        else:
            a.update(pairs)
        if mid not in self._nodes:
            self.stats["attributes_unknown_machine"] += len(pairs)
            return
        pos = self._batch_readd.get(mid)
        if pos is not None:  # the machine was re-added at this timestamp: one event with the final set
            self._batch[pos] = AddNodeAttributes(t, mid, tuple(sorted(a.items())))
            return
        if deleted:
            self._emit(RemoveNodeAttributes(t, mid, tuple(name for name, _ in pairs)))
        else:
            self._emit(AddNodeAttributes(t, mid, tuple(sorted(pairs, key=itemgetter(0)))))

    def _on_task(self, r: tuple) -> None:
        (t, _, missing, job, idx, mid, etype, user, sclass, prio, cpu, mem, disk, diff) = r
        stats = self.stats
        key = (job, idx)
        tasks = self._tasks
        task = tasks.get(key)
        if task is None and not self._keep_task(job, idx):
            stats["dropped_task_rows"] += 1
            return
        if missing is not None:
            stats["missing_info_rows"] += 1
        if not 0 <= prio <= MAX_PRIORITY:
            stats["priority_out_of_range"] += 1
            return
        if etype == TaskEventType.SUBMIT or (task is None and etype in (
                TaskEventType.SCHEDULE, TaskEventType.UPDATE_PENDING, TaskEventType.UPDATE_RUNNING)):
            if task is not None:
                stats["submit_while_live"] += 1
                self._update_task(t, job, idx, task, user, sclass, prio, cpu, mem, disk, diff)
                return
            if etype != TaskEventType.SUBMIT:
                stats["implicit_submit"] += 1
            if cpu is None or mem is None:
                stats["missing_request"] += 1
            task = _Task(user or "", prio, sclass, cpu or 0.0, mem or 0.0, disk or 0.0, bool(diff))
            tasks[key] = task
            self._removed.pop(key, None)
            if self._emitting:
                self._batch_adds[key] = len(self._batch)
                self._batch.append(task.add_event(t, job, idx))
        elif etype == TaskEventType.SCHEDULE:
            return  # placement: not a workload event
        elif TaskEventType.EVICT <= etype <= TaskEventType.LOST:
            if task is None:
                stats["remove_unknown_task"] += 1
                return
            del tasks[key]
            self._batch_adds.pop(key, None)
            self._removed[key] = t
            self._removed_q.append((t, key))
            self._emit(RemoveTask(t, job, idx, EndReason(etype)))
        elif etype in (TaskEventType.UPDATE_PENDING, TaskEventType.UPDATE_RUNNING):
            self._update_task(t, job, idx, task, user, sclass, prio, cpu, mem, disk, diff)
        else:
            stats["malformed_rows.task_events"] += 1

    def _update_task(self, t, job, idx, task: _Task, user, sclass, prio, cpu, mem, disk, diff) -> None:
        task.priority = prio
        if user is not None:
            task.user = user
        if sclass is not None:
            task.sclass = sclass
        if cpu is not None:
            task.cpu = cpu
        if mem is not None:
            task.mem = mem
        if disk is not None:
            task.disk = disk
        if diff is not None:
            task.diff = diff
        self._emit(UpdateTaskRequiredResources(t, job, idx, task.priority, task.sclass, task.cpu, task.mem, task.disk))

    def _on_constraints(self, r: tuple) -> None:
        t, _, job, idx, cons = r
        key = (job, idx)
        task = self._tasks.get(key)
        if task is None:
            if not self._keep_task(job, idx):
                self.stats["dropped_task_rows"] += len(cons)
            else:
                self.stats["constraints_unknown_task"] += len(cons)
            return
        task.constraints = cons
        pos = self._batch_adds.get(key)
        if pos is not None:
            self._batch[pos] = replace(self._batch[pos], constraints=cons)
        else:
            self._emit(UpdateTaskConstraints(t, job, idx, cons))

    def _on_usage(self, r: tuple) -> None:
        end, _, start, job, idx, mid, cpu, canon, assigned, maxmem, maxcpu, sampled = r
        stats = self.stats
        if not self._emitting:
            stats["usage_before_window"] += 1
            return
        key = (job, idx)
        if key not in self._tasks:
            self._expire_removed(end)
            if key in self._removed:
                stats["usage_after_remove"] += 1
            elif not self._keep_task(job, idx):
                stats["dropped_task_rows"] += 1
            else:
                stats["usage_unknown_task"] += 1
            return
        if mid is None:
            stats["usage_missing_machine"] += 1
        self._batch.append(UpdateTaskUsedResources(end, job, idx, mid, start, end, cpu, canon, assigned, maxmem,
                                                   maxcpu, sampled))

    def _expire_removed(self, now: int) -> None:
        q, removed, horizon = self._removed_q, self._removed, now - self.options.removed_task_grace_us
        while q and q[0][0] < horizon:
            t, key = q.popleft()
            if removed.get(key) == t:
                del removed[key]


def read_trace(root: str | os.PathLike, options: TraceOptions | None = None) -> Iterator[WorkloadEvent]:
    """The event stream of ``TraceReader(root, options)``."""
    return iter(TraceReader(root, options))


# ---------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------


class _PartWriter:
    def __init__(self, dir_: Path, compress: bool, rows_per_part: int | None) -> None:
        self.dir = dir_
        self.compress = compress
        self.rows_per_part = rows_per_part
        self.paths: list[Path] = []
        self.rows = 0
        self._fh = None
        self._csv = None
        self._in_part = 0

    def _open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f".part-{len(self.paths):05d}.tmp"
        self.paths.append(path)
        raw = gzip.open(path, "wb", compresslevel=6) if self.compress else open(path, "wb")
        self._fh = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        self._csv = csv.writer(self._fh, lineterminator="\n")
        self._in_part = 0

    def write(self, row: list) -> None:
        """Write one row: ints, floats (shortest round-trip repr), strings; None is an empty field."""
        if self._fh is None or (self.rows_per_part and self._in_part >= self.rows_per_part):
            self.close_part()
            self._open()
        self._csv.writerow(row)
        self._in_part += 1
        self.rows += 1

    def close_part(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def finish(self) -> None:
        self.close_part()
        n = len(self.paths)
        ext = ".csv.gz" if self.compress else ".csv"
        for i, p in enumerate(self.paths):
            p.rename(self.dir / f"part-{i:05d}-of-{n:05d}{ext}")


class TraceWriter:
    """Write workload events as GCD-2011 CSV tables under ``root`` (a context manager).

    Rows repeat the task's user, class, priority and requests on every
    task_events row, as GCD does (the writer remembers live tasks for that).
    ``UpdateTaskRequiredResources`` is written as UPDATE_PENDING (7): the
    writer does not know whether the task was placed.  task_usage rows are
    written in start-time order; records longer than ``usage_reorder_us``
    may come out of order (the reader then clamps and counts them).
    """

    def __init__(self, root: str | os.PathLike, *, compress: bool = True, rows_per_part: int | None = None,
                 usage_reorder_us: int = 600_000_000) -> None:
        self.root = Path(root)
        if rows_per_part is not None and rows_per_part < 1:
            raise ValueError(f"TraceWriter rows_per_part must be >= 1 or None, got {rows_per_part!r}")
        self._parts = {t: _PartWriter(self.root / t, compress, rows_per_part) for t in TABLES}
        self._tasks: dict[tuple[int, int], list] = {}
        self._usage: list[tuple[int, int, list]] = []
        self._seq = 0
        self._reorder = usage_reorder_us
        self.unknown_task_rows = 0
        self._closed = False

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write_all(self, events: Iterable[WorkloadEvent]) -> None:
        for ev in events:
            self.write(ev)

    def write(self, ev: WorkloadEvent) -> None:
        t = ev.time_us
        self._flush_usage(t - self._reorder)
        p = self._parts
        if isinstance(ev, UpdateTaskUsedResources):
            row = [ev.start_us, ev.end_us, ev.job_id, ev.task_index, ev.machine_id, ev.cpu_rate,
                   ev.canonical_memory, ev.assigned_memory, None, None, ev.max_memory, None, None, ev.max_cpu,
                   None, None, None, None, None, ev.sampled_cpu]
            heapq.heappush(self._usage, (ev.start_us, self._seq, row))
            self._seq += 1
        elif isinstance(ev, AddTask):
            st = [ev.user, ev.scheduling_class, ev.priority, ev.cpu_request, ev.mem_request, ev.disk_request,
                  int(ev.different_machines)]
            self._tasks[ev.task_key] = st
            p["task_events"].write([t, None, ev.job_id, ev.task_index, None, TaskEventType.SUBMIT] + st)
            self._write_constraints(t, ev.job_id, ev.task_index, ev.constraints)
        elif isinstance(ev, RemoveTask):
            st = self._task_state(ev.task_key)
            self._tasks.pop(ev.task_key, None)
            p["task_events"].write([t, None, ev.job_id, ev.task_index, None, int(ev.reason)] + st)
        elif isinstance(ev, UpdateTaskRequiredResources):
            st = self._task_state(ev.task_key)
            st[1:6] = [ev.scheduling_class, ev.priority, ev.cpu_request, ev.mem_request, ev.disk_request]
            p["task_events"].write([t, None, ev.job_id, ev.task_index, None, TaskEventType.UPDATE_PENDING] + st)
        elif isinstance(ev, UpdateTaskConstraints):
            self._write_constraints(t, ev.job_id, ev.task_index, ev.constraints)
        elif isinstance(ev, AddNode):
            p["machine_events"].write([t, ev.node_id, MachineEventType.ADD, ev.platform, ev.cpu, ev.mem])
        elif isinstance(ev, RemoveNode):
            p["machine_events"].write([t, ev.node_id, MachineEventType.REMOVE, None, None, None])
        elif isinstance(ev, UpdateNodeTotalResources):
            p["machine_events"].write([t, ev.node_id, MachineEventType.UPDATE, ev.platform, ev.cpu, ev.mem])
        elif isinstance(ev, AddNodeAttributes):
            for name, value in ev.attributes:
                p["machine_attributes"].write([t, ev.node_id, name, value, 0])
        elif isinstance(ev, RemoveNodeAttributes):
            for name in ev.names:
                p["machine_attributes"].write([t, ev.node_id, name, None, 1])
        else:
            raise TypeError(f"TraceWriter cannot write {type(ev).__name__}")

    def _task_state(self, key: tuple[int, int]) -> list:
        st = self._tasks.get(key)
        if st is None:
            self.unknown_task_rows += 1
            st = [None, None, 0, None, None, None, None]  # priority is mandatory: 0 when unknown
            self._tasks[key] = st
        return st

    def _write_constraints(self, t: int, job: int, idx: int, cons: tuple[Constraint, ...]) -> None:
        w = self._parts["task_constraints"]
        for c in cons:
            w.write([t, job, idx, int(c.op), c.attribute, c.value])

    def _flush_usage(self, before: int | None) -> None:
        u = self._usage
        w = self._parts["task_usage"]
        while u and (before is None or u[0][0] < before):
            w.write(heapq.heappop(u)[2])

    def close(self) -> dict[str, int]:
        """Flush and finalise the part files; returns rows written per table (idempotent)."""
        if not self._closed:
            self._flush_usage(None)
            for pw in self._parts.values():
                pw.finish()
            self._closed = True
        return {t: pw.rows for t, pw in self._parts.items()}


def write_trace(events: Iterable[WorkloadEvent], root: str | os.PathLike, **kwargs) -> dict[str, int]:
    """Write ``events`` as GCD-2011 tables under ``root``; returns rows written per table."""
    with TraceWriter(root, **kwargs) as w:
        w.write_all(events)
        return w.close()
