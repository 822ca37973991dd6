"""The built-in placement and queue policies of the Megha masters and the central and
best-fit baselines: allocation (R5: first, best and worst fit), the LM's validation, task order
(T2: FIFO), fair-share preemption (T10) and the sampling scheduler's probes (M5)."""
from __future__ import annotations

import random
from typing import Mapping, Sequence

import numpy as np

from cellbed.policy import api
from cellbed.policy.megha import fairness
from cellbed.policy.megha.match import EPS


@api.policy(stage="allocation", name="first_fit",
            doc="the first offered host, in host order (Megha's Algorithm 1)")
def first_fit(hosts: api.Hosts, demand: np.ndarray, rng: random.Random) -> int:
    ok = hosts.offered
    if not ok.size:
        return -1
    i = int(ok.argmax())
    return i if ok[i] else -1


def _left(hosts: api.Hosts, demand: np.ndarray) -> np.ndarray:
    """Free share left after placing the task: normalised free CPU plus normalised free memory."""
    cap = hosts.capacity
    return (hosts.free[:, 0] - demand[0]) / cap[:, 0] + (hosts.free[:, 1] - demand[1]) / cap[:, 1]


@api.policy(stage="allocation", name="best_fit",
            doc="the offered host left with the least free capacity (normalised CPU + memory); ties: host order")
def best_fit(hosts: api.Hosts, demand: np.ndarray, rng: random.Random) -> int:
    idx = np.flatnonzero(hosts.offered)
    if not idx.size:
        return -1
    return int(idx[int(np.argmin(_left(hosts, demand)[idx]))])


@api.policy(stage="allocation", name="worst_fit",
            doc="the offered host left with the most free capacity (normalised CPU + memory); ties: host order")
def worst_fit(hosts: api.Hosts, demand: np.ndarray, rng: random.Random) -> int:
    idx = np.flatnonzero(hosts.offered)
    if not idx.size:
        return -1
    return int(idx[int(np.argmax(_left(hosts, demand)[idx]))])


@api.policy(stage="validation", name="megha",
            doc="the host's free resources on the LM's true state cover the request (Megha §IV-B4)")
def validation(host: str, free: tuple[float, float], capacity: tuple[float, float],
               demand: tuple[float, float]) -> api.Answer:
    fc, fm = free
    cpu, mem = demand
    if fc + EPS < cpu or fm + EPS < mem:
        return api.Answer(False, "capacity", f"{host} has {fc:.3f} cores / {fm:.0f} MiB free, the task needs "
                          f"{cpu:.3f} cores / {mem:.0f} MiB")
    return api.Answer(True)


@api.policy(stage="task_order", name="fifo", doc="first in, first out: the order tasks entered the queue")
def fifo(task: api.QueuedTask, rng: random.Random) -> float:
    return float(task.seq)


@api.policy(stage="preemption", name="megha",
            doc="Megha's Algorithm 2: none if the requester has its share, else users over theirs, largest first")
def preemption(requester: str, shares: Mapping[str, float], consumed: Mapping[str, float]) -> list[str]:
    return fairness.victims(requester, shares, consumed)


@api.policy(stage="probe", name="uniform", doc="`probes` distinct nodes uniformly at random (Sparrow)")
def uniform(n: int, probes: int, rng: np.random.Generator) -> Sequence[int]:
    return rng.choice(n, size=min(probes, n), replace=False)
