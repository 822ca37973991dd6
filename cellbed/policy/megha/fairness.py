"""Fair shares (seed 001 §IV-C, Algorithm 2). Pure.

Each user has a queue with a share of the cell. Fairness acts only under contention: when a
task fits neither an internal partition nor (by repartition) an external one. Then, if the
requesting user is below its share, the GM asks an LM to preempt tasks of the user with the
largest share violation; otherwise the task is requeued.

[Our choice; the paper does not define "resources consumed" for several resources:] a
user's consumption is its *dominant share*, max(CPU used / CPU of the cell, memory used /
memory of the cell), over the requested resources of its running tasks (DRF's measure).
"""
from __future__ import annotations

import dataclasses
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class QueueConfig:
    user: str
    share: float        # fraction of the cell, 0..1
    gm: str             # the GM that serves this queue


def dominant_share(cpu: float, mem: float, cap_cpu: float, cap_mem: float) -> float:
    parts = []
    if cap_cpu > 0:
        parts.append(cpu / cap_cpu)
    if cap_mem > 0:
        parts.append(mem / cap_mem)
    return max(parts) if parts else 0.0


def consumption(usage: Mapping[str, tuple[float, float, int]], cap_cpu: float, cap_mem: float) -> dict[str, float]:
    return {u: dominant_share(c, m, cap_cpu, cap_mem) for u, (c, m, _) in usage.items()}


def victims(requester: str, shares: Mapping[str, float], consumed: Mapping[str, float]) -> list[str]:
    """Algorithm 2, get_Preempt_Tasks: [] if the requester already consumes its share (no
    preemption: requeue); else the users over their share, largest violation first."""
    own = consumed.get(requester, 0.0)
    if own >= shares.get(requester, 0.0):
        return []
    over = [(consumed.get(u, 0.0) - s, u) for u, s in shares.items() if u != requester and consumed.get(u, 0.0) > s]
    return [u for _, u in sorted(over, key=lambda x: (-x[0], x[1]))]
