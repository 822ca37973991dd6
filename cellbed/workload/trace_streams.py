"""How the trace reader turns each table's files into one time-ordered stream of parsed rows:
parsing (a row's file and line travel with it, as its last element), rows after the trace window
skipped, the bounded reorder window, usage records re-keyed by their end time, and consecutive
attribute and constraint rows grouped."""
from __future__ import annotations

import heapq
from typing import Iterator

from cellbed.workload.events import Constraint, ConstraintOp
from cellbed.workload.reorder import ReorderStats, reorder
from cellbed.workload.trace_tables import (
    AFTER_WINDOW_US,
    NCOLS,
    TABLES,
    Malformed,
    p_attr_value,
    p_bool,
    p_int,
    p_opt_bool,
    p_opt_float,
    p_opt_int,
    p_opt_str,
    read_located,
)


class StreamsMixin:
    """Part of TraceReader (which owns ``_files``, ``_first_file``, ``stats``, ``reorders``,
    ``options`` and ``_note``)."""

    # ------------------------------------------------------------------ parsing
    def _parsed(self, table: str) -> Iterator[tuple]:
        stats = self.stats
        ncols = NCOLS[table]
        parse = getattr(self, f"_parse_{table}")
        rows_key, bad_key = f"rows.{table}", f"malformed_rows.{table}"
        for loc, row in read_located(self._files[table], self._first_file[table]):
            stats[rows_key] += 1
            if len(row) < ncols:
                row = row + [""] * (ncols - len(row))
            try:
                yield parse(row) + (loc,)
            except (Malformed, ValueError, KeyError):
                self._note(bad_key, loc)

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

    # ------------------------------------------------------------ ordering
    def _in_window(self, rows: Iterator[tuple]) -> Iterator[tuple]:
        """Skip rows at 2^63-1 ("after the window"; for usage: ending after it)."""
        for r in rows:
            if r[0] == AFTER_WINDOW_US:
                self._note("after_window_rows", r[-1])
                continue
            yield r

    def _usage_by_end(self, rows: Iterator[tuple]) -> Iterator[tuple]:
        """Start-ordered usage rows re-ordered by end time (a record is safe once its end ≤ the
        next start, since every later record starts, and so ends, no earlier)."""
        heap: list[tuple[int, int, tuple]] = []
        seq = 0
        for r in rows:
            start = r[2]
            while heap and heap[0][0] <= start:
                yield heapq.heappop(heap)[2]
            heapq.heappush(heap, (r[0], seq, r))
            seq += 1
        while heap:
            yield heapq.heappop(heap)[2]

    def _monotone(self, rows: Iterator[tuple]) -> Iterator[tuple]:
        """A last guard for usage rows: a late row whose start was raised may end before rows
        already released; its time is raised too (counted as late)."""
        last = None
        for r in rows:
            t = r[0]
            if last is not None and t < last:
                self._late_usage += 1
                self._note("late_rows", r[-1])
                r = (last,) + r[1:]
            else:
                last = t
            yield r

    @staticmethod
    def _grouped(rows: Iterator[tuple], key) -> Iterator[list[tuple]]:
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
        """One time-ordered row stream per table present, in TABLES order (the merge's tiebreak).
        Attribute rows become (time, 1, machine, deleted, [(name, value)...], loc); constraint
        rows (time, 3, job, index, (Constraint...), loc)."""
        out = []
        window = self.options.reorder_window_us
        for table in TABLES:
            if not self._files[table]:
                continue
            st = self.reorders[table] = ReorderStats()
            rows = self._in_window(self._parsed(table))
            if table == "task_usage":
                rows = self._monotone(self._usage_by_end(reorder(rows, window, index=2, stats=st)))
            else:
                rows = reorder(rows, window, stats=st)
            if table == "machine_attributes":
                rows = ((g[0][0], 1, g[0][2], g[0][5], [(r[3], r[4]) for r in g], g[0][-1])
                        for g in self._grouped(rows, lambda r: (r[0], r[2], r[5])))
            elif table == "task_constraints":
                rows = ((g[0][0], 3, g[0][2], g[0][3], tuple(Constraint(r[5], r[4], r[6]) for r in g), g[0][-1])
                        for g in self._grouped(rows, lambda r: (r[0], r[2], r[3])))
            out.append(rows)
        return out
