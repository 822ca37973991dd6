"""Allocation time and its four parts (seed 001 eq. 1–2). Pure.

    Allocation_Time = Task_Start − Task_Arrival
                    = framework queueing + processing + worker queueing + communication

How each part is measured (every interval on the critical path lands in exactly one part,
so the parts sum to start − arrival):

- framework queueing: time in the GM's user queue (from arrival, and again after every
  requeue) plus time waiting for the LM's validation lock;
- processing: the GM's match (bit-vector AND + first-fit scan) and the LM's validation;
- communication: for a failed attempt the whole GM↔LM round trip minus the LM's queueing
  and processing (the GM waited for it); for the attempt that succeeds, the one-way GM→LM
  time and the one-way LM→node StartVm time (stamped by the node on receipt);
- worker queueing: time at the worker before the task starts (Megha: ~0, since the LM
  validated; sampling: time in the worker's reservation queue).

Task_Start is when the node began starting the task; the VM's boot is reported separately
(``boot_ms``). One-way times compare stamps of different agents: exact on a model cell (one
virtual clock) and on a single-box cell (one wall clock); across machines they need NTP.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

import numpy as np

from cellbed.metrics.rows import AllocationRow

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
PARTS = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms")


@dataclasses.dataclass
class AllocClock:
    """The running sums of one task, in seconds."""

    arrival: float
    queued_at: float
    fq: float = 0.0
    proc: float = 0.0
    wq: float = 0.0
    comm: float = 0.0
    attempts: int = 0

    def dequeue(self, now: float) -> None:
        self.fq += max(0.0, now - self.queued_at)

    def requeue(self, now: float) -> None:
        self.queued_at = now

    def failed_attempt(self, rtt: float, lm_queue: float, lm_proc: float) -> None:
        """A refused (or lost) request: the GM waited the whole round trip."""
        self.attempts += 1
        self.fq += lm_queue
        self.proc += lm_proc
        self.comm += max(0.0, rtt - lm_queue - lm_proc)


def record(task: str, user: str, frontend: str, clk: AllocClock, start: float, host: str, *, lm_queue: float = 0.0,
           lm_proc: float = 0.0, comm: float = 0.0, wq: float = 0.0, boot: float = 0.0, lm: str = "",
           repartitioned: bool = False, preempted_others: int = 0, requeues: int = 0,
           epoch_s: float = 0.0) -> AllocationRow:
    """Close a task's clock at its start. *comm*/*wq*/*lm_** are the successful attempt's parts."""
    fq = clk.fq + lm_queue
    proc = clk.proc + lm_proc
    cm = clk.comm + comm
    w = clk.wq + wq
    ms = 1000.0
    return AllocationRow(task=task, user=user, frontend=frontend, arrival_s=clk.arrival - epoch_s,
                            start_s=start - epoch_s, host=host, framework_queue_ms=fq * ms, processing_ms=proc * ms,
                            worker_queue_ms=w * ms, communication_ms=cm * ms, total_ms=(fq + proc + cm + w) * ms,
                            attempts=clk.attempts + 1, boot_ms=boot * ms, lm=lm, repartitioned=repartitioned,
                            preempted_others=preempted_others, requeues=requeues)


def pending(task: str, user: str, frontend: str, arrival: float, attempts: int, epoch_s: float = 0.0,
            outcome: str = "pending") -> AllocationRow:
    nan = math.nan
    return AllocationRow(task=task, user=user, frontend=frontend, arrival_s=arrival - epoch_s, start_s=nan,
                            host="", framework_queue_ms=nan, processing_ms=nan, worker_queue_ms=nan,
                            communication_ms=nan, total_ms=nan, attempts=attempts, outcome=outcome)


def percentiles(values: Iterable[float], ps: Sequence[float] = PERCENTILES) -> dict[str, float]:
    a = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if not a.size:
        return {f"p{p:g}": math.nan for p in ps}
    return {f"p{p:g}": float(np.percentile(a, p)) for p in ps}


def summarize(records: Sequence[AllocationRow]) -> dict:
    """Percentiles of the total and the median/mean share of each part, over placed tasks."""
    placed = [r for r in records if r.outcome == "placed"]
    tot = np.asarray([r.total_ms for r in placed], dtype=float)
    out = {"tasks": len(records), "placed": len(placed),
           "pending": sum(r.outcome == "pending" for r in records),
           "rejected": sum(r.outcome == "rejected" for r in records),
           **percentiles(tot), "mean": float(tot.mean()) if tot.size else math.nan,
           "max": float(tot.max()) if tot.size else math.nan}
    for p in PARTS:
        a = np.asarray([getattr(r, p) for r in placed], dtype=float)
        out[f"{p}_p50"] = float(np.median(a)) if a.size else math.nan
        out[f"{p}_mean"] = float(a.mean()) if a.size else math.nan
        out[f"{p}_share"] = float(a.sum() / tot.sum()) if tot.size and tot.sum() > 0 else math.nan
    return out
