"""How a GM places a queued task: match on its view, ask the LM (launch, repartition or preempt), park what fails, resolve unsure outcomes, and preempt for fairness."""
from __future__ import annotations

import asyncio
import logging
from collections import Counter
from cellbed.domain import errors
from cellbed.policy.megha import fairness
from cellbed.v1 import megha_pb2 as meghapb
from cellbed.controller.megha.gm_task import QUEUED, RUNNING, STARTING, GmTask, LM_DOWN

log = logging.getLogger(__name__)


class PlaceMixin:
    """Part of GlobalMaster (which owns the state these methods use)."""

    def _known_to_fail(self, gt: GmTask) -> bool:
        """A task no smaller than one that just failed, with the same constraints and user, on the
        same view, fails too: park it without matching again (Borg-style equivalence classes)."""
        if self._memo_gen != self._gen:
            self._memo.clear()
            self._memo_gen = self._gen
            return False
        for c, m in self._memo.get((gt.constraints, gt.user), ()):
            if gt.cpu >= c - 1e-9 and gt.mem >= m - 1e-9:
                return True
        return False

    def _remember_failure(self, gt: GmTask) -> None:
        if self._memo_gen == self._gen:
            self._memo.setdefault((gt.constraints, gt.user), []).append((gt.cpu, gt.mem))

    async def _resolve_unsure(self, gt: GmTask) -> str:
        """A request to an LM timed out or broke: did the LM take the task? "placed", "free" (no LM
        that may hold it does) or "unknown" (one did not answer: keep waiting, never place it twice)."""
        for lm in sorted(gt.unsure):
            try:
                r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                 meghapb.FindTasksRequest(names=[gt.name]),
                                                 timeout=self.params.request_timeout_s)
            except errors.CellbedError as e:
                gt.detail = f"waiting to learn whether LM {lm} took it: {e}"
                self._failover(lm)
                return "unknown"
            if r.found:
                rec = r.found[0]
                gt.unsure.clear()
                gt.state = RUNNING if rec.state == meghapb.TASK_STATE_RUNNING else STARTING
                gt.placement = meghapb.Placement(lm=lm, host=rec.host, partition=rec.partition, repartitioned=rec.logical)
                self.store.remove(self.name, gt.name)
                self.counters["found_after_timeout"] += 1
                return "placed"
            gt.unsure.discard(lm)
        return "free"

    def _park(self, gt: GmTask, detail: str) -> None:
        gt.state, gt.detail = QUEUED, detail
        gt.clk.requeue(self.clock.now())
        gt.requeues += 1
        self.queues.park(gt.user, gt.name)
        self.counters["requeued"] += 1

    async def _place(self, gt: GmTask, kind: str, lm: str, host: str = "", victim: str = "") -> str:
        """One request to an LM: "ok", "refused" (inconsistency; state applied) or "lm_down"."""
        now = self.clock.now()
        if kind == "launch":
            method, req = "Launch", meghapb.LaunchRequest(task=gt.task, gm=self.name, host=host, sent_unix_s=now)
        elif kind == "repartition":
            method, req = "Repartition", meghapb.RepartitionRequest(task=gt.task, gm=self.name, host=host, sent_unix_s=now)
        else:
            method, req = "Preempt", meghapb.PreemptRequest(task=gt.task, gm=self.name, victim_user=victim, sent_unix_s=now)
        target = self._target(lm)
        self.counters[f"{kind}_requests"] += 1
        gt.inflight = True
        try:
            resp = await self.transport.request(target, f"LocalMaster/{method}", req,
                                                timeout=self.params.request_timeout_s)
        except LM_DOWN as e:
            gt.inflight = False
            if not isinstance(e, errors.FailedPrecondition):   # a standby's refusal accepted nothing
                gt.unsure.add(lm)                               # the LM may have taken it: ask before placing elsewhere
            gt.clk.failed_attempt(self.clock.now() - now, 0.0, 0.0)
            gt.detail = f"LM {lm} ({target}) unavailable: {e}"
            self.counters["lm_unavailable"] += 1
            self._failover(lm)
            return "lm_down"
        except errors.CellbedError as e:   # a bug or a config mismatch between GM and LM
            gt.inflight = False
            gt.clk.failed_attempt(self.clock.now() - now, 0.0, 0.0)
            gt.detail = f"LM {lm} refused {method}: {e}"
            self.counters["lm_errors"] += 1
            log.warning("GM %s: %s %s on %s: %s", self.name, method, gt.name, target, e)
            return "lm_down"
        gt.inflight = False
        rtt = self.clock.now() - now
        if resp.HasField("state"):
            self._apply(lm, resp.state)
        if not resp.ok:
            tm = resp.timing
            gt.clk.failed_attempt(rtt, tm.queue_ms / 1000, tm.processing_ms / 1000)
            gt.detail = f"{lm}: {resp.detail}"
            self.counters[f"inconsistency_{meghapb.Inconsistency.Name(resp.inconsistency).split('_', 1)[1].lower()}"] += 1
            return "refused"
        gt.state = STARTING
        gt.placement = resp.placement
        gt.detail = ""
        self.store.remove(self.name, gt.name)
        pu = self.per_user.setdefault(gt.user, Counter())
        if kind == "repartition" or resp.placement.repartitioned:
            self.counters["repartitions"] += 1
            pu["repartitions"] += 1
        if kind == "preempt":
            self.counters["preemptions"] += len(resp.placement.preempted)
            pu["preemptions"] += len(resp.placement.preempted)
        self.counters["placed"] += 1
        pu["placed"] += 1
        if gt.early is not None:
            ev, gt.early = gt.early, None
            if ev.placement.lm and ev.placement.lm != resp.placement.lm:
                # it started elsewhere meanwhile (a takeover reported a start this GM took for lost):
                # keep that one, stop this duplicate
                self.counters["duplicates_stopped"] += 1
                log.warning("GM %s: %s already runs on %s; stopping its duplicate on %s", self.name, gt.name,
                            ev.placement.host, resp.placement.host)
                asyncio.ensure_future(self._stop_duplicate(lm, gt.name))
            self._started(gt, ev)
        return "ok"

    async def _stop_duplicate(self, lm: str, name: str) -> None:
        try:
            await self.transport.request(self._target(lm), "LocalMaster/StopTask", meghapb.StopTaskRequest(name=name),
                                         timeout=self.params.request_timeout_s)
        except errors.CellbedError as e:
            log.warning("GM %s: stopping the duplicate of %s on %s failed: %s", self.name, name, lm, e)

    async def _preempt(self, gt: GmTask) -> bool:
        """Algorithm 2: under contention, preempt the user with the largest share violation."""
        cap_c, cap_m = self.view.capacity()
        usage = self.view.usage()
        cons = fairness.consumption(usage, cap_c, cap_m)
        victims = fairness.victims(gt.user, self.shares, cons)
        if not victims:
            if cons.get(gt.user, 0.0) >= self.shares.get(gt.user, 0.0):
                gt.detail = (f"{self.view.why_not(gt.constraints, gt.cpu, gt.mem)}; {gt.user} uses "
                             f"{cons.get(gt.user, 0.0):.1%} ≥ its share {self.shares.get(gt.user, 0.0):.1%}: no preemption")
            return False
        pu = self.per_user.setdefault(gt.user, Counter())
        asked = 0
        for victim in victims:
            lms = [lm for lm in self.view.order if self.view[lm].usage.get(victim)]
            for lm in lms:
                if asked >= self.params.max_preempt_lms:
                    return False
                asked += 1
                pu["preemption_attempts"] += 1
                self.counters["preemption_attempts"] += 1
                await self.clock.charge("gm_preempt")
                res = await self._place(gt, "preempt", lm, victim=victim)
                if res == "ok":
                    return True
                self.counters["preemption_failures"] += 1
        return False
