"""How a GM places its queued tasks (seed 001 §IV-B, IV-C): one task at a time, in the queues'
order; match on the view, ask the LM (launch, repartition or preempt), park what fails, resolve
unsure outcomes before placing a task anywhere else, and preempt for fairness.

The GM waits for the LM's answer before the next task, as the paper's prototype does
(synchronous REST); this is what makes a single GM (``central``) the bottleneck under load.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha.gm_events import TaskEvents
from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.gm_task import LM_DOWN, QUEUED, STARTING, GmTask
from cellbed.controller.megha.gm_view import ViewKeeper
from cellbed.controller.megha.params import GmParams
from cellbed.controller.megha.gm_explain import PlacementExplanation
from cellbed.domain import errors
from cellbed.runtime.explain import OFF, ExplainLog
from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.policy.megha import fairness
from cellbed.policy.megha.view import View
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class Placer:
    """The scheduling loop and everything it asks. The policy it applies is called from one
    place each: the queue order in ``serve`` (TaskTable.pop), the match in ``schedule``
    (View.match, the allocation stage) and the fair-share victims in ``_preempt`` (the preemption stage)."""

    def __init__(self, name: str, view: View, keeper: ViewKeeper, links: LmLinks, table: TaskTable,
                 events: TaskEvents, clock, params: GmParams, counters: Counter,
                 per_user: dict[str, Counter], shares: dict[str, float], preemption=None,
                 explain: ExplainLog = OFF) -> None:
        self.name = name
        self._preemption = preemption or fairness.victims      # the preemption stage (T10)
        self._explain = explain
        self._view = view
        self._keeper = keeper
        self._links = links
        self._table = table
        self._events = events
        self._clock = clock
        self._params = params
        self._counters = counters
        self._per_user = per_user
        self._shares = shares
        self._memo: dict[tuple, list[tuple[float, float]]] = {}
        self._memo_gen = -1

    # --- the scheduling loop ------------------------------------------------------------------------
    async def serve(self) -> None:
        while True:
            nxt = self._table.pop()
            if nxt is None:
                await self._table.idle()
                continue
            gt = self._table.get(nxt[1])
            if gt is None or gt.state != QUEUED:
                continue
            try:
                await self.schedule(gt)
            except asyncio.CancelledError:
                raise
            except PolicyFailed as e:        # a plugin failed: this placement is refused, the task waits
                self._counters["policy_refused"] += 1
                self._park(gt, f"not placed: {e}")
            except Exception:
                log.exception("GM %s: scheduling %s failed; requeued", self.name, gt.name)
                self._park(gt, "internal error; requeued")

    async def schedule(self, gt: GmTask) -> None:
        gt.clk.dequeue(self._clock.now())
        if gt.unsure:
            res = await self._resolve_unsure(gt)
            if res == "placed":
                return
            if res == "unknown":
                self._park(gt, gt.detail)
                return
        if self._known_to_fail(gt):
            self._counters["skipped_known_to_fail"] += 1
            self._park(gt, gt.detail)
            return
        gen0 = self._keeper.gen
        choice = None
        did = f"{self.name}:{gt.name}:{gt.requeues}"          # one decision: this task's attempt
        ex = PlacementExplanation(did, self.name, gt.name, gt.user, gt.cpu, gt.mem, self._clock.now()) \
            if self._explain.wants(did) else None
        for _ in range(1 + self._params.immediate_retries):
            t0 = self._clock.now()
            choice, scanned = self._view.match(gt.constraints, gt.cpu, gt.mem, observe=ex.observe if ex else None)
            await self._clock.charge("gm_match", scanned)
            gt.clk.proc += self._clock.now() - t0
            if choice is None:
                break
            res = await self._place(gt, choice.kind, choice.lm, host=choice.host)
            if ex is not None:
                ex.verdict(choice.lm, choice.host, choice.kind, res, gt.detail)
            if res == "ok":
                if ex is not None:
                    ex.done(self._explain, "placed", choice.lm, choice.host)
                return
            if res == "lm_down":
                break
        if ex is not None:
            ex.done(self._explain, "parked" if choice is None else "refused")
        if choice is None and self._params.fairness and len(self._shares) > 1:
            if await self._preempt(gt):
                return
        if choice is None:
            if not gt.detail.endswith("no preemption"):
                gt.detail = self._view.why_not(gt.constraints, gt.cpu, gt.mem)
            if self._keeper.gen == gen0:
                self._remember_failure(gt)
        self._park(gt, gt.detail)

    # --- what failed before -------------------------------------------------------------------------
    def _known_to_fail(self, gt: GmTask) -> bool:
        """A task no smaller than one that just failed, with the same constraints and user, on the
        same view, fails too: park it without matching again (Borg-style equivalence classes)."""
        if self._memo_gen != self._keeper.gen:
            self._memo.clear()
            self._memo_gen = self._keeper.gen
            return False
        for c, m in self._memo.get((gt.constraints, gt.user), ()):
            if gt.cpu >= c - 1e-9 and gt.mem >= m - 1e-9:
                return True
        return False

    def _remember_failure(self, gt: GmTask) -> None:
        if self._memo_gen == self._keeper.gen:
            self._memo.setdefault((gt.constraints, gt.user), []).append((gt.cpu, gt.mem))

    async def _resolve_unsure(self, gt: GmTask) -> str:
        """A request to an LM timed out or broke: did the LM take the task? "placed", "free" (no LM
        that may hold it does) or "unknown" (one did not answer: keep waiting, never place it twice)."""
        for lm in sorted(gt.unsure):
            try:
                r = await self._links.ask(lm, "LocalMaster/FindTasks", meghapb.FindTasksRequest(names=[gt.name]))
            except errors.CellbedError as e:
                gt.detail = f"waiting to learn whether LM {lm} took it: {e}"
                self._links.failover(lm)
                return "unknown"
            if r.found:
                rec = r.found[0]
                gt.unsure.clear()
                self._counters["found_after_timeout"] += 1
                if gt.state != QUEUED:          # its event came while the LM was asked: already applied
                    return "placed"
                # STARTING even if the LM runs it already: RUNNING comes with the LM's STARTED event,
                # which carries the start time the allocation record needs (the LM resends it until
                # acknowledged); one that came while the lost request was in flight is applied now
                gt.state = STARTING
                gt.placement = meghapb.Placement(lm=lm, host=rec.host, partition=rec.partition, repartitioned=rec.logical)
                self._table.unpersist(gt.name)
                if gt.early is not None:
                    ev, gt.early = gt.early, None
                    self._events.started(gt, ev)
                return "placed"
            gt.unsure.discard(lm)
        return "free"

    def _park(self, gt: GmTask, detail: str) -> None:
        gt.state, gt.detail = QUEUED, detail
        gt.clk.requeue(self._clock.now())
        gt.requeues += 1
        self._table.park(gt)
        self._counters["requeued"] += 1

    # --- the request to an LM -----------------------------------------------------------------------
    async def _place(self, gt: GmTask, kind: str, lm: str, host: str = "", victim: str = "") -> str:
        """One request to an LM: "ok", "refused" (inconsistency; state applied) or "lm_down"."""
        now = self._clock.now()
        if kind == "launch":
            method, req = "Launch", meghapb.LaunchRequest(task=gt.task, gm=self.name, host=host, sent_unix_s=now)
        elif kind == "repartition":
            method, req = "Repartition", meghapb.RepartitionRequest(task=gt.task, gm=self.name, host=host, sent_unix_s=now)
        else:
            method, req = "Preempt", meghapb.PreemptRequest(task=gt.task, gm=self.name, victim_user=victim, sent_unix_s=now)
        target = self._links.target(lm)
        self._counters[f"{kind}_requests"] += 1
        gt.inflight = True
        try:
            resp = await self._links.request(target, f"LocalMaster/{method}", req)
        except LM_DOWN as e:
            gt.inflight = False
            if not isinstance(e, errors.FailedPrecondition):   # a standby's refusal accepted nothing
                gt.unsure.add(lm)                               # the LM may have taken it: ask before placing elsewhere
            gt.clk.failed_attempt(self._clock.now() - now, 0.0, 0.0)
            gt.detail = f"LM {lm} ({target}) unavailable: {e}"
            self._counters["lm_unavailable"] += 1
            self._links.failover(lm)
            return "lm_down"
        except errors.CellbedError as e:   # a bug or a config mismatch between GM and LM
            gt.inflight = False
            gt.clk.failed_attempt(self._clock.now() - now, 0.0, 0.0)
            gt.detail = f"LM {lm} refused {method}: {e}"
            self._counters["lm_errors"] += 1
            log.warning("GM %s: %s %s on %s: %s", self.name, method, gt.name, target, e)
            return "lm_down"
        gt.inflight = False
        rtt = self._clock.now() - now
        if resp.HasField("state"):
            self._keeper.apply(lm, resp.state)
        if not resp.ok:
            tm = resp.timing
            gt.clk.failed_attempt(rtt, tm.queue_ms / 1000, tm.processing_ms / 1000)
            gt.detail = f"{lm}: {resp.detail}"
            self._counters[f"inconsistency_{meghapb.Inconsistency.Name(resp.inconsistency).split('_', 1)[1].lower()}"] += 1
            return "refused"
        gt.state = STARTING
        gt.placement = resp.placement
        gt.detail = ""
        self._table.unpersist(gt.name)
        pu = self._per_user.setdefault(gt.user, Counter())
        if kind == "repartition" or resp.placement.repartitioned:
            self._counters["repartitions"] += 1
            pu["repartitions"] += 1
        if kind == "preempt":
            self._counters["preemptions"] += len(resp.placement.preempted)
            pu["preemptions"] += len(resp.placement.preempted)
        self._counters["placed"] += 1
        pu["placed"] += 1
        if gt.early is not None:
            ev, gt.early = gt.early, None
            if ev.placement.lm and ev.placement.lm != resp.placement.lm:
                # it started elsewhere meanwhile (a takeover reported a start this GM took for lost):
                # keep that one, stop this duplicate
                self._counters["duplicates_stopped"] += 1
                log.warning("GM %s: %s already runs on %s; stopping its duplicate on %s", self.name, gt.name,
                            ev.placement.host, resp.placement.host)
                asyncio.ensure_future(self._stop_duplicate(lm, gt.name))
            self._events.started(gt, ev)
        return "ok"

    async def _stop_duplicate(self, lm: str, name: str) -> None:
        try:
            await self._links.ask(lm, "LocalMaster/StopTask", meghapb.StopTaskRequest(name=name))
        except errors.CellbedError as e:
            log.warning("GM %s: stopping the duplicate of %s on %s failed: %s", self.name, name, lm, e)

    # --- fairness -----------------------------------------------------------------------------------
    async def _preempt(self, gt: GmTask) -> bool:
        """Algorithm 2: under contention, preempt the user with the largest share violation."""
        cap_c, cap_m = self._view.capacity()
        usage = self._view.usage()
        cons = fairness.consumption(usage, cap_c, cap_m)
        try:
            victims = self._preemption(gt.user, self._shares, cons)
        except PolicyFailed:                   # counted by the guard: no preemption this time
            self._counters["policy_refused"] += 1
            victims = []
        if not victims:
            if cons.get(gt.user, 0.0) >= self._shares.get(gt.user, 0.0):
                gt.detail = (f"{self._view.why_not(gt.constraints, gt.cpu, gt.mem)}; {gt.user} uses "
                             f"{cons.get(gt.user, 0.0):.1%} ≥ its share {self._shares.get(gt.user, 0.0):.1%}: no preemption")
            return False
        pu = self._per_user.setdefault(gt.user, Counter())
        asked = 0
        for victim in victims:
            lms = [lm for lm in self._view.order if self._view[lm].usage.get(victim)]
            for lm in lms:
                if asked >= self._params.max_preempt_lms:
                    return False
                asked += 1
                pu["preemption_attempts"] += 1
                self._counters["preemption_attempts"] += 1
                await self._clock.charge("gm_preempt")
                res = await self._place(gt, "preempt", lm, victim=victim)
                if res == "ok":
                    return True
                self._counters["preemption_failures"] += 1
        return False
