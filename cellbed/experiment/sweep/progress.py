"""The progress line of ``cellctl sweep`` on stderr: runs done, running, failed, skipped and
waiting, and the time left, estimated from the durations of the runs this invocation finished."""
from __future__ import annotations

import math
import time
from typing import TextIO

from cellbed.experiment.progress import TermLine, hms

__all__ = ["SweepProgress", "hms"]


class SweepProgress:
    """Counts, and one line per change (redrawn in place on a terminal).

    The estimate: with *d* the mean wall time of the runs finished so far and *slots* the runs the
    cluster runs at once, time left = (waiting × d + Σ over running runs of max(d − elapsed, 0)) / slots.
    """

    def __init__(self, stream: TextIO | None, name: str, total: int, skipped: int, *, slots: int = 1,
                 min_interval_s: float = 0.5) -> None:
        self.stream, self.name, self.total, self.skipped = stream, name, total, skipped
        self.slots = max(1, slots)
        self.done = 0
        self.failed = 0
        self.running: dict[str, float] = {}       # run key → its start (time.time())
        self.durations: list[float] = []
        self.term = TermLine(stream)
        self.tty = self.term.tty
        self.min_interval_s = min_interval_s
        self._last_counts: tuple | None = None
        self._last_draw = -math.inf

    @property
    def waiting(self) -> int:
        return max(0, self.total - self.skipped - self.done - self.failed - len(self.running))

    def eta_s(self, now: float | None = None) -> float:
        if not self.durations:
            return math.nan
        d = sum(self.durations) / len(self.durations)
        now = time.time() if now is None else now
        work = self.waiting * d + sum(max(d - (now - t0), 0.0) for t0 in self.running.values())
        return work / self.slots

    def line(self) -> str:
        eta = self.eta_s()
        left = f"ETA {hms(eta)}" if math.isfinite(eta) else "ETA after the first run"
        return (f"sweep {self.name}: {self.done + self.skipped}/{self.total} done ({self.skipped} skipped), "
                f"{len(self.running)} running, {self.failed} failed, {self.waiting} waiting | {left}")

    # -- changes -------------------------------------------------------------------------------
    def set_running(self, running: dict[str, float]) -> None:
        self.running = dict(running)
        self.draw()

    def finished(self, key: str, wall_s: float) -> None:
        self.running.pop(key, None)
        self.done += 1
        self.durations.append(wall_s)
        self.draw()

    def attempt_failed(self, key: str, final: bool) -> None:
        self.running.pop(key, None)
        if final:
            self.failed += 1
        self.draw()

    # -- output --------------------------------------------------------------------------------
    def draw(self, force: bool = False) -> None:
        """On a terminal: redraw (at most every min_interval_s, or at once on a change); elsewhere
        one line per change of the counts."""
        if self.stream is None:
            return
        counts = (self.done, self.failed, len(self.running), self.waiting)
        changed = counts != self._last_counts
        now = time.monotonic()
        if not (force or changed or (self.tty and now - self._last_draw >= self.min_interval_s)):
            return
        self._last_counts, self._last_draw = counts, now
        self.term.show(self.line())

    def message(self, text: str) -> None:
        if self.term.message(text):
            self._last_counts = None      # redraw the bar after the message

    def close(self) -> None:
        self.term.close()
