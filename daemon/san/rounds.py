"""SAN step 1: overload detected → Service Candidate Selection (Tabu Search over the host's
movable tasks) → one negotiation per selected task (steps 2–5 in steps.py)."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import math

import numpy as np

from cellbed.domain import errors, wire
from cellbed.domain.errors import InvalidArgument
from cellbed.policy.masb import overload
from cellbed.policy.masb.scs import Candidate, tabu_select
from cellbed.policy.migration.cost import precopy
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb
from cellbed.daemon.san.config import Negotiation
from cellbed.domain.vm import DomState

log = logging.getLogger(__name__)


class RoundMixin:
    """SAN step 1 of SanAgent: the overload round (SCS picks the tasks to move), one negotiation
    per task, and the negotiations' bookkeeping."""

    def _candidates(self) -> tuple[list[Candidate], np.ndarray, np.ndarray]:
        """SCS input: tasks that may move, and the host's use and production requests net of
        tasks already being negotiated away."""
        used = np.asarray(self.load().used, dtype=float)
        prod = np.asarray(self.prod_requested(), dtype=float)
        young = {id(e) for e in self._young()} if self.cfg.boot_grace_s else set()
        now = self.clock.monotonic()
        for n in [n for n, t in self.unmovable.items() if t <= now or n not in self.view.vms]:
            del self.unmovable[n]
        out = []
        for name, e in self.view.vms.items():
            if id(e) in young or name in self.unmovable:
                continue
            if name in self.active or e.migrating_out:
                tu = np.array([e.cpu_used_cores, e.rss_mib])
                used = used - tu
                if e.spec.production:
                    prod = prod - np.array([e.spec.requested_cpu, e.spec.mem_mib])
                continue
            if e.state is not DomState.RUNNING:
                continue
            s = e.spec
            dirty = s.dirty_mib_s if not math.isinf(s.dirty_mib_s) else 1e6
            cost = precopy(s.mem_mib, s.wss_mib, dirty, self.cost).bytes / 2**20
            compulsory = bool(s.constraints) and not all(c.matches(self.view.attributes) for c in s.constraints)
            out.append(Candidate(name, (e.cpu_used_cores, e.rss_mib), max(cost, 1e-3), compulsory,
                                 (s.requested_cpu, float(s.mem_mib)) if s.production else (0.0, 0.0)))
        return out, np.maximum(used, 0.0), np.maximum(prod, 0.0)

    async def run_round(self, verdict: overload.Verdict | None = None) -> None:
        """SAN step 1 (overload → SCS), then steps 2–5 for each selected task, until the host is no longer overloaded or nothing more can be done. A task
        whose SAN found no target is left out of the next SCS runs (the paper's "likelihood of
        finding an alternative node"), so step 1 picks others."""
        for _ in range(self.cfg.max_scs_per_round):
            detected = self.clock.now()
            load = self.load()
            verdict = overload.check(load, self.cfg.max_util)
            if not verdict:
                return
            cands, used, prod = self._candidates()
            if not cands:
                self.counters["scs_nothing_movable"] += 1
                return
            cap = self.capacity()
            sel = tabu_select(cap, used, cands, self.rng, self.tabu, prod)
            self.counters["scs_runs"] += 1
            self.decisions.maybe("scs", lambda: {
                "host": self.host, "capacity": cap, "used": used, "prod_requested": prod,
                "reasons": verdict.reasons, "tasks": [dataclasses.asdict(c) for c in cands],
                "selected": sel.names, "compulsory": sel.compulsory, "fitness": sel.fitness,
                "feasible": sel.feasible, "evaluations": sel.evaluations, "score_after": sel.score_after})
            if not sel.names:
                if any(True for _ in self.active):
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
            if not any(r is True for r in results) and not any(n in self.unmovable for n in sel.names):
                return          # nothing moved and nothing new to try: again at the next sample

    def _step(self, neg: masbpb.Negotiation, kind: str, host: str = "", detail: str = "", forced: bool = False) -> None:
        neg.steps.add(unix_s=self.clock.now(), kind=kind, host=host, detail=detail, forced=forced)
        self.node.emit(npb.EVENT_KIND_SAN_STEP, neg.vm, f"{neg.san_id} {kind} {host} {detail}".strip())

    def _finish(self, neg: masbpb.Negotiation, state: str, detail: str = "") -> None:
        neg.state, neg.ended_unix_s = state, self.clock.now()
        if state == "gave-up" and self.cfg.unmovable_s:
            self.unmovable[neg.vm] = self.clock.monotonic() + self.cfg.unmovable_s
        self._step(neg, "done", neg.target, f"{state}{': ' + detail if detail else ''}")
        self.counters[f"sans_{state}"] += 1
        self.active.pop(neg.vm, None)
        self.recent.append(neg)

    def task_info(self, name: str) -> masbpb.TaskInfo:
        e = self.view.vms.get(name)
        if e is None:
            raise errors.NotFound(f"task {name!r} is not on host {self.host}")
        s = e.spec
        m, v, n = self._gpa(name)
        return masbpb.TaskInfo(name=name, used=wire.resources(e.cpu_used_cores, e.rss_mib),
                            cpu_mean=m, cpu_var=v, cpu_samples=n,
                            requested=wire.resources(s.requested_cpu, s.mem_mib),
                            constraints=wire.constraints_pb(s.constraints), production=s.production,
                            priority=s.priority, mem_mib=s.mem_mib, wss_mib=s.wss_mib,
                            dirty_mib_s=-1 if math.isinf(s.dirty_mib_s) else s.dirty_mib_s)

    async def negotiate(self, name: str, scs_detail: str = "", cand: Candidate | None = None,
                        detected_unix_s: float = 0.0) -> bool:
        """One SAN for task *name* (steps 2–5). True if it migrated. *detected_unix_s*: when
        the overload that led to it was detected (the negotiation's start)."""
        if name in self.active or name not in self.view.vms:
            return False
        self._seq += 1
        neg = masbpb.Negotiation(san_id=f"{self.host}-{self._seq}-{self.rng.getrandbits(24):06x}", vm=name,
                              src_host=self.host, state="active", started_unix_s=detected_unix_s or self.clock.now())
        self.active[name] = Negotiation(neg)
        self.counters["sans_started"] += 1
        self._step(neg, "scs", "", scs_detail)
        try:
            async with self._sem:
                return await self._negotiate(neg, name)
        except asyncio.CancelledError:
            if neg.state == "active":
                self._finish(neg, "cancelled")
            raise
        except errors.CellbedError as exc:
            if neg.state == "active":
                gone = name not in self.view.vms
                self._finish(neg, "cancelled" if gone else "failed", "the task ended" if gone else str(exc))
            return False

    async def negotiate_now(self, name: str) -> masbpb.Negotiation:
        if not name:
            raise InvalidArgument("name must be set")
        e = self.view.vms.get(name)
        if e is None:
            raise errors.NotFound(f"task {name!r} is not on host {self.host}")
        if name in self.active:
            raise errors.FailedPrecondition(f"task {name} is already being negotiated ({self.active[name].pb.san_id})")
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"task {name} is {e.state.value} ({e.reason}); only running tasks move")
        await self.negotiate(name, "requested by an operator (NegotiateTask)")
        for n in reversed(self.recent):
            if n.vm == name:
                return n
        raise errors.CellbedError(f"negotiation of {name} left no record")

