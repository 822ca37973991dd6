"""The results folder of a run (DESIGN §12): writing it as the run goes, and loading it for analysis.

Layout::

    manifest.json     scenario resolved, seed, git revision, policy at each stage, versions
    events.jsonl      {"t_s": ..., "kind": ..., ...} per line; the last line is run_completed
    ticks.csv         one row per tick (TICK_COLUMNS)
    migrations.csv    one row per migration attempt (MIGRATION_COLUMNS)
    allocations.csv   one row per task (ALLOCATION_COLUMNS)

Units: ``t_s``, ``arrival_s`` and ``start_s`` are simulated seconds; ``*_ms`` are
milliseconds; ``bytes`` are bytes; ``used_*``/``req_*`` are fractions of the cell's total
capacity (0.45 = 45 %).  Migration columns of ``ticks.csv`` count what happened during
that tick.  Empty CSV cells are "not measured" (NaN on load).

Writing streams: every row goes straight to its file, every file is flushed at each
tick and at the end, and nothing is kept in memory but the open files and a few
counters.  Only :meth:`ResultsWriter.complete` writes ``run_completed``; a run that
crashes leaves a folder :func:`load_run` refuses.

Typical use by the runner::

    manifest = build_manifest(scenario, git_revision=git_revision(repo), versions=runtime_versions())
    with ResultsWriter(out_dir, manifest) as w:
        w.event(0.0, "run_started", nodes=200)
        ...
        w.allocation(AllocationRow(...))
        w.migration(MigrationRow(...))
        w.tick(TickRow(...))
        ...
        w.complete({"wall_s": 12.3, "tasks": 4567})
"""
from __future__ import annotations

import csv
import dataclasses
import enum
import io
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from cellbed.domain.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

__all__ = [
    "ALLOCATION_COLUMNS",
    "ALLOCATION_OUTCOMES",
    "AllocationRow",
    "IncompleteRun",
    "MIGRATION_COLUMNS",
    "MIGRATION_OUTCOMES",
    "MigrationRow",
    "RESULTS_FORMAT",
    "ResultsWriter",
    "Run",
    "TICK_COLUMNS",
    "TickRow",
    "build_manifest",
    "git_revision",
    "load_run",
    "read_table",
    "runtime_versions",
]

RESULTS_FORMAT = "cellbed-results/1"
MIGRATION_OUTCOMES = ("succeeded", "refused", "failed")
"""refused: the target said no (final check, collision); failed: the live migration itself failed or
was aborted (the VM stays on its source)."""
ALLOCATION_OUTCOMES = ("placed", "pending", "rejected")
"""placed: started on a host; pending: still queued when the run ended; rejected: no node can ever
hold it (constraints or size) and the front-end gave up."""

MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
TICKS = "ticks.csv"
MIGRATIONS = "migrations.csv"
ALLOCATIONS = "allocations.csv"
RUN_COMPLETED = "run_completed"


class IncompleteRun(FailedPrecondition):
    """A results folder without ``run_completed`` at the end of events.jsonl."""


# ---------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------

def _num(row: str, name: str, v: Any, *, nan_ok: bool = False, lo: float = 0.0) -> None:
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


