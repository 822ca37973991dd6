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
import importlib.metadata
import io
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.metrics.rows import (ALLOCATION_COLUMNS, ALLOCATION_OUTCOMES, MIGRATION_COLUMNS, MIGRATION_OUTCOMES, TICK_COLUMNS,
                                  AllocationRow, MigrationRow, TickRow, check_num, csv_cells)
from cellbed.experiment.results import folder
from cellbed.experiment.results.files import (ALLOCATIONS, EVENTS, IncompleteRun, MANIFEST, MIGRATIONS, RESULTS_FORMAT,
                                              RUN_COMPLETED, STAGES, TICKS)
from cellbed.runtime.plugins.stats import STAGE_COLUMNS, StageStats
from cellbed.experiment.results.reader import Run, load_run, read_table

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

"""refused: the target said no (final check, collision); failed: the live migration itself failed or
was aborted (the VM stays on its source)."""
"""placed: started on a host; pending: still queued when the run ended; rejected: no node can ever
hold it (constraints or size) and the front-end gave up."""

# ---------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------

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


def _first_line(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout.strip() else None


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def runtime_versions(qemu_binary: str = "qemu-system-x86_64") -> dict[str, str | None]:
    """Versions of Python, the kernel, numpy, libvirt and QEMU; None where not obtainable. libvirt's
    comes from ``virsh --version`` (else the libvirt-python distribution): only daemon/hv_libvirt.py
    imports libvirt."""
    return {"python": platform.python_version(), "kernel": platform.release(), "numpy": np.__version__,
            "cellbed": _dist_version("cellbed"),
            "libvirt": _first_line(["virsh", "--version"]) or _dist_version("libvirt-python"),
            "qemu": _first_line([qemu_binary, "--version"])}


def build_manifest(scenario: Any, *, git_revision: str | None = None,
                   versions: Mapping[str, str | None] | None = None,
                   stages: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None,
                   created_unix_s: float | None = None,
                   migration_calibration: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The content of manifest.json.

    *scenario* is a :class:`~cellbed.experiment.scenario.file.Scenario` (or the dict of its
    ``as_manifest()``).  *stages* adds or replaces stage policies the runner decides (e.g.
    ``{"T11": "requeue tasks of a removed node"}``).  *extra* is kept under ``"extra"``.
    *migration_calibration* (the cost model's calibration file the scenario named: path, SHA-256,
    version, held-out errors) is kept under ``"migration_calibration"``, None without one.
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
        "migration_calibration": dict(migration_calibration) if migration_calibration is not None else None,
        "extra": dict(extra or {}),
    }


# ---------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------

class ResultsWriter:
    """Writes one results folder as the run goes.

    ``ResultsWriter(out_dir, manifest)`` creates *out_dir* (refusing one that already holds a run
    unless *overwrite*; cellbed/experiment/results/folder.py), writes manifest.json at once, and opens the other files with their headers.
    Rows go out as they come; files are flushed at every :meth:`tick` and at the end.
    Only :meth:`complete` writes ``run_completed`` and closes; :meth:`close` (or leaving the ``with``
    block on an exception) closes without it, so the folder reads as incomplete.
    """

    def __init__(self, out_dir: str | Path, manifest: Mapping[str, Any], *, overwrite: bool = False) -> None:
        self.path = folder.prepare(out_dir, overwrite)   # refuses files, foreign folders, runs
        self.path.mkdir(parents=True, exist_ok=True)
        self._manifest = dict(manifest)
        self._write_manifest()
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

    def _write_manifest(self) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(_dumps(self._manifest, indent=1, sort_keys=False) + "\n")
        os.replace(tmp, self.path / MANIFEST)

    def update_manifest(self, **sections: Any) -> None:
        """Add (or replace) top-level sections of manifest.json, rewritten whole and atomically:
        what is known only once the run has read its input (the trace reader's counts)."""
        self._check_open()
        for k in sections:
            if k in ("format", "scenario", "stages", "seed", "name"):
                raise InvalidArgument(f"manifest section {k!r} is written at the start of the run and stays")
        self._manifest.update(sections)
        self._write_manifest()

    @property
    def last_t_s(self) -> float:
        """The latest simulated time written (an event's or a row's)."""
        return self._last_t_s

    # -- rows ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise FailedPrecondition(f"results writer for {self.path} is closed"
                                     + (" (run_completed written)" if self.completed else ""))

    def event(self, t_s: float, kind: str, **data: Any) -> None:
        """Append ``{"t_s": t_s, "kind": kind, **data}`` to events.jsonl (``run_completed`` is reserved)."""
        self._check_open()
        check_num("event", "t_s", t_s)
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
        self._csv[TICKS].writerow(csv_cells(row))
        self.counts["ticks"] += 1
        self.flush()

    def migration(self, row: MigrationRow | None = None, /, **columns: Any) -> None:
        """Append one migration attempt."""
        self._check_open()
        row = self._row(MigrationRow, row, columns)
        self._csv[MIGRATIONS].writerow(csv_cells(row))
        self._last_t_s = max(self._last_t_s, row.t_s)
        self.counts["migrations"] += 1

    def allocation(self, row: AllocationRow | None = None, /, **columns: Any) -> None:
        """Append one task's allocation."""
        self._check_open()
        row = self._row(AllocationRow, row, columns)
        self._csv[ALLOCATIONS].writerow(csv_cells(row))
        self.counts["allocations"] += 1

    def samples(self, name: str, columns: Sequence[str]) -> Callable[[Mapping[str, Any]], None]:
        """Open one more CSV of the run (a real cell's ``vms.csv``); returns its row writer, which
        takes a mapping of *columns* (floats rounded to 6 significant digits)."""
        self._check_open()
        f = open(self.path / name, "w", encoding="utf-8", newline="")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        self._files.append(f)

        def write(row: Mapping[str, Any]) -> None:
            self._check_open()
            w.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in (row[c] for c in columns)])
        return write

    def stages(self, stats: StageStats) -> None:
        """Write ``stages.csv``: the run's per-stage timing, one row per (stage, policy)."""
        self._check_open()
        with open(self.path / STAGES, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(STAGE_COLUMNS)
            for row in stats.rows():
                w.writerow(row.csv())

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
        check_num("run_completed", "t_s", t)
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
