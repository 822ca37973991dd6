"""The SanAgent: the node agent's half of MASB (DESIGN §7, seed 000 Fig. 2): overload detection,
SCS, and the Service Allocation Negotiation with brokers and other node agents, ending in a live
migration through NodeAgent.migrate; it also answers other agents' SAN requests.

Transport, clock and RNG are injected (cellbed.assembly). Policy is pure (cellbed.policy.masb);
the SAN is the mechanism, one module per part: host.py (the host as the policy sees it, the
step-1 trigger), rounds.py (step 1), steps.py (steps 2–5), target.py (the target's answers).
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import random
from typing import Callable

import numpy as np

from cellbed.daemon.agent import NodeAgent
from cellbed.daemon.san.config import Negotiation, SanConfig
from cellbed.daemon.san.host import HostMixin
from cellbed.daemon.san.rounds import RoundMixin
from cellbed.daemon.san.steps import StepsMixin
from cellbed.daemon.san.target import TargetMixin
from cellbed.domain.vm import MigrationOptions, TimeoutPolicy
from cellbed.policy.masb.scs import TabuParams
from cellbed.policy.migration.cost import PrecopyParams
from cellbed.policy.scores.gpa import GpaParams
from cellbed.runtime.clock import Clock
from cellbed.runtime.decisions import DecisionLog
from cellbed.runtime.transport import Transport


class SanAgent(HostMixin, RoundMixin, StepsMixin, TargetMixin):
    """The node agent's half of MASB, built by :func:`cellbed.assembly.build_san`. It reads the
    host through ``node.view()`` and changes it only through the NodeAgent's API (migrate,
    reserve, pause/stop on a spike). *on_migration(record, negotiation, forced)* and
    *on_refused(negotiation, host, forced, detail)* are the hooks a model cell records with."""

    def __init__(self, node: NodeAgent, transport: Transport, clock: Clock, rng: random.Random, cfg: SanConfig,
                 brokers: list[str], cell: str = "cell", decisions: DecisionLog | None = None, *,
                 on_migration: Callable | None = None, on_refused: Callable | None = None) -> None:
        self.node = node
        self.view = node.view()
        self.host = self.view.host
        self.transport = transport
        self.clock = clock
        self.rng = rng
        self.cfg = cfg.validate()
        self.brokers = list(brokers)
        self.cell = cell
        self.decisions = decisions or DecisionLog(
            cfg.decision_log, {"scs": cfg.log_scs_rate, "scoring": cfg.log_scoring_rate,
                               "target": cfg.log_target_rate}, random.Random(rng.random()), clock, self.host)
        self.counters: collections.Counter = collections.Counter()
        self.active: dict[str, Negotiation] = {}        # vm -> negotiation
        self.recent: collections.deque = collections.deque(maxlen=cfg.keep_recent)
        self._round: asyncio.Task | None = None
        self.unmovable: dict[str, float] = {}           # task -> monotonic time until which SCS skips it
        self._last_report = -math.inf
        self._reported: tuple | None = None             # what the last report said (event-driven sampling)
        self._overloaded = False                        # at the last sample
        self._attrs_pb: tuple[tuple, list] = ((), [])   # (attributes as items, their wire form)
        self._prev_pct: np.ndarray | None = None
        self._seq = 0
        self._sem = asyncio.Semaphore(cfg.max_parallel)
        self.cost = PrecopyParams(bandwidth_mib_s=cfg.cost_bandwidth_mib_s)
        self.tabu = TabuParams(restarts=cfg.tabu_restarts, steps=cfg.tabu_steps, patience=cfg.tabu_patience,
                               max_util=cfg.max_util, score=cfg.scs_score)
        self.migration_opts = MigrationOptions(bandwidth_mib_s=cfg.migration_bandwidth_mib_s,
                                               max_downtime_ms=cfg.max_downtime_ms,
                                               completion_timeout_s=cfg.migration_timeout_s,
                                               timeout_policy=TimeoutPolicy.ABORT)
        self.on_migration = on_migration                # hook: fn(record, negotiation, forced)
        self.cpu_stats: dict[str, list[float]] = {}     # vm -> [n, mean, M2] of sampled CPU (GPA)
        self.gpa_params = GpaParams(rho=cfg.gpa_rho, min_samples=cfg.gpa_min_samples, max_util=cfg.max_util)
        self.on_refused = on_refused                    # hook: fn(neg, host, forced, detail): step 5 refused

    # --- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        self.node.add_sample_listener(self.on_sample, self.may_skip_sample, self.on_skipped_sample)

    def set_brokers(self, brokers: list[str]) -> None:
        self.brokers = list(brokers)

    def disable(self) -> None:
        """No new rounds (negotiations in flight finish): a model cell settling before its checks."""
        self.cfg = dataclasses.replace(self.cfg, enabled=False)

    async def stop(self) -> None:
        self.node.remove_sample_listener(self.on_sample)
        if self._round is not None:
            self._round.cancel()
            await asyncio.gather(self._round, return_exceptions=True)
        self.decisions.close()