def _int(row: str, name: str, v: Any) -> None:
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
        _num("TickRow", "t_s", self.t_s)
        for n in ("nodes", "idle", "overloaded", "sta", "ta", "pa", "da", "tasks_running", "tasks_pending",
                  "migrations_attempted", "migrations_succeeded", "migrations_refused", "migrations_failed",
                  "bytes_moved"):
            _int("TickRow", n, getattr(self, n))
        classes = self.idle + self.overloaded + self.sta + self.ta + self.pa + self.da
        if classes != self.nodes:
            raise InvalidArgument(f"TickRow at t_s={self.t_s}: idle+overloaded+sta+ta+pa+da = {classes} but "
                                  f"nodes = {self.nodes}; every node is in exactly one class")
        for n in ("used_cpu", "used_mem", "req_cpu", "req_mem"):
            _num("TickRow", n, getattr(self, n))
        for n in ("alloc_p50_ms", "alloc_p99_ms"):
            _num("TickRow", n, getattr(self, n), nan_ok=True)


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
        _num("MigrationRow", "t_s", self.t_s)
        if self.outcome not in MIGRATION_OUTCOMES:
            raise InvalidArgument(f"MigrationRow.outcome={self.outcome!r}: choose one of "
                                  f"{', '.join(MIGRATION_OUTCOMES)}")
        if not isinstance(self.forced, (bool, np.bool_)):
            raise InvalidArgument(f"MigrationRow.forced={self.forced!r}: must be a boolean")
        for n in ("vm", "src", "dst", "san_id"):
            if not isinstance(getattr(self, n), str):
                raise InvalidArgument(f"MigrationRow.{n}={getattr(self, n)!r}: must be a string")
        _num("MigrationRow", "time_ms", self.time_ms, nan_ok=True)
        _num("MigrationRow", "downtime_ms", self.downtime_ms, nan_ok=True)
        _int("MigrationRow", "bytes", self.bytes)


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
    outcome: str

    def __post_init__(self) -> None:
        if self.outcome not in ALLOCATION_OUTCOMES:
            raise InvalidArgument(f"AllocationRow.outcome={self.outcome!r}: choose one of "
                                  f"{', '.join(ALLOCATION_OUTCOMES)}")
        for n in ("task", "user", "frontend", "host"):
            if not isinstance(getattr(self, n), str):
                raise InvalidArgument(f"AllocationRow.{n}={getattr(self, n)!r}: must be a string")
        _num("AllocationRow", "arrival_s", self.arrival_s)
        _int("AllocationRow", "attempts", self.attempts)
        placed = self.outcome == "placed"
        parts = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms")
        for n in ("start_s", "total_ms") + parts:
            _num("AllocationRow", n, getattr(self, n), nan_ok=not placed)
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
ALLOCATION_COLUMNS = tuple(f.name for f in fields(AllocationRow))


def _fmt_float(v: Any) -> str:
    v = float(v)
    return "" if v != v else repr(v)


def _fmt_int(v: Any) -> str:
    return str(int(v))


def _fmt_bool(v: Any) -> str:
    return "true" if v else "false"


def _fmt_str(v: Any) -> str:
    return v


def _formatters(cls: type) -> tuple[tuple[str, Any], ...]:
    """(column, formatter) per column of a row dataclass: floats as repr (exact round trip, NaN → empty),
    ints as digits, bools as true/false."""
    by = {"float": _fmt_float, "int": _fmt_int, "bool": _fmt_bool, "str": _fmt_str}
    return tuple((f.name, by[f.type if isinstance(f.type, str) else f.type.__name__]) for f in fields(cls))


_FMT = {cls: _formatters(cls) for cls in (TickRow, MigrationRow, AllocationRow)}


def _cells(row: Any) -> list[str]:
    return [fmt(getattr(row, name)) for name, fmt in _FMT[type(row)]]


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------

def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, enum.Enum):
        return o.name
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"{type(o).__name__} is not JSON-serialisable")


def _finite(o: Any) -> Any:
    """Replace NaN by null and ±inf by "inf"/"-inf" (JSON has neither)."""
    if isinstance(o, float):
        return o if math.isfinite(o) else (None if math.isnan(o) else ("inf" if o > 0 else "-inf"))
    if isinstance(o, Mapping):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, np.generic):
        return _finite(o.item())
    return o


def _dumps(obj: Any, **kw: Any) -> str:
    try:
        return json.dumps(obj, default=_json_default, allow_nan=False, ensure_ascii=False, **kw)
    except ValueError:  # NaN/inf somewhere
        return json.dumps(_finite(json.loads(json.dumps(obj, default=_json_default))), allow_nan=False,
                          ensure_ascii=False, **kw)


# ---------------------------------------------------------------------------
# manifest helpers (called explicitly by the runner; nothing runs at import)
# ---------------------------------------------------------------------------

def git_revision(repo: str | Path) -> str | None:
    """The commit of *repo* (40 hex), with ``-dirty`` when tracked files differ from it; None if unknown."""
    try:
        rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "diff", "--quiet", "HEAD", "--"], capture_output=True,
                               timeout=30).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}-dirty" if dirty else rev


