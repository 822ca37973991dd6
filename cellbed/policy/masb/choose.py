"""SAN step 4 (DESIGN §7): re-score the acceptors with the reallocation score on their fresh
usage, then order them by score-weighted random choice; forced candidates go last (with
minimal score). The order is the retry list of step 5."""
from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import numpy as np

from cellbed.policy.scores import SCORES


@dataclasses.dataclass(frozen=True)
class Acceptor:
    host: str
    capacity: tuple[float, float]
    used: tuple[float, float]
    forced: bool


def order_targets(acceptors: Sequence[Acceptor], task_used: Sequence[float], rng: random.Random,
                  score: str = "sras") -> list[tuple[Acceptor, float]]:
    normal = [a for a in acceptors if not a.forced]
    forced = [a for a in acceptors if a.forced]
    out: list[tuple[Acceptor, float]] = []
    if normal:
        used = np.array([a.used for a in normal], dtype=float)
        cap = np.array([a.capacity for a in normal], dtype=float)
        sc = np.nan_to_num(np.asarray(SCORES[score](used, cap, np.asarray(task_used, dtype=float)),
                                      dtype=float).reshape(-1))
        left = list(range(len(normal)))
        w = [max(float(s), 0.0) for s in sc]
        while left:
            tot = sum(w[i] for i in left)
            if tot <= 0:       # only zero scores left: uniform order among them
                rng.shuffle(left)
                out += [(normal[i], w[i]) for i in left]
                break
            x, acc = rng.random() * tot, 0.0
            for k, i in enumerate(left):
                acc += w[i]
                if x < acc:
                    break
            out.append((normal[i], w[i]))
            left.pop(k)
    rng.shuffle(forced)
    out += [(a, 0.0) for a in forced]
    return out
