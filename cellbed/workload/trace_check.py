"""Check a GCD-2011 trace folder before a run reads it (:func:`check_trace`).

Every table folder present must hold a complete part series ``part-NNNNN-of-MMMMM.csv[.gz]``
(every N from 0 to M−1, one M); every part must be readable, non-empty, a complete gzip stream
when it is named ``.gz`` (read to the end: a truncated part fails here, not hours into a run),
UTF-8 text, and every row must have the table's column count (digest §E.2; task_usage may have
19, the clusterdata-2011-1 layout, or 20). The first problem raises InvalidArgument, one line
naming the file, the line when there is one, and the problem. Tables that are absent are not
an error (the reader treats them as empty), but a folder with none is.

The columns are counted with numpy over each decompressed chunk (commas per line), so the check
costs about one decompression of the trace; a file with quoted fields is read with the csv
module instead.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from cellbed.domain.errors import InvalidArgument
from cellbed.workload.trace_tables import NCOLS, READ_ERRORS, TABLES, describe_read_error

__all__ = ["ALLOWED_COLUMNS", "TraceCheck", "check_trace"]

#: Column counts a row of each table may have.
ALLOWED_COLUMNS = {t: frozenset({n}) for t, n in NCOLS.items()} | {"task_usage": frozenset({19, 20})}

PART_NAME = re.compile(r"part-(\d{5})-of-(\d{5})\.csv(\.gz)?\Z")
GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20


@dataclass
class TraceCheck:
    """What the check found: parts and rows per table present."""

    root: Path
    parts: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)


def _fail(where: Path | str, problem: str, line: int | None = None) -> InvalidArgument:
    return InvalidArgument(f"trace file {where}{f':{line}' if line else ''}: {problem}")


def _table_parts(d: Path, table: str) -> list[Path]:
    """The part files of one table folder, checked to be one complete series."""
    files = sorted(p for p in d.iterdir() if p.is_file() or p.is_symlink())
    if not files:
        raise _fail(d, f"the {table} folder holds no part files (part-NNNNN-of-MMMMM.csv[.gz])")
    seen: dict[int, Path] = {}
    totals = set()
    for p in files:
        m = PART_NAME.match(p.name)
        if m is None:
            raise _fail(p, f"not a {table} part file name (expected part-NNNNN-of-MMMMM.csv[.gz])")
        n, total = int(m.group(1)), int(m.group(2))
        totals.add(total)
        if n in seen:
            raise _fail(p, f"part {n} of {table} is there twice (also {seen[n].name})")
        seen[n] = p
    if len(totals) != 1:
        raise _fail(d, f"{table} parts disagree on the number of parts: {', '.join(str(t) for t in sorted(totals))}")
    total = totals.pop()
    for n in range(total):
        if n not in seen:
            ext = ".csv.gz" if any(p.name.endswith(".gz") for p in files) else ".csv"
            raise _fail(d / f"part-{n:05d}-of-{total:05d}{ext}", f"missing (part {n} of {total} of {table})")
    extra = sorted(n for n in seen if n >= total)
    if extra:
        raise _fail(seen[extra[0]], f"part {extra[0]} of {table} is beyond its {total} parts")
    return [seen[n] for n in range(total)]


def _check_slow(path: Path, table: str, allowed: frozenset[int]) -> int:
    """Column counts with the csv module (quoted fields); returns the rows."""
    rows = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        for row in reader:
            if not row:
                continue
            rows += 1
            if len(row) not in allowed:
                raise _fail(path, f"{len(row)} columns; {table} rows have {_cols(allowed)}", reader.line_num)
    return rows


def _cols(allowed: frozenset[int]) -> str:
    return " or ".join(str(n) for n in sorted(allowed))


def _lines(data: bytes, allowed: frozenset[int]) -> tuple[int, int | None, int]:
    """Over *data* (whole lines, each ending in a newline): (rows, index of the first line with a
    wrong column count or None, that line's columns). Blank lines are skipped."""
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    cols = np.diff(np.cumsum(arr == 44, dtype=np.int64)[nl], prepend=0) + 1
    content = np.diff(nl, prepend=-1) > 1
    ok = np.isin(cols, sorted(allowed)) | ~content
    if ok.all():
        return int(content.sum()), None, 0
    i = int(np.argmin(ok))
    return int(content.sum()), i, int(cols[i])


def _gunzip(fh) -> Iterator[bytes]:
    """The decompressed chunks of a gzip file (several members allowed). Raises EOFError when
    the stream ends before its end marker, zlib.error on corrupt data or a bad checksum."""
    d = zlib.decompressobj(wbits=31)
    fed = False
    while raw := fh.read(CHUNK):
        while raw:
            fed = True
            out = d.decompress(raw)
            if out:
                yield out
            if d.eof:
                raw = d.unused_data
                d, fed = zlib.decompressobj(wbits=31), False
            else:
                raw = b""
    if fed:
        tail = d.flush()
        if tail:
            yield tail
        if not d.eof:
            raise EOFError


def _plain(fh) -> Iterator[bytes]:
    while True:
        raw = fh.read(CHUNK)
        if not raw:
            return
        yield raw


def _check_file(path: Path, table: str) -> int:
    """One part: readable, not empty, complete gzip (if .gz), right column counts. Returns rows."""
    allowed = ALLOWED_COLUMNS[table]
    gz = path.name.endswith(".gz")
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except READ_ERRORS as e:
        raise _fail(path, describe_read_error(e)) from None
    if not head:
        raise _fail(path, "empty file (0 bytes)")
    if gz and head != GZIP_MAGIC:
        raise _fail(path, "not a gzip file (named .gz, but it does not start with the gzip magic bytes)")
    if not gz and head == GZIP_MAGIC:
        raise _fail(path, "gzip data in a file named .csv (name it .csv.gz)")
    lines = rows = total = 0
    carry = b""
    try:
        with open(path, "rb") as fh:
            for chunk in (_gunzip(fh) if gz else _plain(fh)):
                total += len(chunk)
                if b'"' in chunk:
                    return _check_slow(path, table, allowed)
                data = carry + chunk
                cut = data.rfind(b"\n") + 1
                carry, data = data[cut:], data[:cut]
                if data:
                    data.decode("utf-8")
                    rows += _count(path, table, data, allowed, lines)
                    lines += data.count(b"\n")
            if carry:
                carry.decode("utf-8")
                rows += _count(path, table, carry + b"\n", allowed, lines)
    except READ_ERRORS as e:
        raise _fail(path, describe_read_error(e), lines + 1) from None
    if total == 0:
        raise _fail(path, "empty: the gzip stream holds no data" if gz else "empty file")
    if rows == 0:
        raise _fail(path, "no rows (only blank lines)")
    return rows


def _count(path: Path, table: str, data: bytes, allowed: frozenset[int], before: int) -> int:
    rows, bad, cols = _lines(data, allowed)
    if bad is not None:
        raise _fail(path, f"{cols} columns; {table} rows have {_cols(allowed)}", before + bad + 1)
    return rows


def check_trace(root: str | Path) -> TraceCheck:
    """Check the trace folder *root* (see the module docstring); raises InvalidArgument on the
    first problem, before anything reads the trace for a run."""
    root = Path(root)
    if not root.exists():
        raise _fail(root, "no such trace folder")
    if not root.is_dir():
        raise _fail(root, "not a folder (a trace is a folder of <table>/part-NNNNN-of-MMMMM.csv[.gz])")
    out = TraceCheck(root)
    for table in TABLES:
        d = root / table
        if not d.exists():
            continue
        if not d.is_dir():
            raise _fail(d, f"{table} is not a folder")
        parts = _table_parts(d, table)
        out.parts[table] = len(parts)
        out.rows[table] = sum(_check_file(p, table) for p in parts)
    if not out.parts:
        raise _fail(root, f"no GCD-2011 tables ({', '.join(TABLES)}) in this folder")
    return out