def runtime_versions(qemu_binary: str = "qemu-system-x86_64") -> dict[str, str | None]:
    """Versions of Python, the kernel, numpy, libvirt and QEMU; None where not obtainable."""
    out: dict[str, str | None] = {"python": platform.python_version(), "kernel": platform.release(),
                                  "numpy": np.__version__}
    try:
        from importlib.metadata import version
        out["cellbed"] = version("cellbed")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        out["cellbed"] = None
    try:
        import libvirt  # noqa: PLC0415
        v = libvirt.getVersion()
        out["libvirt"] = f"{v // 1_000_000}.{v // 1000 % 1000}.{v % 1000}"
    except Exception:  # noqa: BLE001 - no libvirt here
        out["libvirt"] = None
    try:
        r = subprocess.run([qemu_binary, "--version"], capture_output=True, text=True, timeout=10)
        out["qemu"] = r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout else None
    except (OSError, subprocess.SubprocessError):
        out["qemu"] = None
    return out


def build_manifest(scenario: Any, *, git_revision: str | None = None,
                   versions: Mapping[str, str | None] | None = None,
                   stages: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None,
                   created_unix_s: float | None = None) -> dict[str, Any]:
    """The content of manifest.json.

    *scenario* is a :class:`~cellbed.experiment.scenario.Scenario` (or the dict of its
    ``as_manifest()``).  *stages* adds or replaces stage policies the runner decides (e.g.
    ``{"T11": "requeue tasks of a removed node"}``).  *extra* is kept under ``"extra"``.
    """
    sc = dict(scenario.as_manifest() if hasattr(scenario, "as_manifest") else scenario)
    st = dict(sc.pop("stages", {}) or {})
    st.update(stages or {})
    run = sc.get("run", {})
    return {
        "format": RESULTS_FORMAT,
        "name": run.get("name", ""),
        "seed": run.get("seed"),
        "created_unix_s": time.time() if created_unix_s is None else created_unix_s,
        "git_revision": git_revision,
        "versions": dict(versions or {}),
        "stages": st,
        "scenario": sc,
        "extra": dict(extra or {}),
    }


# ---------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------

