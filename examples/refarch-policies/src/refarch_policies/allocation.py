"""R5, select and allocate (reference architecture, SC18 §III-D): which of the offered machines
(the ones R3 and R4 let through: constraints met, room for the task) gets it. Machines are
compared by the cores they would have left; ties go to the first in machine order."""
from __future__ import annotations

import random

import numpy as np

from cellbed.policy import api


@api.policy(stage="allocation", name="FIRSTFIT", version="1.0.0", doc="the first offered machine")
def first_fit(hosts: api.Hosts, demand: np.ndarray, rng: random.Random) -> int:
    offered = np.flatnonzero(hosts.offered)
    return int(offered[0]) if offered.size else -1


def _cores_left(hosts: api.Hosts, demand: np.ndarray, offered: np.ndarray) -> np.ndarray:
    return hosts.free[offered, 0] - demand[0]


@api.policy(stage="allocation", name="BESTFIT", version="1.0.0", doc="the offered machine left with the fewest free cores")
def best_fit(hosts: api.Hosts, demand: np.ndarray, rng: random.Random) -> int:
    offered = np.flatnonzero(hosts.offered)
    if not offered.size:
        return -1
    return int(offered[int(np.argmin(_cores_left(hosts, demand, offered)))])


@api.policy(stage="allocation", name="WORSTFIT", version="1.0.0", doc="the offered machine left with the most free cores")
def worst_fit(hosts: api.Hosts, demand: np.ndarray, rng: random.Random) -> int:
    offered = np.flatnonzero(hosts.offered)
    if not offered.size:
        return -1
    return int(offered[int(np.argmax(_cores_left(hosts, demand, offered)))])
