"""Reading a results folder back: typed columns from the CSVs (older headers with trailing defaults accepted), the event log, and load_run, which refuses a run without run_completed."""
from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
import numpy as np
from cellbed.domain.errors import FailedPrecondition, InvalidArgument, NotFound
from cellbed.metrics.rows import csv_columns, AllocationRow, MigrationRow, TickRow
from cellbed.experiment.results.files import (
    ALLOCATIONS,
    EVENTS,
    IncompleteRun,
    MANIFEST,
    MIGRATIONS,
    RUN_COMPLETED,
    TICKS,
)


ROW_TYPES = {TICKS: TickRow, MIGRATIONS: MigrationRow, ALLOCATIONS: AllocationRow}


def column_kinds(cls: type) -> dict[str, str]:
    """Column → 'f' (float), 'i' (int), 'b' (bool) or 's' (str), from the row dataclass annotations."""
    ann = {"float": "f", "int": "i", "bool": "b", "str": "s"}
    cols = csv_columns(cls)
    return {f.name: ann[f.type if isinstance(f.type, str) else f.type.__name__] for f in fields(cls) if f.name in cols}


def read_table(path: str | Path, row_type: type, columns: Sequence[str] | None = None,
               chunk_rows: int = 65536) -> dict[str, np.ndarray]:
    """Read one results CSV into column arrays (float64 with NaN for empty cells, int64, bool, or object).

    The header must be exactly the row type's columns.  Reads in chunks of *chunk_rows*, so memory
    is the result plus one chunk.
    """
    path = Path(path)
    kinds = column_kinds(row_type)
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


def last_line(path: Path) -> str:
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
    last = last_line(p / EVENTS)
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
