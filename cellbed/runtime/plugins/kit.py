"""The contract kit behind ``cellctl policy check``: fuzz a policy against its stage's contract
with hypothesis, on the inputs agents really pass (:mod:`.inputs`), and report each kind of
violation with a minimal input (hypothesis shrinks it).

The kinds, each searched for on its own so that one does not hide another:

* ``contract``: the answer breaks the stage's contract (``cellbed.policy.api.contracts``);
* ``raises``: the policy raised on a valid input;
* ``mutates``: it changed an input (arrays are passed read-only, records and lists compared);
* ``impure``: the same input and the same rng seed gave another answer (a clock, a global RNG,
  or state kept between calls);
* ``slow``: one call took longer than the budget.
"""
from __future__ import annotations

import copy
import dataclasses
import random
import time
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, errors as hyp_errors, find, settings

from cellbed.policy.api import STAGES
from cellbed.runtime.plugins.inputs import STRATEGIES

KINDS = ("contract", "raises", "mutates", "impure", "slow")


@dataclasses.dataclass(frozen=True)
class Violation:
    kind: str
    what: str
    example: str          # the minimal input, shown


def _reseed(args: tuple) -> tuple:
    """The same input with fresh rngs in the same state (for the purity check)."""
    out = []
    for a in args:
        if isinstance(a, random.Random):
            r = random.Random()
            r.setstate(a.getstate())
            out.append(r)
        elif isinstance(a, np.random.Generator):
            out.append(copy.deepcopy(a))
        else:
            out.append(a)
    return tuple(out)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
        except (TypeError, ValueError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b) and type(a) is type(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    try:
        return bool(a == b) or (a != a and b != b)
    except (TypeError, ValueError):
        return False


def _plain(args: tuple) -> tuple:
    return tuple(copy.deepcopy(a) for a in args if not isinstance(a, (random.Random, np.random.Generator)))


class Probe:
    """Calls a policy on one input and says which kind of violation it shows ('' if none)."""

    def __init__(self, stage: str, fn: Callable, kw: dict, budget_s: float) -> None:
        self.stage = STAGES[stage]
        self.fn, self.kw, self.budget_s = fn, kw, budget_s
        self.last: dict[str, str] = {}

    def kind(self, args: tuple) -> str:
        before = _plain(args)
        twin = _reseed(args)
        t0 = time.perf_counter()
        try:
            out = self.fn(*args, **self.kw)
        except ValueError as e:
            if "read-only" in str(e):     # numpy refused a write to an input array
                return self._say("mutates", f"tried to change an input array ({e})")
            return self._say("raises", f"raised ValueError: {e}")
        except Exception as e:
            return self._say("raises", f"raised {type(e).__name__}: {e}")
        dt = time.perf_counter() - t0
        try:
            bad = self.stage.check(args, out)
        except Exception as e:
            bad = f"returned an answer that cannot be checked ({type(e).__name__}: {e})"
        if bad:
            return self._say("contract", bad)
        if not all(_same(x, y) for x, y in zip(before, _plain(args))):
            return self._say("mutates", "changed one of its inputs")
        try:
            again = self.fn(*twin, **self.kw)
        except Exception as e:
            return self._say("impure", f"raised {type(e).__name__} on the same input the second time: {e}")
        if not _same(out, again):
            return self._say("impure", f"gave {_short(out)} then {_short(again)} for the same input and rng seed")
        if dt > self.budget_s:
            return self._say("slow", f"took {dt * 1e3:.0f} ms, over the budget of {self.budget_s * 1e3:.0f} ms")
        return ""

    def _say(self, kind: str, what: str) -> str:
        self.last[kind] = what
        return kind


def check(stage: str, fn: Callable, kw: dict, *, examples: int = 300, seed: int = 0,
          budget_s: float = 1.0) -> list[Violation]:
    """Explore *examples* inputs once, noting each kind of violation met; then, for each kind met,
    let hypothesis shrink it to a minimal input."""
    probe = Probe(stage, fn, kw, budget_s)
    strategy = STRATEGIES[stage]()
    seen: set[str] = set()

    def explore(a) -> bool:
        k = probe.kind(a)
        if k:
            seen.add(k)
        return False                 # never "found": hypothesis tries every example

    _find(strategy, explore, examples, seed)
    found = []
    for kind in (k for k in KINDS if k in seen):
        ex = _find(strategy, lambda a, k=kind: probe.kind(a) == k, examples, seed)
        if ex is None:               # met while exploring, not again while shrinking (a flaky policy)
            found.append(Violation(kind, probe.last.get(kind, kind), "(not reproduced while shrinking)"))
            continue
        probe.kind(ex)               # the minimal example's own message
        found.append(Violation(kind, probe.last.get(kind, kind), _show(stage, ex)))
    return found


def _find(strategy, condition, examples: int, seed: int):
    cfg = settings(max_examples=examples, database=None, deadline=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))
    try:
        return find(strategy, condition, settings=cfg, random=random.Random(seed))
    except (hyp_errors.NoSuchExample, hyp_errors.Unsatisfiable):
        return None


def _show(stage: str, args: tuple) -> str:
    names = STAGES[stage].inputs
    return ", ".join(f"{n}={_short(a, 160)}" for n, a in zip(names, args))


def _short(x: Any, n: int = 100) -> str:
    if isinstance(x, np.ndarray):
        s = np.array2string(x, precision=4, separator=", ", threshold=12).replace("\n", "")
    else:
        s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."
