"""The GCD-2011 tables as files: names, column counts, event-type codes, row parsers, part listing and reading (gzip or plain), and the statistics the reader keeps."""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from pathlib import Path
from typing import Iterator
from cellbed.domain.errors import InvalidArgument
from cellbed.workload.events import AddTask, AttrValue


#: Timestamp meaning "after the trace window" (digest §C.1, §E.1).
AFTER_WINDOW_US = 2**63 - 1

#: Table names, in same-timestamp processing order.
TABLES = ("machine_events", "machine_attributes", "task_events", "task_constraints", "task_usage")

#: Number of CSV columns per table (digest §E.2).
NCOLS = {"machine_events": 6, "machine_attributes": 5, "task_events": 13, "task_constraints": 6, "task_usage": 20}

#: Counter keys a TraceReader may report.
STAT_KEYS = (
    "rows.<table>",  # rows read per table
    "malformed_rows.<table>",  # mandatory field missing or unparsable; row skipped
    "after_window_rows",  # time (or usage end) = 2^63-1; row skipped
    "out_of_order_rows",  # time went backwards within a table; put back in order (reorder window)
    "late_rows",  # ...further back than the reorder window: time raised to the last one released
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
INFO_KEYS = frozenset({"usage_missing_machine", "usage_before_window", "dropped_machine_rows", "dropped_task_rows",
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


INT_RE = re.compile(r"-?\d+\Z")
PART_RE = re.compile(r"part-(\d+)-of-(\d+)\.csv(\.gz)?\Z")


class Malformed(Exception):
    pass


def p_int(s: str) -> int:
    if s == "":
        raise Malformed
    return int(s)


def p_opt_int(s: str) -> int | None:
    return None if s == "" else int(s)


def p_opt_float(s: str) -> float | None:
    return None if s == "" else float(s)


def p_opt_str(s: str) -> str | None:
    return None if s == "" else s


def p_attr_value(s: str) -> AttrValue:
    if s == "":
        return None
    return int(s) if INT_RE.match(s) else s


def p_bool(s: str) -> bool:
    if s in ("1", "true", "True"):
        return True
    if s in ("0", "false", "False"):
        return False
    raise Malformed


def p_opt_bool(s: str) -> bool | None:
    return None if s == "" else p_bool(s)


def table_files(root: Path, table: str) -> list[Path]:
    d = root / table
    if not d.is_dir():
        return []
    files = [p for p in d.iterdir() if p.is_file() and (p.name.endswith(".csv") or p.name.endswith(".csv.gz"))]

    def key(p: Path):
        m = PART_RE.search(p.name)
        return (int(m.group(1)) if m else -1, p.name)

    return sorted(files, key=key)


def open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, "r", encoding="utf-8", newline="")


#: What reading a part may raise when the file is damaged (truncated, not gzip, bad bytes).
READ_ERRORS = (OSError, EOFError, zlib.error, csv.Error, UnicodeDecodeError)

LINE_BITS = 40
"""A row's location is one int: ``file index << LINE_BITS | line`` (see :func:`read_located`)."""


def describe_read_error(e: BaseException) -> str:
    """One line for what went wrong reading a part."""
    if isinstance(e, EOFError):
        return "truncated: the gzip stream ends before its end-of-stream marker"
    if isinstance(e, gzip.BadGzipFile):
        return f"not a gzip file ({e})"
    if isinstance(e, zlib.error):
        return f"corrupt gzip data ({e})"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text ({e.reason} at byte {e.start})"
    if isinstance(e, FileNotFoundError):
        return "missing"
    if isinstance(e, PermissionError):
        return "not readable (permission denied)"
    return f"{type(e).__name__}: {e}"


def read_located(files: list[Path], first_index: int = 0) -> Iterator[tuple[int, list[str]]]:
    """(location, row) of every non-empty CSV row of *files* in order; the location packs the
    file's index (*first_index* for the first file) and the 1-based line. A damaged file
    raises InvalidArgument naming the file, the line and the problem."""
    for k, path in enumerate(files):
        base = (first_index + k) << LINE_BITS
        reader = None
        try:
            with open_text(path) as fh:
                reader = csv.reader(fh)
                for row in reader:
                    if row:
                        yield base | reader.line_num, row
        except READ_ERRORS as e:
            line = (reader.line_num + 1) if reader is not None else 1
            raise InvalidArgument(f"{path}:{line}: {describe_read_error(e)}") from None


def read_rows(files: list[Path]) -> Iterator[list[str]]:
    for _, row in read_located(files):
        yield row


def mix64(x: int) -> int:
    """splitmix64 finaliser: a deterministic 64-bit hash of an integer."""
    x &= 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def pack_task(job: int, idx: int) -> int:
    """One int64 per task for the sub-sampling sets (GCD job IDs < 2^39, task indices < 2^24)."""
    return (job << 24) | (idx & 0xFFFFFF)


class TaskState:
    __slots__ = ("user", "priority", "sclass", "cpu", "mem", "disk", "diff", "constraints")

    def __init__(self, user, priority, sclass, cpu, mem, disk, diff, constraints=()):
        self.user, self.priority, self.sclass = user, priority, sclass
        self.cpu, self.mem, self.disk, self.diff = cpu, mem, disk, diff
        self.constraints = constraints

    def add_event(self, t: int, job: int, idx: int) -> AddTask:
        return AddTask(t, job, idx, self.user, self.priority, self.sclass, self.cpu, self.mem, self.disk,
                       self.constraints, self.diff)