class ResultsWriter:
    """Writes one results folder as the run goes.

    ``ResultsWriter(out_dir, manifest)`` creates *out_dir* (refusing one that already holds a run
    unless *overwrite*), writes manifest.json at once, and opens the other files with their headers.
    Rows go out as they come; files are flushed at every :meth:`tick` and at the end.
    Only :meth:`complete` writes ``run_completed`` and closes; :meth:`close` (or leaving the ``with``
    block on an exception) closes without it, so the folder reads as incomplete.
    """

    def __init__(self, out_dir: str | Path, manifest: Mapping[str, Any], *, overwrite: bool = False) -> None:
        self.path = Path(out_dir)
        if (self.path / EVENTS).exists() and not overwrite:
            raise AlreadyExists(f"{self.path} already holds a run ({EVENTS} exists): choose another --out "
                                "or remove it")
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(_dumps(dict(manifest), indent=1, sort_keys=False) + "\n")
        os.replace(tmp, self.path / MANIFEST)
        self._events = open(self.path / EVENTS, "w", encoding="utf-8")
        self._files: list[io.TextIOBase] = [self._events]
        self._csv: dict[str, Any] = {}
        for name, cols in ((TICKS, TICK_COLUMNS), (MIGRATIONS, MIGRATION_COLUMNS), (ALLOCATIONS, ALLOCATION_COLUMNS)):
            f = open(self.path / name, "w", encoding="utf-8", newline="")
            w = csv.writer(f, lineterminator="\n")
            w.writerow(cols)
            self._files.append(f)
            self._csv[name] = w
        self.counts = {"events": 0, "ticks": 0, "migrations": 0, "allocations": 0}
        self._last_tick_s = -math.inf
        self._last_t_s = 0.0
        self._wall0 = time.perf_counter()
        self._closed = False
        self.completed = False

    # -- rows ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise FailedPrecondition(f"results writer for {self.path} is closed"
                                     + (" (run_completed written)" if self.completed else ""))

    def event(self, t_s: float, kind: str, **data: Any) -> None:
        """Append ``{"t_s": t_s, "kind": kind, **data}`` to events.jsonl (``run_completed`` is reserved)."""
        self._check_open()
        _num("event", "t_s", t_s)
        if not isinstance(kind, str) or not kind:
            raise InvalidArgument(f"event kind={kind!r}: must be a non-empty string")
        if kind == RUN_COMPLETED:
            raise InvalidArgument("event kind 'run_completed' is written only by ResultsWriter.complete()")
        if "t_s" in data or "kind" in data:
            raise InvalidArgument("event fields may not be named t_s or kind")
        self._events.write(_dumps({"t_s": float(t_s), "kind": kind, **data}) + "\n")
        self._last_t_s = max(self._last_t_s, float(t_s))
        self.counts["events"] += 1

    @staticmethod
    def _row(cls: type, row: Any, kw: Mapping[str, Any]) -> Any:
        if row is not None and kw:
            raise InvalidArgument(f"give a {cls.__name__} or keyword columns, not both")
        if row is None:
            try:
                row = cls(**kw)
            except TypeError as e:
                cols = ", ".join(f.name for f in fields(cls))
                raise InvalidArgument(f"{cls.__name__}: {e} (columns: {cols})") from None
        elif not isinstance(row, cls):
            raise InvalidArgument(f"expected a {cls.__name__}, got {type(row).__name__}")
        return row

    def tick(self, row: TickRow | None = None, /, **columns: Any) -> None:
        """Append one tick row (a TickRow, or its columns as keywords) and flush every file."""
        self._check_open()
        row = self._row(TickRow, row, columns)
        if not row.t_s > self._last_tick_s:
            raise InvalidArgument(f"TickRow.t_s={row.t_s} must be after the previous tick ({self._last_tick_s})")
        self._last_tick_s = row.t_s
        self._last_t_s = max(self._last_t_s, row.t_s)
        if math.isnan(row.wall_s):
            row = dataclasses.replace(row, wall_s=round(time.perf_counter() - self._wall0, 3))
        self._csv[TICKS].writerow(_cells(row))
        self.counts["ticks"] += 1
        self.flush()

    def migration(self, row: MigrationRow | None = None, /, **columns: Any) -> None:
        """Append one migration attempt."""
        self._check_open()
        row = self._row(MigrationRow, row, columns)
        self._csv[MIGRATIONS].writerow(_cells(row))
        self._last_t_s = max(self._last_t_s, row.t_s)
        self.counts["migrations"] += 1

    def allocation(self, row: AllocationRow | None = None, /, **columns: Any) -> None:
        """Append one task's allocation."""
        self._check_open()
        row = self._row(AllocationRow, row, columns)
        self._csv[ALLOCATIONS].writerow(_cells(row))
        self.counts["allocations"] += 1

    def flush(self) -> None:
        """Push every buffered row to the OS."""
        for f in self._files:
            f.flush()

    # -- end ----------------------------------------------------------------------
    def complete(self, summary: Mapping[str, Any] | None = None, *, t_s: float | None = None) -> None:
        """Write the final ``run_completed`` event (with *summary* and the row counts), fsync and close.

        *t_s* defaults to the latest time written.
        """
        self._check_open()
        t = self._last_t_s if t_s is None else t_s
        _num("run_completed", "t_s", t)
        body = dict(summary or {})
        for k in ("t_s", "kind"):
            if k in body:
                raise InvalidArgument(f"run_completed summary may not contain {k!r}")
        body.setdefault("rows", dict(self.counts))
        self._events.write(_dumps({"t_s": float(t), "kind": RUN_COMPLETED, **body}) + "\n")
        self.flush()
        for f in self._files:
            os.fsync(f.fileno())
        self.completed = True
        self.close()

    def close(self) -> None:
        """Close every file; without :meth:`complete` first, the folder stays incomplete."""
        if self._closed:
            return
        self._closed = True
        for f in self._files:
            f.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------

_ROW_TYPES = {TICKS: TickRow, MIGRATIONS: MigrationRow, ALLOCATIONS: AllocationRow}


def _kinds(cls: type) -> dict[str, str]:
    """Column → 'f' (float), 'i' (int), 'b' (bool) or 's' (str), from the row dataclass annotations."""
    ann = {"float": "f", "int": "i", "bool": "b", "str": "s"}
    return {f.name: ann[f.type if isinstance(f.type, str) else f.type.__name__] for f in fields(cls)}


