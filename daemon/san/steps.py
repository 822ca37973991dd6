"""SAN steps 2–5 for one task (seed 000 Fig. 2), decide → plan → apply:

* step 2 — :meth:`NegotiationSteps.step2_get_candidates`: GetCandidateNodes from a broker (another if
  one is unreachable);
* step 3 — :meth:`NegotiationSteps.step3_request_migration`: TaskMigrationRequest to every candidate
  at once; the window ends early once all have answered; → the acceptors (data);
* step 4 — :meth:`NegotiationSteps.step4_order_targets`: re-score the acceptors, score-weighted random
  order, forced ones last; → the plan (data);
* step 5 — :meth:`NegotiationSteps.step5_process_and_migrate`: applies the plan, target by target:
  TaskMigrationProcessRequest (the target's final check and reservation), then the live
  migration with verification; the next target on refusal or failure.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import random
from typing import Awaitable, Callable

from cellbed.daemon.san.explain import RoundExplanation
from cellbed.runtime.explain import OFF, ExplainLog
from cellbed.daemon.host_view import HostView
from cellbed.daemon.san.config import REASON_NAME, SanConfig
from cellbed.daemon.san.ledger import NegotiationLedger
from cellbed.daemon.san.policies import SanPolicies
from cellbed.daemon.san.reader import HostReader
from cellbed.domain import errors
from cellbed.domain.vm import MigrationOptions, TimeoutPolicy
from cellbed.domain.wire import spec_pb
from cellbed.policy.masb.choose import Acceptor
from cellbed.runtime.clock import Clock
from cellbed.runtime.decisions import DecisionLog
from cellbed.runtime.transport import Transport
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb

log = logging.getLogger(__name__)

NEXT, DONE_MIGRATED, DONE_FAILED = "next", "migrated", "failed"


MigrateFn = Callable[..., Awaitable[npb.MigrationRecord]]
"""The NodeAgent's live migration: ``migrate(name, dest, opts, prepared_mid=, forced=)``."""


