"""Write an event stream as GCD-2011-format tables (the reader's inverse, for tests and samples): one gzip-compressed CSV part series per table."""
from __future__ import annotations

import csv
import gzip
import heapq
import io
import os
from pathlib import Path
from typing import Iterable
from cellbed.workload.events import (
    AddNode,
    AddNodeAttributes,
    AddTask,
    Constraint,
    RemoveNode,
    RemoveNodeAttributes,
    RemoveTask,
    UpdateNodeTotalResources,
    UpdateTaskConstraints,
    UpdateTaskRequiredResources,
    UpdateTaskUsedResources,
    WorkloadEvent,
)
from cellbed.workload.trace_tables import MachineEventType, TABLES, TaskEventType


class PartWriter:
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
        self._parts = {t: PartWriter(self.root / t, compress, rows_per_part) for t in TABLES}
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
