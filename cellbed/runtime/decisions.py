"""Sampled decision logs (DESIGN §7): about 1 in 50 SCS runs and 1 in 5,000 scorings and
target choices, each with all its inputs and scores, as JSONL. Rates are configurable; the
sampling uses the agent's seeded RNG, so a run's log is reproducible."""
from __future__ import annotations

import json
import random
from typing import Callable

DEFAULT_RATES = {"scs": 1 / 50, "scoring": 1 / 5000, "target": 1 / 5000}


class DecisionLog:
    def __init__(self, path: str = "", rates: dict | None = None, rng: random.Random | None = None,
                 clock=None, who: str = "") -> None:
        self.path = path
        self.rates = {**DEFAULT_RATES, **(rates or {})}
        self.rng = rng or random.Random(0)
        self.clock = clock
        self.who = who
        self.kept = {k: 0 for k in self.rates}
        self.seen = {k: 0 for k in self.rates}
        self._f = open(path, "a", buffering=1) if path else None
        self.memory: list[dict] = []          # the kept records when there is no file (tests, model cells)
        self.keep_in_memory = not path

    def maybe(self, kind: str, build: Callable[[], dict]) -> bool:
        """Keep the record *build()* with the configured probability of *kind*."""
        self.seen[kind] = self.seen.get(kind, 0) + 1
        rate = self.rates.get(kind, 0.0)
        if rate <= 0 or (rate < 1 and self.rng.random() >= rate):
            return False
        rec = {"kind": kind, "who": self.who, "t": self.clock.now() if self.clock else None, **build()}
        self.kept[kind] = self.kept.get(kind, 0) + 1
        if self._f is not None:
            self._f.write(json.dumps(rec, default=_jsonable) + "\n")
        elif self.keep_in_memory and len(self.memory) < 10_000:
            self.memory.append(rec)
        return True

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _jsonable(o):
    try:
        import numpy as np
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:
        pass
    return str(o)
