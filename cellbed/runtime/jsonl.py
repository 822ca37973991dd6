"""A crash-safe append-only JSON-lines store: the node daemon's migration history and its
migration journal (issue 12).

Every append is one ``write`` of one line followed by ``fsync``, so after a crash (the
process SIGKILLed, the box losing power) the file holds every line whose append returned,
plus at most one torn last line. Reading tolerates exactly that: a last line that does not
parse is dropped (and counted); a bad line anywhere else is corruption and is reported with
its line number, never silently skipped. ``rewrite`` replaces the file atomically (compaction).
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)


class StoreCorrupt(Exception):
    """A line other than the last one does not parse: the file was damaged, not torn."""


class JsonlStore:
    def __init__(self, path: str, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self.torn = 0          # torn last lines dropped by read()

    def append(self, obj: Any, encode: Callable[[Any], str] = json.dumps) -> None:
        line = encode(obj)
        if "\n" in line:
            raise ValueError("a store line must not contain a newline")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def read(self, decode: Callable[[str], Any] = json.loads) -> list[Any]:
        """Every line, decoded. A torn last line (a crash mid-append) is dropped and counted."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        complete = data.endswith(b"\n") or not data
        out = []
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                out.append(decode(raw.decode()))
            except Exception as e:       # noqa: BLE001 - any decoder's refusal
                if i == len(lines) - 1 and not complete:    # no newline: the append never finished
                    self.torn += 1
                    log.warning("%s: dropped a torn last line (%d bytes): %s", self.path, len(raw), e)
                    self._truncate(len(data) - len(raw))
                    break
                raise StoreCorrupt(f"{self.path}:{i + 1}: {e}") from e
        else:
            if not complete:     # the last line parsed but lost its newline: end it
                with open(self.path, "ab") as f:
                    f.write(b"\n")
        return out

    def _truncate(self, size: int) -> None:
        """Cut the torn tail so that the next append starts a fresh line."""
        with open(self.path, "r+b") as f:
            f.truncate(size)
            if self.fsync:
                os.fsync(f.fileno())

    def rewrite(self, objs: Iterable[Any], encode: Callable[[Any], str] = json.dumps) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            for o in objs:
                f.write(encode(o) + "\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.fsync:
            dfd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
