"""The SanAgent: the node agent's half of MASB (DESIGN §7, seed 000 Fig. 2): overload detection,
SCS, and the Service Allocation Negotiation with brokers and other node agents, ending in a live
migration through NodeAgent.migrate; it also answers other agents' SAN requests.

Transport, clock, RNG and the policies are injected (cellbed.assembly). The SanAgent itself is a
facade over its parts, each built here with only what it needs:

* :class:`~cellbed.daemon.san.reader.HostReader` (reader.py) — the host as the policies see it;
* :class:`~cellbed.daemon.san.report.Reporter` (report.py) — the NodeReport to the brokers;
* :class:`~cellbed.daemon.san.ledger.NegotiationLedger` (ledger.py) — negotiations and counters;
* :class:`~cellbed.daemon.san.steps.NegotiationSteps` (steps.py) — steps 2–5 of one negotiation;
* :class:`~cellbed.daemon.san.rounds.Initiator` (rounds.py) — step 1: rounds, one SAN per task;
* :class:`~cellbed.daemon.san.host.HostWatch` (host.py) — the step-1 trigger on every sample;
* :class:`~cellbed.daemon.san.spike.SpikeAbsorber` (spike.py) — the spike policy's action;
* :class:`~cellbed.daemon.san.target.Responder` (target.py) — the target's answers (steps 3, 5).

The policies (:class:`~cellbed.daemon.san.policies.SanPolicies`) reach the parts that call them;
the one RNG is shared by the parts that draw from it, in the order the protocol draws.
"""
from __future__ import annotations

import json

import random
from typing import Callable

from cellbed.domain import errors
from cellbed.runtime.explain import KEPT, OFF, ExplainLog
from cellbed.daemon.agent import NodeAgent
from cellbed.daemon.san.config import Negotiation, SanConfig
from cellbed.daemon.san.host import HostWatch
from cellbed.daemon.san.ledger import NegotiationLedger
from cellbed.daemon.san.policies import SanPolicies
from cellbed.daemon.san.reader import HostReader
from cellbed.daemon.san.report import Reporter
from cellbed.daemon.san.rounds import Initiator
from cellbed.daemon.san.spike import SpikeAbsorber
from cellbed.daemon.san.steps import NegotiationSteps
from cellbed.daemon.san.target import Responder
from cellbed.runtime.clock import Clock
from cellbed.runtime.decisions import DecisionLog
from cellbed.runtime.transport import Transport
from cellbed.v1 import masb_pb2 as masbpb


class SanAgent:
    """The node agent's half of MASB, built by :func:`cellbed.assembly.build_san`. It reads the
    host through ``node.view()`` and changes it only through the NodeAgent's API (migrate,
    reserve, pause/stop on a spike). *on_migration(record, negotiation, forced)* and
    *on_refused(negotiation, host, forced, detail)* are the hooks a model cell records with."""

    def __init__(self, node: NodeAgent, transport: Transport, clock: Clock, rng: random.Random, cfg: SanConfig,
                 policies: SanPolicies, brokers: list[str], cell: str = "cell", decisions: DecisionLog | None = None,
                 *, on_migration: Callable | None = None, on_refused: Callable | None = None,
                 explain: ExplainLog = OFF) -> None:
        cfg = cfg.validate()
        self.node = node
        self.policies = policies
        view = node.view()
        self.host = view.host
        self.decisions = decisions or DecisionLog(
            cfg.decision_log, {"scs": cfg.log_scs_rate, "scoring": cfg.log_scoring_rate,
                               "target": cfg.log_target_rate}, random.Random(rng.random()), clock, self.host)
        self.reader = HostReader(view, clock, boot_grace_s=cfg.boot_grace_s, cpu_stats=policies.cpu_stats)
        self.ledger = NegotiationLedger(self.host, clock, node.emit, keep_recent=cfg.keep_recent,
                                        unmovable_s=cfg.unmovable_s)
        counters = self.ledger.counters
        self.reporter = Reporter(view, self.reader, transport, clock, cell, counters, lambda: node.samples_taken,
                                 event_driven=node.cfg.skip_quiet_samples, period_s=cfg.report_period_s,
                                 quiet_period_s=cfg.quiet_report_s)
        self.steps = NegotiationSteps(view, self.reader, self.ledger, policies, transport, node.migrate, rng, clock,
                                      self.decisions, cfg, brokers, on_migration=on_migration, on_refused=on_refused,
                                      explain=explain)
        self.initiator = Initiator(view, self.reader, self.ledger, self.steps, policies, rng, clock, self.decisions,
                                   cfg)
        spike = None
        if cfg.spike_policy != "none":
            spike = SpikeAbsorber(view, self.reader, self.ledger, counters, node.pause_vm, node.stop_vm, node.emit,
                                  action=cfg.spike_policy, max_util=cfg.max_util).absorb
        self.watch = HostWatch(self.reader, self.reporter, self.ledger, policies, counters, self.initiator.run_round,
                               spike, enabled=cfg.enabled)
        self.responder = Responder(view, self.reader, policies, node.reserve, counters, clock)

    # --- what the model cell, the exporter and tests read -------------------------------------------
    @property
    def counters(self):
        return self.ledger.counters

    @property
    def active(self) -> dict[str, Negotiation]:
        return self.ledger.active

    @property
    def recent(self):
        return self.ledger.recent

    @property
    def enabled(self) -> bool:
        return self.watch.enabled

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        w = self.watch
        self.node.add_sample_listener(w.on_sample, w.may_skip_sample, w.on_skipped_sample)

    def set_brokers(self, brokers: list[str]) -> None:
        self.steps.set_brokers(brokers)

    def disable(self) -> None:
        """No new rounds (negotiations in flight finish): a model cell settling before its checks."""
        self.watch.disable()

    def explanation(self, decision_id: str) -> str:
        """The JSON of an explained round this host ran (NotFound if not explained or no longer kept)."""
        d = self.steps.explain.get(decision_id)
        if d is None:
            raise errors.NotFound(f"{self.host}: no explained SAN round {decision_id!r} (a share of rounds is "
                                  f"explained, the last {KEPT} kept)")
        return json.dumps(d)

    def publish_report(self) -> None:
        self.reporter.publish()

    async def stop(self) -> None:
        self.node.remove_sample_listener(self.watch.on_sample)
        await self.watch.stop()
        self.decisions.close()

    # --- the San service ----------------------------------------------------------------------------
    def answer(self, req: masbpb.TaskMigrationRequest) -> masbpb.TaskMigrationResponse:
        return self.responder.answer(req)

    async def process(self, req: masbpb.TaskMigrationProcessRequest) -> masbpb.TaskMigrationProcessResponse:
        return await self.responder.process(req)

    async def negotiate_now(self, name: str) -> masbpb.Negotiation:
        return await self.initiator.negotiate_now(name)

    def negotiations(self, limit: int = 0) -> masbpb.ListNegotiationsResponse:
        return self.ledger.listing(limit)
