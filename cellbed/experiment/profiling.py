"""Profile a window of simulated time of a model-cell run (``cellctl run --profile FROM:TO``).

A model cell's wall time is dominated by its steady state, but its first simulated minutes
are a warm start (the whole initial task population placed at once). Profiling from the start
mixes the two, so the window opens and closes on tick boundaries given in simulated minutes.
It writes ``profile.pstats`` (for ``python -m pstats`` or snakeviz), ``profile.txt`` (the top
functions by cumulative and by own time) and ``profile.json`` (window, wall and CPU seconds)
into the results folder.
"""
from __future__ import annotations

import cProfile
import io
import json
import pstats
import time
from pathlib import Path

from cellbed.domain.errors import InvalidArgument


def parse_window(text: str) -> tuple[float, float]:
    """``"FROM:TO"`` in simulated minutes → (from_s, to_s)."""
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise InvalidArgument(f"--profile={text!r}: expected FROM:TO in simulated minutes, e.g. 30:40") from None
    if not (0 <= a < b):
        raise InvalidArgument(f"--profile={text!r}: need 0 ≤ FROM < TO (simulated minutes)")
    return a * 60.0, b * 60.0


class ProfileWindow:
    def __init__(self, start_s: float, end_s: float, out_dir: str | Path, top: int = 40) -> None:
        self.start_s, self.end_s, self.out, self.top = start_s, end_s, Path(out_dir), top
        self.prof: cProfile.Profile | None = None
        self.done = False
        self._t0 = self._c0 = 0.0
        self._from_s = 0.0

    def on_tick(self, t_s: float) -> None:
        """Call at the end of every tick with its simulated time."""
        if self.done:
            return
        if self.prof is None and t_s >= self.start_s:
            self.prof = cProfile.Profile()
            self._from_s, self._t0, self._c0 = t_s, time.perf_counter(), time.process_time()
            self.prof.enable()
        elif self.prof is not None and t_s >= self.end_s:
            self._finish(t_s)

    def close(self, t_s: float) -> None:
        """At the end of the run: close a window the run ended inside."""
        if self.prof is not None and not self.done:
            self._finish(t_s)

    def _finish(self, t_s: float) -> None:
        assert self.prof is not None
        self.prof.disable()
        wall, cpu = time.perf_counter() - self._t0, time.process_time() - self._c0
        self.done = True
        self.out.mkdir(parents=True, exist_ok=True)
        self.prof.dump_stats(str(self.out / "profile.pstats"))
        buf = io.StringIO()
        st = pstats.Stats(self.prof, stream=buf)
        st.sort_stats("cumulative").print_stats(self.top)
        st.sort_stats("tottime").print_stats(self.top)
        (self.out / "profile.txt").write_text(buf.getvalue(), encoding="utf-8")
        (self.out / "profile.json").write_text(json.dumps({
            "from_s": self._from_s, "to_s": t_s, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "note": "wall and CPU include cProfile's own overhead (typically 1.5-2x)"}, indent=1) + "\n",
            encoding="utf-8")


MODEL_CELL_PARTS = [
    ("node agents: sampling (NodeAgent.sample)", "daemon/monitor.py", "sample"),
    ("node agents: SAN step 1 and reports (SanAgent.on_sample)", "daemon/san/host.py", "on_sample"),
    ("node agents: skipped samples (SanAgent.on_skipped_sample)", "daemon/san/host.py", "on_skipped_sample"),
    ("node agents: SAN rounds (SCS, negotiation)", "daemon/san/rounds.py", "run_round"),
    ("broker agents: initial allocation (allocate)", "broker/agent.py", "allocate"),
    ("broker agents: report intake (on_report)", "broker/agent.py", "on_report"),
    ("broker agents: cache sync (sync_with)", "broker/agent.py", "sync_with"),
    ("workload stream (apply)", "cellbed/model/masb_stream.py", "apply"),
    ("ticks (ASR classification of every node)", "cellbed/model/cell.py", "tick"),
]
"""The parts of a MASB model cell's time: (label, file suffix, function), cumulative time each."""


def parts_table(path: str | Path, parts=MODEL_CELL_PARTS) -> list[str]:
    """A profile window (profile.pstats) as a markdown table: each part's cumulative seconds and
    share of the event loop's, and asyncio's own time."""
    st = pstats.Stats(str(path))
    total = max((v[3] for k, v in st.stats.items() if k[2] == "_run_once"), default=0.0)
    loop = sum(v[2] for k, v in st.stats.items() if "asyncio" in k[0] or "selectors" in k[0])
    out = ["| part | cumulative s | share |", "|---|---:|---:|"]
    for label, file, fn in parts:
        cum = sum(v[3] for k, v in st.stats.items() if k[0].endswith(file) and k[2] == fn)
        out.append(f"| {label} | {cum:.2f} | {100 * cum / total:.0f} % |" if total else f"| {label} | {cum:.2f} | |")
    if total:
        out.append(f"| asyncio itself (own time) | {loop:.2f} | {100 * loop / total:.0f} % |")
        out.append(f"| **the window (event loop)** | {total:.2f} | 100 % |")
    return out
