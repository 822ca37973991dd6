"""The rows every cell writes, model or real (DESIGN §12): ticks.csv, migrations.csv and allocations.csv, each row validated on construction, and their CSV formatting."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any
import numpy as np
from cellbed.domain.errors import InvalidArgument


MIGRATION_OUTCOMES = ("succeeded", "refused", "failed")
ALLOCATION_OUTCOMES = ("placed", "pending", "rejected")


def check_num(row: str, name: str, v: Any, *, nan_ok: bool = False, lo: float = 0.0) -> None:
    t = type(v)
    if t is not float and t is not int:  # fast path above; numpy scalars and bad types below
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise InvalidArgument(f"{row}.{name}={v!r}: must be a number")
    if v != v:  # NaN
        if not nan_ok:
            raise InvalidArgument(f"{row}.{name} is NaN: it must be measured")
        return
    if v < lo or v == math.inf:
        raise InvalidArgument(f"{row}.{name}={v!r}: must be finite and >= {lo}")


def check_int(row: str, name: str, v: Any) -> None:
    if type(v) is not int and (isinstance(v, bool) or not isinstance(v, (int, np.integer))) or v < 0:
        raise InvalidArgument(f"{row}.{name}={v!r}: must be an integer >= 0")


@dataclass(frozen=True, slots=True)
class TickRow:
    """One row of ticks.csv: the cell at the end of a tick, and what happened during it.

    The six class counts (idle, overloaded, sta, ta, pa, da) partition the nodes (DESIGN §8).
    ``used_*``/``req_*`` are fractions of total cell capacity.  Migration counts and
    ``bytes_moved`` are for this tick only.  ``alloc_p50_ms``/``alloc_p99_ms`` are over the
    tasks placed during the tick (NaN when none were).
    """

    t_s: float
    nodes: int
    idle: int
    overloaded: int
    sta: int
    ta: int
    pa: int
    da: int
    used_cpu: float
    used_mem: float
    req_cpu: float
    req_mem: float
    tasks_running: int
    tasks_pending: int
    migrations_attempted: int = 0
    migrations_succeeded: int = 0
    migrations_refused: int = 0
    migrations_failed: int = 0
    bytes_moved: int = 0
    alloc_p50_ms: float = math.nan
    alloc_p99_ms: float = math.nan
    wall_s: float = math.nan
    """Wall-clock seconds from the writer's start to this row (filled in by the writer when
    NaN): how fast a model cell runs, tick by tick, warm start apart."""

    def __post_init__(self) -> None:
        check_num("TickRow", "t_s", self.t_s)
        for n in ("nodes", "idle", "overloaded", "sta", "ta", "pa", "da", "tasks_running", "tasks_pending",
                  "migrations_attempted", "migrations_succeeded", "migrations_refused", "migrations_failed",
                  "bytes_moved"):
            check_int("TickRow", n, getattr(self, n))
        classes = self.idle + self.overloaded + self.sta + self.ta + self.pa + self.da
        if classes != self.nodes:
            raise InvalidArgument(f"TickRow at t_s={self.t_s}: idle+overloaded+sta+ta+pa+da = {classes} but "
                                  f"nodes = {self.nodes}; every node is in exactly one class")
        for n in ("used_cpu", "used_mem", "req_cpu", "req_mem"):
            check_num("TickRow", n, getattr(self, n))
        for n in ("alloc_p50_ms", "alloc_p99_ms"):
            check_num("TickRow", n, getattr(self, n), nan_ok=True)


@dataclass(frozen=True, slots=True)
class MigrationRow:
    """One migration attempt (one TaskMigrationProcessRequest, or one manual migration).

    ``time_ms``/``downtime_ms`` are NaN when no transfer ran (a refusal). ``bytes`` counts what
    crossed the network, also for failed attempts. ``san_id`` ties attempts of one SAN together.
    """

    t_s: float
    vm: str
    src: str
    dst: str
    outcome: str
    forced: bool = False
    san_id: str = ""
    time_ms: float = math.nan
    downtime_ms: float = math.nan
    bytes: int = 0

    def __post_init__(self) -> None:
        check_num("MigrationRow", "t_s", self.t_s)
        if self.outcome not in MIGRATION_OUTCOMES:
            raise InvalidArgument(f"MigrationRow.outcome={self.outcome!r}: choose one of "
                                  f"{', '.join(MIGRATION_OUTCOMES)}")
        if not isinstance(self.forced, (bool, np.bool_)):
            raise InvalidArgument(f"MigrationRow.forced={self.forced!r}: must be a boolean")
        for n in ("vm", "src", "dst", "san_id"):
            if not isinstance(getattr(self, n), str):
                raise InvalidArgument(f"MigrationRow.{n}={getattr(self, n)!r}: must be a string")
        check_num("MigrationRow", "time_ms", self.time_ms, nan_ok=True)
        check_num("MigrationRow", "downtime_ms", self.downtime_ms, nan_ok=True)
        check_int("MigrationRow", "bytes", self.bytes)


@dataclass(frozen=True, slots=True)
class AllocationRow:
    """One task's allocation (Megha eq. 1–2): total = framework queue + processing + worker queue
    + communication, and, for placed tasks, = (start_s − arrival_s) · 1000 in simulated time.

    For tasks not placed, ``start_s`` and the times are NaN and ``host`` is empty.
    """

    task: str
    user: str
    frontend: str
    arrival_s: float
    start_s: float
    host: str
    framework_queue_ms: float
    processing_ms: float
    worker_queue_ms: float
    communication_ms: float
    total_ms: float
    attempts: int
    outcome: str = "placed"       # placed | pending | rejected
    # what the Megha agents know besides (not in allocations.csv):
    boot_ms: float = 0.0          # the VM's boot, after Task_Start
    lm: str = ""                  # the LM that validated the placement
    repartitioned: bool = False   # placed on a partition borrowed from another GM
    preempted_others: int = 0     # tasks preempted for it (fairness)
    requeues: int = 0

    def row(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def parts_ms(self) -> tuple[float, float, float, float]:
        return (self.framework_queue_ms, self.processing_ms, self.worker_queue_ms, self.communication_ms)

    def __post_init__(self) -> None:
        if self.outcome not in ALLOCATION_OUTCOMES:
            raise InvalidArgument(f"AllocationRow.outcome={self.outcome!r}: choose one of "
                                  f"{', '.join(ALLOCATION_OUTCOMES)}")
        for n in ("task", "user", "frontend", "host"):
            if not isinstance(getattr(self, n), str):
                raise InvalidArgument(f"AllocationRow.{n}={getattr(self, n)!r}: must be a string")
        check_num("AllocationRow", "arrival_s", self.arrival_s)
        check_int("AllocationRow", "attempts", self.attempts)
        placed = self.outcome == "placed"
        parts = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms")
        for n in ("start_s", "total_ms") + parts:
            check_num("AllocationRow", n, getattr(self, n), nan_ok=not placed)
        if placed:
            if not self.host:
                raise InvalidArgument(f"AllocationRow {self.task}: placed but host is empty")
            if self.start_s < self.arrival_s:
                raise InvalidArgument(f"AllocationRow {self.task}: start_s={self.start_s} < "
                                      f"arrival_s={self.arrival_s}")
            s = sum(getattr(self, n) for n in parts)
            if abs(s - self.total_ms) > 1e-3 + 1e-9 * abs(self.total_ms):
                raise InvalidArgument(f"AllocationRow {self.task}: total_ms={self.total_ms} but the four parts "
                                      f"sum to {s} (framework queue + processing + worker queue + communication)")


TICK_COLUMNS = tuple(f.name for f in fields(TickRow))
MIGRATION_COLUMNS = tuple(f.name for f in fields(MigrationRow))
ALLOCATION_COLUMNS = tuple(f.name for f in fields(AllocationRow))[:13]
"""allocations.csv: the row up to ``outcome`` (the agents' extra fields stay in memory)."""


def csv_columns(cls: type) -> tuple[str, ...]:
    """The columns of *cls*'s CSV file, in order."""
    return ALLOCATION_COLUMNS if cls is AllocationRow else tuple(f.name for f in fields(cls))


def fmt_float(v: Any) -> str:
    v = float(v)
    return "" if v != v else repr(v)


def fmt_int(v: Any) -> str:
    return str(int(v))


def fmt_bool(v: Any) -> str:
    return "true" if v else "false"


def fmt_str(v: Any) -> str:
    return v


def formatters(cls: type) -> tuple[tuple[str, Any], ...]:
    """(column, formatter) per column of a row dataclass: floats as repr (exact round trip, NaN → empty),
    ints as digits, bools as true/false."""
    by = {"float": fmt_float, "int": fmt_int, "bool": fmt_bool, "str": fmt_str}
    cols = csv_columns(cls)
    return tuple((f.name, by[f.type if isinstance(f.type, str) else f.type.__name__]) for f in fields(cls)
                 if f.name in cols)


FORMATTERS = {cls: formatters(cls) for cls in (TickRow, MigrationRow, AllocationRow)}


def csv_cells(row: Any) -> list[str]:
    return [fmt(getattr(row, name)) for name, fmt in FORMATTERS[type(row)]]
