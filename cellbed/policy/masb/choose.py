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
    """Score the acceptors with *score* on their fresh usage, then :func:`weighted_order`."""
    normal = [a for a in acceptors if not a.forced]
    sc = np.zeros(len(acceptors))
    if normal:
        used = np.array([a.used for a in acceptors], dtype=float)
        cap = np.array([a.capacity for a in acceptors], dtype=float)
        sc = np.nan_to_num(np.asarray(SCORES[score](used, cap, np.asarray(task_used, dtype=float)),
                                      dtype=float).reshape(-1))
    order = weighted_order([a.forced for a in acceptors], sc, rng)
    return [(acceptors[i], 0.0 if acceptors[i].forced else max(float(sc[i]), 0.0)) for i in order]


def weighted_order(forced: Sequence[bool], scores, rng: random.Random) -> list[int]:
    """Positions in score-weighted random order (each next one drawn with probability
    proportional to its score, negative scores counting 0; only zeros left: uniform), then the
    forced ones in random order."""
    normal = [i for i, f in enumerate(forced) if not f]
    forced_i = [i for i, f in enumerate(forced) if f]
    out: list[int] = []
    if normal:
        left = list(range(len(normal)))
        w = [max(float(scores[i]), 0.0) for i in normal]
        while left:
            tot = sum(w[i] for i in left)
            if tot <= 0:       # only zero scores left: uniform order among them
                rng.shuffle(left)
                out += [normal[i] for i in left]
                break
            x, acc = rng.random() * tot, 0.0
            for k, i in enumerate(left):
                acc += w[i]
                if x < acc:
                    break
            out.append(normal[i])
            left.pop(k)
    rng.shuffle(forced_i)
    return out + forced_i
