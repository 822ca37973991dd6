"""The progress bar of ``cellctl run``: simulated time, tasks, the overloaded share, speed and ETA."""
from __future__ import annotations

import math
import resource
import time
from typing import TextIO

__all__ = ["Progress", "TermLine", "hms", "peak_rss_mib"]


class TermLine:
    """One status line on *stream*: redrawn in place on a terminal, a line of its own elsewhere
    (CI logs, files); messages go on lines of their own. Shared by ``cellctl run`` and ``sweep``."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._width = 0

    def show(self, text: str) -> None:
        if self.stream is None:
            return
        if self.tty:
            self.stream.write("\r" + text + " " * max(0, self._width - len(text)))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> bool:
        """Print *text* on a line of its own; True if it erased the status line (redraw it)."""
        if self.stream is None:
            return False
        erased = self.tty and self._width > 0
        if erased:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()
        return erased

    def close(self) -> None:
        if self.stream is not None and self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


def hms(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """A one-line, plain-text progress bar on *stream* (stderr): simulated time, the task count and
    the current overloaded share, plus simulated minutes per wall minute and an ETA.

    On a terminal the line is redrawn in place (at most every *min_interval_s*); elsewhere (CI
    logs, files) a line is printed at most every *log_interval_s* or at each 10 % step.
    """

    WIDTH = 24

    def __init__(self, stream: TextIO | None, duration_s: float, label: str = "", *,
                 min_interval_s: float = 0.5, log_interval_s: float = 30.0, past_end: str = "") -> None:
        """*past_end*: the run may go on after *duration_s* (a jobs run places its last tasks after
        the last arrival): said in place of the ETA once there."""
        self.stream = stream
        self.duration_s = duration_s
        self.past_end = past_end
        self.label = label
        self.term = TermLine(stream)
        self.tty = self.term.tty
        self.min_interval_s = min_interval_s if self.tty else log_interval_s
        self.wall0 = time.perf_counter()
        self._last_draw = -math.inf
        self._last_decile = -1
        self._last_t = math.nan
        self.line = ""

    def render(self, t_s: float, tasks: int, overloaded_share: float, extra: str = "") -> str:
        f = min(1.0, max(0.0, t_s / self.duration_s)) if self.duration_s > 0 else 1.0
        fill = int(round(f * self.WIDTH))
        wall = time.perf_counter() - self.wall0
        rate = (t_s / 60.0) / (wall / 60.0) if wall > 0 else math.nan
        eta = (self.duration_s - t_s) / (t_s / wall) if t_s > 0 and wall > 0 else math.nan
        span = "h" if self.duration_s >= 3 * 3600 else "min"
        div = 3600.0 if span == "h" else 60.0
        parts = [f"{self.label} " if self.label else "",
                 f"[{'#' * fill}{'.' * (self.WIDTH - fill)}] {f * 100:3.0f}%",
                 f" {t_s / div:.1f}/{self.duration_s / div:.1f} {span} sim",
                 f" | {tasks:,} tasks | overloaded {overloaded_share * 100:.2f}%",
                 f" | {rate:.1f} sim-min/wall-min" if math.isfinite(rate) else "",
                 f" | {self.past_end}" if self.past_end and t_s > self.duration_s else
                 f" | ETA {hms(eta)}" if math.isfinite(eta) else "",
                 f" | {extra}" if extra else ""]
        return "".join(parts)

    def update(self, t_s: float, tasks: int, overloaded_share: float, extra: str = "", *, force: bool = False) -> None:
        if self.stream is None or (force and t_s == self._last_t):
            return
        self._last_t = t_s
        now = time.perf_counter()
        decile = int(10 * t_s / self.duration_s) if self.duration_s > 0 else 10
        if not force and now - self._last_draw < self.min_interval_s and (self.tty or decile == self._last_decile):
            return
        self._last_draw, self._last_decile = now, decile
        self.line = self.render(t_s, tasks, overloaded_share, extra)
        self.term.show(self.line)

    def message(self, text: str) -> None:
        """A line of its own (the bar is redrawn after it on a terminal)."""
        self.term.message(text)

    def close(self) -> None:
        self.term.close()


def peak_rss_mib() -> float:
    """Peak resident set of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
