"""The one computation of a tick row (issue 11), fed from the same host state on every cell:
the model cell reads its NodeAgents' host views, the real-cell runner reads GetHostState.

    acc = TickAccumulator()
    acc.migration("succeeded", bytes_moved=134_750_208)     # during the tick
    acc.allocation(12.5)                                    # a task placed, total ms
    row = acc.row(t_s, [HostState(...), ...], pending=3)    # and the counters start again
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Sequence

import numpy as np

from cellbed.metrics.rows import TickRow
from cellbed.policy.scores.asr import AsrClass, classify

__all__ = ["HostState", "TickAccumulator", "tick_row"]


@dataclasses.dataclass(frozen=True)
class HostState:
    """One host at the end of a tick: capacity, use and requests (cores, MiB), and its VM count."""

    cap_cpu: float
    cap_mem: float
    used_cpu: float
    used_mem: float
    req_cpu: float
    req_mem: float
    vms: int


def tick_row(t_s: float, hosts: Sequence[HostState], *, pending: int, migrations: dict | None = None,
             alloc_p50_ms: float = math.nan, alloc_p99_ms: float = math.nan) -> TickRow:
    """The cell's ASR class counts (DESIGN §8), use and requests as fractions of total capacity,
    and what happened during the tick (*migrations*: attempted/succeeded/refused/failed/bytes)."""
    cap = np.array([(h.cap_cpu, h.cap_mem) for h in hosts], dtype=float)
    used = np.array([(h.used_cpu, h.used_mem) for h in hosts], dtype=float)
    req = np.array([(h.req_cpu, h.req_mem) for h in hosts], dtype=float)
    cnt = np.array([h.vms for h in hosts])
    codes = classify(100.0 * used / cap, cnt)
    c = np.bincount(codes.astype(int), minlength=6)
    m = migrations or {}
    return TickRow(t_s=t_s, nodes=len(hosts), idle=int(c[AsrClass.IDLE]), overloaded=int(c[AsrClass.OVERLOADED]),
                   sta=int(c[AsrClass.STA]), ta=int(c[AsrClass.TA]), pa=int(c[AsrClass.PA]), da=int(c[AsrClass.DA]),
                   used_cpu=float(used[:, 0].sum() / cap[:, 0].sum()),
                   used_mem=float(used[:, 1].sum() / cap[:, 1].sum()),
                   req_cpu=float(req[:, 0].sum() / cap[:, 0].sum()),
                   req_mem=float(req[:, 1].sum() / cap[:, 1].sum()), tasks_running=int(cnt.sum()),
                   tasks_pending=pending, migrations_attempted=m.get("attempted", 0),
                   migrations_succeeded=m.get("succeeded", 0), migrations_refused=m.get("refused", 0),
                   migrations_failed=m.get("failed", 0), bytes_moved=m.get("bytes", 0),
                   alloc_p50_ms=alloc_p50_ms, alloc_p99_ms=alloc_p99_ms)


class TickAccumulator:
    """What happens between two ticks: migration outcomes and bytes, and allocation times."""

    def __init__(self) -> None:
        self.migrations: collections.Counter = collections.Counter()
        self.alloc_ms: list[float] = []

    def migration(self, outcome: str, bytes_moved: int = 0) -> None:
        """*outcome*: succeeded | refused | failed (a transfer that did not succeed)."""
        self.migrations["attempted"] += 1
        self.migrations[outcome] += 1
        self.migrations["bytes"] += bytes_moved

    def allocation(self, total_ms: float) -> None:
        self.alloc_ms.append(total_ms)

    def take_alloc(self) -> tuple[float, float]:
        if not self.alloc_ms:
            return math.nan, math.nan
        p50, p99 = np.percentile(self.alloc_ms, (50.0, 99.0))
        self.alloc_ms.clear()
        return float(p50), float(p99)

    def row(self, t_s: float, hosts: Sequence[HostState], *, pending: int) -> TickRow:
        p50, p99 = self.take_alloc()
        row = tick_row(t_s, hosts, pending=pending, migrations=self.migrations, alloc_p50_ms=p50, alloc_p99_ms=p99)
        self.migrations = collections.Counter()
        return row