class NegotiationSteps:
    """Steps 2–5 of one negotiation on the initiator's side. It asks the *brokers* and the
    candidates over *transport*, moves the task with the NodeAgent's *migrate*, and writes every
    step in the *ledger*. *on_migration(record, negotiation, forced)* and *on_refused(negotiation,
    host, forced, detail)* are the hooks a model cell records with."""

    def __init__(self, view: HostView, reader: HostReader, ledger: NegotiationLedger, policies: SanPolicies,
                 transport: Transport, migrate: MigrateFn, rng: random.Random, clock: Clock,
                 decisions: DecisionLog, cfg: SanConfig, brokers: list[str], *,
                 on_migration: Callable | None = None, on_refused: Callable | None = None,
                 explain: ExplainLog = OFF) -> None:
        self.view = view
        self.reader = reader
        self.host = reader.host
        self.ledger = ledger
        self.counters: collections.Counter = ledger.counters
        self.policies = policies
        self.transport = transport
        self.node_migrate = migrate
        self.rng = rng
        self.clock = clock
        self.decisions = decisions
        self.brokers = list(brokers)
        self.window_s = cfg.window_s
        self.request_timeout_s = cfg.request_timeout_s
        self.expiry_s = cfg.recommendation_expiry_s
        self.migration_opts = MigrationOptions(bandwidth_mib_s=cfg.migration_bandwidth_mib_s,
                                               max_downtime_ms=cfg.max_downtime_ms,
                                               completion_timeout_s=cfg.migration_timeout_s,
                                               timeout_policy=TimeoutPolicy.ABORT)
        self.on_migration = on_migration
        self.on_refused = on_refused
        self.explain = explain
        self._ex: dict[str, RoundExplanation] = {}      # san_id -> the explanation being built (sampled rounds)

    def set_brokers(self, brokers: list[str]) -> None:
        self.brokers = list(brokers)

    async def run(self, neg: masbpb.Negotiation, name: str) -> bool:
        """Steps 2–5 for task *name* under *neg* (opened by the initiator): True if it migrated."""
        task = self.reader.task_info(name)
        ex = self._ex[neg.san_id] = RoundExplanation(neg, self.clock.now(), task) \
            if self.explain.wants(neg.san_id) else None
        try:
            recs = await self.step2_get_candidates(neg, task)
            if not recs:
                return False
            acceptors = await self.step3_request_migration(neg, task, recs)
            if not acceptors:
                return False
            order = self.step4_order_targets(neg, name, task, acceptors)
            return await self.step5_process_and_migrate(neg, name, order)
        finally:
            self._ex.pop(neg.san_id, None)
            if ex is not None:
                ex.done(self.explain, neg.state, neg.target)

    # --- step 2 --------------------------------------------------------------------------------------
    async def _ask_broker(self, req: masbpb.GetCandidateNodesRequest) -> masbpb.GetCandidateNodesResponse | None:
        order = list(self.brokers)
        self.rng.shuffle(order)
        ex = self._ex.get(req.san_id)
        for b in order:
            if ex is not None:
                ex.rpc()
            try:
                return await self.transport.request(b, "BrokerAgent/GetCandidateNodes", req,
                                                    timeout=self.request_timeout_s)
            except (errors.Unavailable, errors.DeadlineExceeded) as exc:
                self.counters["broker_unreachable"] += 1
                log.info("%s: broker %s unreachable (%s); trying another", self.host, b, exc)
        return None

    async def step2_get_candidates(self, neg: masbpb.Negotiation, task: masbpb.TaskInfo) -> list | None:
        """The broker's recommendations (other hosts only), or None/[] when the SAN gave up."""
        resp = await self._ask_broker(masbpb.GetCandidateNodesRequest(task=task, src_host=self.host, san_id=neg.san_id))
        if resp is None:
            self.ledger.finish(neg, "gave-up", f"no broker reachable of {len(self.brokers)}")
            return None
        recs = [r for r in resp.recommendations if r.host != self.host]
        if (ex := self._ex.get(neg.san_id)) is not None:
            ex.candidates(resp, recs, self.clock.now())
        self.counters["candidates"] += len(recs)
        self.ledger.step(neg, "candidates", resp.broker,
                         f"{len(recs)} of {resp.matched} matching ({resp.scanned} scanned): "
                         + ", ".join(f"{r.host}{'*' if r.force_migration else ''}:{r.fitness:.3f}" for r in recs))
        if not recs:
            self.ledger.finish(neg, "gave-up", "no candidates")
        return recs

    # --- step 3 --------------------------------------------------------------------------------------
    async def step3_request_migration(self, neg: masbpb.Negotiation, task: masbpb.TaskInfo, recs: list) -> list[Acceptor]:
        """Ask every candidate at once; the window ends early when all have answered."""
        self.ledger.step(neg, "request", "", f"TaskMigrationRequest to {len(recs)}")
        if (ex := self._ex.get(neg.san_id)) is not None:
            ex.rpc(len(recs))
        forced = {r.host: r.force_migration for r in recs}
        jobs = {asyncio.ensure_future(self.transport.request(
            r.host, "San/RequestTaskMigration",
            masbpb.TaskMigrationRequest(san_id=neg.san_id, src_host=self.host, task=task,
                                     force_migration=r.force_migration),
            timeout=self.window_s)): r.host for r in recs}
        done, pending = await asyncio.wait(jobs, timeout=self.window_s)
        for j in pending:
            j.cancel()
        acceptors = [a for a in (self._answer_of(neg, j, host, j in pending, forced[host])
                                 for j, host in jobs.items()) if a is not None]
        for j in pending:
            await asyncio.gather(j, return_exceptions=True)
        if not acceptors:
            self.ledger.finish(neg, "gave-up", "every candidate rejected")
        return acceptors

    def _answer_of(self, neg: masbpb.Negotiation, j: asyncio.Future, host: str, late: bool,
                   forced: bool) -> Acceptor | None:
        if late or j.cancelled() or j.exception() is not None:
            why = "no answer within the window" if (late or j.cancelled()) else str(j.exception())
            self.counters["rejections_no_answer"] += 1
            self.ledger.step(neg, "rejection", host, f"no_answer: {why}", forced=forced)
            if (ex := self._ex.get(neg.san_id)) is not None:
                ex.refused(host, "no_answer", why, forced)
            return None
        ans: masbpb.TaskMigrationResponse = j.result()
        if ans.HasField("acceptance"):
            a = ans.acceptance
            self.counters["acceptances"] += 1
            self.ledger.step(neg, "acceptance", host, f"used {a.used.cpu_cores:.3f} cores / {a.used.mem_mib:.0f} MiB "
                                                      f"of {a.capacity.cpu_cores:.3f} / {a.capacity.mem_mib:.0f}",
                             forced=forced)
            if (ex := self._ex.get(neg.san_id)) is not None:
                ex.accepted(host, a, forced)
            return Acceptor(host, (a.capacity.cpu_cores, a.capacity.mem_mib), (a.used.cpu_cores, a.used.mem_mib),
                            forced)
        rj = ans.rejection
        reason = REASON_NAME.get(rj.reason, "unspecified")
        self.counters[f"rejections_{reason}"] += 1
        self.ledger.step(neg, "rejection", host, f"{reason}: {rj.detail}", forced=forced)
        if (ex := self._ex.get(neg.san_id)) is not None:
            ex.refused(host, reason, rj.detail, forced)
        return None

    # --- step 4 --------------------------------------------------------------------------------------
    def step4_order_targets(self, neg: masbpb.Negotiation, name: str, task: masbpb.TaskInfo,
                            acceptors: list[Acceptor]) -> list[tuple[Acceptor, float]]:
        """Re-score and order (forced last): the order is the retry list of step 5."""
        tu = (task.used.cpu_cores, task.used.mem_mib)
        order = self.policies.order_targets(acceptors, tu, self.rng)
        if (ex := self._ex.get(neg.san_id)) is not None:
            ex.order(order)
        self.decisions.maybe("target", lambda: {"san_id": neg.san_id, "task": name, "task_used": tu,
                                                 "order": [(a.host, s, a.forced, a.used, a.capacity)
                                                           for a, s in order]})
        return order

    # --- step 5 --------------------------------------------------------------------------------------
    async def step5_process_and_migrate(self, neg: masbpb.Negotiation, name: str,
                                        order: list[tuple[Acceptor, float]]) -> bool:
        """Apply the plan: process, then migrate; the next target on refusal or failure."""
        expires = self.clock.monotonic() + self.expiry_s
        for a, score in order:
            if self.clock.monotonic() > expires:
                self.counters["recommendations_expired"] += 1
                self.ledger.finish(neg, "gave-up", f"recommendations expired after {self.expiry_s:g} s")
                return False
            e = self.view.vms.get(name)
            if e is None:
                self.ledger.finish(neg, "cancelled", "the task ended")
                return False
            mid = f"{neg.san_id}-{self.rng.getrandbits(32):08x}"
            if not await self._process(neg, name, e, a, mid):
                continue
            self.ledger.step(neg, "process", a.host, f"{'forced ' if a.forced else ''}score {score:.3f}, reservation {mid}",
                             forced=a.forced)
            outcome = await self._migrate(neg, name, a, mid)
            if outcome != NEXT:
                return outcome == DONE_MIGRATED
        self.ledger.finish(neg, "gave-up", f"all {len(order)} acceptor(s) refused or failed")
        return False

    async def _process(self, neg: masbpb.Negotiation, name: str, e, a: Acceptor, mid: str) -> bool:
        """TaskMigrationProcessRequest: True if the target reserved the task's resources."""
        task = self.reader.task_info(name)
        ex = self._ex.get(neg.san_id)
        if ex is not None:
            ex.rpc()
        try:
            pr = await self.transport.request(a.host, "San/ProcessTaskMigration", masbpb.TaskMigrationProcessRequest(
                san_id=neg.san_id, src_host=self.host, task=task, spec=spec_pb(e.spec),
                force_migration=a.forced, migration_id=mid), timeout=self.request_timeout_s)
        except errors.CellbedError as exc:
            self.counters["process_errors"] += 1
            self._refused(neg, a, str(exc))
            return False
        if not pr.accepted:
            self.counters["collisions"] += 1
            self._refused(neg, a, f"{REASON_NAME.get(pr.rejection.reason, '?')}: {pr.rejection.detail}")
            return False
        if ex is not None:
            ex.tried(a.host, "reserved")
        return True

    def _refused(self, neg: masbpb.Negotiation, a: Acceptor, detail: str) -> None:
        self.ledger.step(neg, "refused", a.host, detail, forced=a.forced)
        if (ex := self._ex.get(neg.san_id)) is not None:
            ex.tried(a.host, "refused", detail)
        if self.on_refused is not None:
            self.on_refused(neg, a.host, a.forced, detail)

    async def _migrate(self, neg: masbpb.Negotiation, name: str, a: Acceptor, mid: str) -> str:
        """The live migration to a target that holds the reservation: DONE_MIGRATED, DONE_FAILED
        (the task left this host) or NEXT (try the next target)."""
        ex = self._ex.get(neg.san_id)
        if ex is not None:
            ex.rpc()              # the migration's own control messages: FinishIncoming at the target
        try:
            rec = await self.node_migrate(name, a.host, self.migration_opts, prepared_mid=mid, forced=a.forced)
        except errors.CellbedError as exc:
            if ex is not None:
                ex.tried(a.host, "migration failed", str(exc))
            self.counters["migrations_failed"] += 1
            self.ledger.step(neg, "failed", a.host, str(exc), forced=a.forced)
            if not isinstance(exc, errors.MigrationUnresolved):   # else the guest may be there: reconciliation ends it
                await self._release(a.host, mid, name)
            if name not in self.view.vms:
                self.ledger.finish(neg, "failed", "the task left this host")
                return DONE_FAILED
            return NEXT
        if self.on_migration is not None:
            self.on_migration(rec, neg, a.forced)
        if rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED:
            self.counters["migrations_succeeded"] += 1
            self.counters["bytes_moved"] += rec.data_total_bytes
            neg.target, neg.forced = a.host, a.forced
            if ex is not None:
                ex.tried(a.host, "migrated")
            self.ledger.step(neg, "migrated", a.host, f"{rec.data_total_bytes} B in {rec.time_elapsed_ms:.0f} ms, "
                                                      f"downtime {rec.downtime_ms:.0f} ms", forced=a.forced)
            self.ledger.finish(neg, "migrated")
            return DONE_MIGRATED
        self.counters["migrations_failed"] += 1
        self.ledger.step(neg, "failed", a.host, f"{npb.MigrationOutcome.Name(rec.outcome)}: {rec.detail}", forced=a.forced)
        if ex is not None:
            ex.tried(a.host, "migration failed", npb.MigrationOutcome.Name(rec.outcome))
        if name not in self.view.vms:
            self.ledger.finish(neg, "failed", "the task left this host unverified")
            return DONE_FAILED
        return NEXT

    async def _release(self, host: str, mid: str, name: str) -> None:
        try:
            await self.transport.request(host, "NodeAgent/FinishIncoming", npb.FinishIncomingRequest(
                migration_id=mid, name=name, migrated=False), timeout=self.request_timeout_s)
        except errors.NotFound:
            pass   # NodeAgent.migrate already released it
        except errors.CellbedError as exc:
            log.warning("%s: could not release reservation %s on %s: %s", self.host, mid, host, exc)
