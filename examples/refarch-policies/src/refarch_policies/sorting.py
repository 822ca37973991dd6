"""T2, sort tasks on criterion (reference architecture, SC18 §III-D): a task's key in its queue,
lower first. Cellbed breaks ties by the order tasks entered the queue."""
from __future__ import annotations

import random

from cellbed.policy import api


@api.policy(stage="task_order", name="RANDOM", version="1.0.0", doc="a uniform random key, drawn at queue entry")
def random_order(task: api.QueuedTask, rng: random.Random) -> float:
    return rng.random()


@api.policy(stage="task_order", name="FIFO", version="1.0.0", doc="first submitted, first served")
def fifo(task: api.QueuedTask, rng: random.Random) -> float:
    return task.arrival_s


@api.policy(stage="task_order", name="SRTF", version="1.0.0",
            doc="shortest remaining time first: a waiting task's remaining time is its runtime")
def srtf(task: api.QueuedTask, rng: random.Random) -> float:
    return task.duration_s