def read_table(path: str | Path, row_type: type, columns: Sequence[str] | None = None,
               chunk_rows: int = 65536) -> dict[str, np.ndarray]:
    """Read one results CSV into column arrays (float64 with NaN for empty cells, int64, bool, or object).

    The header must be exactly the row type's columns.  Reads in chunks of *chunk_rows*, so memory
    is the result plus one chunk.
    """
    path = Path(path)
    kinds = _kinds(row_type)
    expected = list(kinds)
    want = list(columns) if columns is not None else expected
    for c in want:
        if c not in kinds:
            raise InvalidArgument(f"{path.name} has no column {c!r} (columns: {', '.join(expected)})")
    parts: dict[str, list[np.ndarray]] = {c: [] for c in want}
    defaults = {f.name: f.default for f in fields(row_type) if f.default is not dataclasses.MISSING}
    with open(path, encoding="utf-8", newline="") as f:
        rd = csv.reader(f)
        header = next(rd, None)
        if header != expected:
            # a folder written before a column was added at the end: that column reads as its default
            older = (header is not None and 0 < len(header) < len(expected) and header == expected[:len(header)]
                     and all(c in defaults for c in expected[len(header):]))
            if not older:
                raise FailedPrecondition(f"{path}: header {header} differs from the expected columns {expected}")
            expected = header
        idx = {c: expected.index(c) for c in want if c in expected}
        buf: list[list[str]] = []

        def drain() -> None:
            if not buf:
                return
            for c in want:
                if c not in idx:
                    parts[c].append(np.full(len(buf), defaults[c], dtype=np.float64 if kinds[c] == "f" else object))
                    continue
                i = idx[c]
                col = [r[i] for r in buf]
                k = kinds[c]
                try:
                    if k == "f":
                        arr = np.array([x or "nan" for x in col], dtype=np.float64)
                    elif k == "i":
                        arr = np.array(col, dtype=np.int64)
                    elif k == "b":
                        arr = np.array(col) == "true"
                    else:
                        arr = np.array(col, dtype=object)
                except ValueError as e:
                    raise FailedPrecondition(f"{path}: column {c}: {e}") from None
                parts[c].append(arr)
            buf.clear()

        for n, r in enumerate(rd, start=2):
            if len(r) != len(expected):
                raise FailedPrecondition(f"{path}:{n}: {len(r)} fields, expected {len(expected)}")
            buf.append(r)
            if len(buf) >= chunk_rows:
                drain()
        drain()
    empty = {"f": np.float64, "i": np.int64, "b": bool, "s": object}
    return {c: (np.concatenate(parts[c]) if parts[c] else np.array([], dtype=empty[kinds[c]])) for c in want}


def _last_line(path: Path) -> str:
    """The last non-empty line of *path*, read from the end."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        block = 65536
        data = b""
        pos = end
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
            stripped = data.rstrip(b"\n")
            if b"\n" in stripped or pos == 0:
                return stripped.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    return ""


@dataclass(frozen=True)
class Run:
    """A loaded, completed results folder. ``ticks`` is read at once (it is small); migrations and
    allocations are read on demand."""

    path: Path
    manifest: dict[str, Any]
    completed: dict[str, Any]
    ticks: dict[str, np.ndarray]

    @property
    def name(self) -> str:
        return self.manifest.get("name") or self.path.name

    def migrations(self, columns: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        return read_table(self.path / MIGRATIONS, MigrationRow, columns)

    def allocations(self, columns: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        return read_table(self.path / ALLOCATIONS, AllocationRow, columns)

    def events(self) -> Iterator[dict[str, Any]]:
        """Stream events.jsonl (the last one is run_completed)."""
        with open(self.path / EVENTS, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def load_run(path: str | Path) -> Run:
    """Load a results folder; refuse (IncompleteRun) one whose events.jsonl does not end with run_completed."""
    p = Path(path)
    if not p.is_dir():
        raise NotFound(f"no results folder {str(p)!r}")
    for name in (MANIFEST, EVENTS, TICKS, MIGRATIONS, ALLOCATIONS):
        if not (p / name).is_file():
            raise IncompleteRun(f"{p} is not a complete results folder: {name} is missing")
    last = _last_line(p / EVENTS)
    try:
        ev = json.loads(last) if last else None
    except json.JSONDecodeError:
        ev = None
    if not isinstance(ev, dict) or ev.get("kind") != RUN_COMPLETED:
        raise IncompleteRun(f"{p}: events.jsonl does not end with a run_completed event, so the run crashed, "
                            "was stopped, or is still running; analysis refuses incomplete runs")
    try:
        manifest = json.loads((p / MANIFEST).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise FailedPrecondition(f"{p / MANIFEST}: not valid JSON: {e}") from None
    return Run(path=p, manifest=manifest, completed=ev, ticks=read_table(p / TICKS, TickRow))
