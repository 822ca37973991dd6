"""SAN step 1, the initiator's side: overload detected → Service Candidate Selection (the SCS
policy over the host's movable tasks) → one negotiation per selected task (steps 2–5 in
steps.py), at most max_parallel at once."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import random

import numpy as np

from cellbed.daemon.host_view import HostView
from cellbed.daemon.san.config import SanConfig
from cellbed.daemon.san.ledger import NegotiationLedger
from cellbed.daemon.san.policies import SanPolicies
from cellbed.daemon.san.reader import HostReader
from cellbed.daemon.san.steps import NegotiationSteps
from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.domain import errors
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.vm import DomState
from cellbed.policy.masb import overload
from cellbed.policy.masb.scs import Candidate
from cellbed.runtime.clock import Clock
from cellbed.runtime.decisions import DecisionLog
from cellbed.v1 import masb_pb2 as masbpb

log = logging.getLogger(__name__)


class Initiator:
    """Starts and runs this host's negotiations: the overload round (:meth:`run_round`), one
    negotiation for one task (:meth:`negotiate`) and an operator's request (:meth:`negotiate_now`).
    The steps of each negotiation are *steps*'; its record is the *ledger*'s."""

    def __init__(self, view: HostView, reader: HostReader, ledger: NegotiationLedger, steps: NegotiationSteps,
                 policies: SanPolicies, rng: random.Random, clock: Clock, decisions: DecisionLog,
                 cfg: SanConfig) -> None:
        self.view = view
        self.reader = reader
        self.host = reader.host
        self.ledger = ledger
        self.counters = ledger.counters
        self.steps = steps
        self.policies = policies
        self.rng = rng
        self.clock = clock
        self.decisions = decisions
        self.boot_grace_s = cfg.boot_grace_s
        self.max_scs_per_round = cfg.max_scs_per_round
        self._sem = asyncio.Semaphore(cfg.max_parallel)

    # --- step 1 --------------------------------------------------------------------------------------
    def _candidates(self) -> tuple[list[Candidate], np.ndarray, np.ndarray]:
        """SCS input: tasks that may move, and the host's use and production requests net of
        tasks already being negotiated away."""
        used = np.asarray(self.reader.load().used, dtype=float)
        prod = np.asarray(self.reader.prod_requested(), dtype=float)
        young = {id(e) for e in self.reader.young()} if self.boot_grace_s else set()
        self.ledger.forget_unmovable(self.clock.monotonic(), self.view.vms)
        out = []
        for name, e in self.view.vms.items():
            if id(e) in young or self.ledger.is_unmovable(name):
                continue
            if self.ledger.is_active(name) or e.migrating_out:
                tu = np.array([e.cpu_used_cores, e.rss_mib])
                used = used - tu
                if e.spec.production:
                    prod = prod - np.array([e.spec.requested_cpu, e.spec.mem_mib])
                continue
            if e.state is not DomState.RUNNING:
                continue
            s = e.spec
            dirty = s.dirty_mib_s if not math.isinf(s.dirty_mib_s) else 1e6
            cost = self.policies.migration_cost(s.mem_mib, s.wss_mib, dirty).bytes / 2**20
            compulsory = bool(s.constraints) and not all(c.matches(self.view.attributes) for c in s.constraints)
            out.append(Candidate(name, (e.cpu_used_cores, e.rss_mib), max(cost, 1e-3), compulsory,
                                 (s.requested_cpu, float(s.mem_mib)) if s.production else (0.0, 0.0)))
        return out, np.maximum(used, 0.0), np.maximum(prod, 0.0)

    async def run_round(self, verdict: overload.Verdict | None = None) -> None:
        """SAN step 1 (overload → SCS), then steps 2–5 for each selected task, until the host is
        no longer overloaded or nothing more can be done. A task whose SAN found no target is left
        out of the next SCS runs (the paper's "likelihood of finding an alternative node"), so
        step 1 picks others."""
        for _ in range(self.max_scs_per_round):
            detected = self.clock.now()
            try:
                verdict = self.policies.overload(self.reader.load())
                if not verdict:
                    return
                cands, used, prod = self._candidates()
                if not cands:
                    self.counters["scs_nothing_movable"] += 1
                    return
                cap = self.reader.capacity()
                sel = self.policies.scs(cap, used, cands, prod, self.rng)
            except PolicyFailed:     # counted by the guard: this round is not started
                self.counters["policy_refused"] += 1
                return
            self.counters["scs_runs"] += 1
            self.decisions.maybe("scs", lambda: {
                "host": self.host, "capacity": cap, "used": used, "prod_requested": prod,
                "reasons": verdict.reasons, "tasks": [dataclasses.asdict(c) for c in cands],
                "selected": sel.names, "compulsory": sel.compulsory, "fitness": sel.fitness,
                "feasible": sel.feasible, "evaluations": sel.evaluations, "score_after": sel.score_after})
            if not sel.names:
                if self.ledger.any_active():
                    return      # negotiations in flight already cover the excess
                self.counters["scs_empty"] += 1
                return
            by_name = {c.name: c for c in cands}
            detail = (f"overloaded ({'; '.join(verdict.reasons)}); selected {len(sel.names)} of {len(cands)}: "
                      f"{', '.join(sel.names)} (fitness {sel.fitness:.4g}, feasible {sel.feasible}, "
                      f"{sel.evaluations} evaluations)")
            results = await asyncio.gather(*(self.negotiate(n, detail, by_name[n], detected) for n in sel.names),
                                           return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    log.error("%s: negotiation failed with %r", self.host, r)
            if not any(r is True for r in results) and not self.ledger.any_unmovable(sel.names):
                return          # nothing moved and nothing new to try: again at the next sample

    # --- one negotiation -----------------------------------------------------------------------------
    async def negotiate(self, name: str, scs_detail: str = "", cand: Candidate | None = None,
                        detected_unix_s: float = 0.0) -> bool:
        """One SAN for task *name* (steps 2–5). True if it migrated. *detected_unix_s*: when
        the overload that led to it was detected (the negotiation's start)."""
        if self.ledger.is_active(name) or name not in self.view.vms:
            return False
        seq = self.ledger.next_seq()
        neg = self.ledger.open(name, f"{self.host}-{seq}-{self.rng.getrandbits(24):06x}",
                               detected_unix_s or self.clock.now())
        self.ledger.step(neg, "scs", "", scs_detail)
        try:
            async with self._sem:
                return await self.steps.run(neg, name)
        except asyncio.CancelledError:
            if neg.state == "active":
                self.ledger.finish(neg, "cancelled")
            raise
        except errors.CellbedError as exc:
            if neg.state == "active":
                gone = name not in self.view.vms
                self.ledger.finish(neg, "cancelled" if gone else "failed", "the task ended" if gone else str(exc))
            return False
        except Exception as exc:    # a bug: the negotiation ends all the same, or the task could never move again
            self.counters["negotiation_errors"] += 1
            log.exception("%s: negotiation %s for %s failed", self.host, neg.san_id, name)
            if neg.state == "active":
                self.ledger.finish(neg, "failed", f"internal error: {exc!r}")
            return False

    async def negotiate_now(self, name: str) -> masbpb.Negotiation:
        """NegotiateTask: a negotiation for *name* now, as an operator asks (no overload needed)."""
        if not name:
            raise InvalidArgument("name must be set")
        e = self.view.vms.get(name)
        if e is None:
            raise errors.NotFound(f"task {name!r} is not on host {self.host}")
        if self.ledger.is_active(name):
            raise errors.FailedPrecondition(f"task {name} is already being negotiated ({self.ledger.san_id_of(name)})")
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"task {name} is {e.state.value} ({e.reason}); only running tasks move")
        await self.negotiate(name, "requested by an operator (NegotiateTask)")
        neg = self.ledger.last_of(name)
        if neg is None:
            raise errors.CellbedError(f"negotiation of {name} left no record")
        return neg
