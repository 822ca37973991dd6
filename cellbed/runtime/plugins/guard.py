"""The guarded call of a stage's policy: what every agent calls instead of the policy itself.

Every call is counted and timed (:mod:`.stats`). A plugin's call is also checked: it must
return within its budget, raise nothing, and keep its stage's contract. A built-in policy is
trusted (``cellctl policy check`` fuzzes it instead), so that the golden runs and a large model
cell pay only for the timing.

A failure becomes :class:`PolicyFailed` (FAILED_PRECONDITION): one line naming the stage, the
policy, what went wrong and a digest of the input. The agent refuses that one decision (no
placement, no migration) and keeps serving. What happens next is the environment's
(:class:`PolicyEnv`): in ``strict`` mode (a model run's default) the failure is also recorded as
fatal, and the run ends with it; in ``isolate`` mode (a real agent's) it is only counted.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any, Callable

import numpy as np

from cellbed.domain.errors import FailedPrecondition
from cellbed.policy.api import STAGES
from cellbed.runtime.plugins.identity import Identity
from cellbed.runtime.plugins.stats import Acc, StageStats
from cellbed.runtime.plugins.watchdog import WATCHDOG, PolicyTimeout, Watchdog

MODES = ("strict", "isolate")
DEFAULT_BUDGET_MS = 1000.0


class PolicyFailed(FailedPrecondition):
    """A plugin raised, hung or broke its contract; this decision is refused."""

    def __init__(self, ident: Identity, what: str, digest: str) -> None:
        sha = f", sha256 {ident.sha256[:12]}" if ident.sha256 else ""
        super().__init__(f"policy {ident.stage} {ident.ref!r} ({ident.origin}{sha}): {what}; input digest {digest}")
        self.ident = ident
        self.what = what
        self.digest = digest


@dataclasses.dataclass
class PolicyEnv:
    """What the stages of one process or one model cell share: the timing table, the error
    mode, the time budget, and the failures that end a strict run."""
    mode: str = "isolate"
    budget_ms: float = DEFAULT_BUDGET_MS
    stats: StageStats = dataclasses.field(default_factory=StageStats)
    fatal: list = dataclasses.field(default_factory=list)          # PolicyFailed, in strict mode
    on_error: Callable[[PolicyFailed], None] | None = None          # e.g. a Prometheus counter
    watchdog: Watchdog = WATCHDOG
    timed: bool = True              # False only to measure what the timing costs (scripts/bench_policy_overhead.py)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"policy.errors: allowed {', '.join(MODES)}, got {self.mode!r}")

    def failed(self, err: PolicyFailed) -> None:
        if self.mode == "strict":
            self.fatal.append(err)
        if self.on_error is not None:
            self.on_error(err)


def digest(args: tuple) -> str:
    h = hashlib.sha256()
    for a in args:
        if isinstance(a, np.ndarray):
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        else:
            h.update(repr(a).encode(errors="replace"))
        h.update(b"\0")
    return h.hexdigest()[:16]


class StagePolicy:
    """A resolved policy of one stage, called like the policy itself: ``policy(*inputs)``."""
    __slots__ = ("stage", "ident", "fn", "kw", "trusted", "env", "acc", "_check", "_examined", "budget_ns", "needs")

    def __init__(self, ident: Identity, fn: Callable, params: Any, trusted: bool, env: PolicyEnv,
                 needs: frozenset[str] = frozenset({"*"})) -> None:
        st = STAGES[ident.stage]
        self.stage = ident.stage
        self.ident = ident
        self.fn = fn
        self.kw = {} if params is None else {"params": params}
        self.trusted = trusted
        self.env = env
        self.acc: Acc = env.stats.acc(ident.stage, ident.label)
        self._check = st.check
        self._examined = st.examined
        self.budget_ns = int(env.budget_ms * 1e6)
        self.needs = needs

    def needs_input(self, name: str) -> bool:
        """Whether the policy reads the optional input *name* (the mechanism may skip computing it)."""
        return "*" in self.needs or name in self.needs

    def __call__(self, *args):
        if self.trusted:
            if not self.env.timed:
                return self.fn(*args, **self.kw)
            t0 = time.perf_counter_ns()
            out = self.fn(*args, **self.kw)
            self.acc.add(time.perf_counter_ns() - t0, self._examined(args))
            return out
        return self._guarded(args)

    def _guarded(self, args: tuple):
        w = self.env.watchdog
        watched = w.usable()
        t0 = time.perf_counter_ns()
        try:
            try:
                if watched:
                    w.enter(self.budget_ns)
                out = self.fn(*args, **self.kw)
            finally:
                if watched:
                    w.leave()
        except PolicyTimeout:
            self.acc.add(time.perf_counter_ns() - t0, 0)        # a call, counted and timed like any other
            self._fail(args, f"did not answer within its budget of {self.budget_ns / 1e6:g} ms (interrupted)")
        except (Exception, SystemExit) as e:
            self.acc.add(time.perf_counter_ns() - t0, 0)
            self._fail(args, f"raised {type(e).__name__}: {_one_line(e)}")
        dt = time.perf_counter_ns() - t0
        try:
            examined = self._examined(args)
            bad = self._check(args, out)
        except Exception as e:         # an answer so malformed that checking it fails
            examined, bad = 0, f"returned an answer that cannot be checked ({type(e).__name__}: {_one_line(e)})"
        self.acc.add(dt, examined)
        if bad:
            self._fail(args, bad)
        if dt > self.budget_ns:
            self._fail(args, f"answered in {dt / 1e6:.1f} ms, over its budget of {self.budget_ns / 1e6:g} ms")
        return out

    def _fail(self, args: tuple, what: str):
        self.acc.errors += 1
        err = PolicyFailed(self.ident, what, digest(args))
        self.env.failed(err)
        raise err


def _one_line(e: BaseException, n: int = 160) -> str:
    s = " ".join(str(e).split()) or "(no message)"
    return s if len(s) <= n else s[: n - 3] + "..."
