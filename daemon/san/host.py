"""The SAN's step-1 trigger, run on every sample of the host: the GPA statistics, the node report,
the overload verdict and spikes; an overloaded host starts a round (rounds.py) unless one is
under way or the SAN is disabled. With event-driven sampling it also says whether a quiet period
may go without a sample."""
from __future__ import annotations

import asyncio
import collections
from typing import Awaitable, Callable

import numpy as np

from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.daemon.san.ledger import NegotiationLedger
from cellbed.daemon.san.policies import SanPolicies
from cellbed.daemon.san.reader import HostReader
from cellbed.daemon.san.report import Reporter
from cellbed.policy.masb import overload

RoundFn = Callable[[overload.Verdict], Awaitable[None]]
"""A SAN round for an overloaded host (:meth:`Initiator.run_round`)."""
AbsorbFn = Callable[[str, overload.Verdict], Awaitable[None]]
"""The spike policy's action (:meth:`SpikeAbsorber.absorb`)."""


class HostWatch:
    """The NodeAgent's sample listener. *enabled* is the one switch for new rounds: only this part
    reads it, and :meth:`disable` is the only way to turn it off (rounds under way finish)."""

    def __init__(self, reader: HostReader, reporter: Reporter, ledger: NegotiationLedger, policies: SanPolicies,
                 counters: collections.Counter, run_round: RoundFn, absorb_spike: AbsorbFn | None, *,
                 enabled: bool) -> None:
        self.reader = reader
        self.reporter = reporter
        self.ledger = ledger
        self.policies = policies
        self.counters = counters
        self.run_round = run_round
        self.absorb_spike = absorb_spike
        self.enabled = enabled
        self._round: asyncio.Task | None = None
        self._overloaded = False                        # at the last sample
        self._prev_pct: np.ndarray | None = None

    def disable(self) -> None:
        """No new rounds (negotiations in flight finish): a model cell settling before its checks."""
        self.enabled = False

    def round_under_way(self) -> bool:
        return self._round is not None and not self._round.done()

    def on_sample(self) -> None:
        if self.policies.cpu_stats:
            self.reader.update_cpu_stats()
        self.reporter.on_sample()
        load = self.reader.load()
        pct = load.used_pct()
        try:
            verdict = self.policies.overload(load)
        except PolicyFailed:         # counted by the policy's guard; no decision this sample
            self.counters["policy_refused"] += 1
            return
        self._overloaded = bool(verdict)
        spike = self.policies.spike(self._prev_pct, pct)
        self._prev_pct = pct
        if spike:
            self.counters["spikes"] += 1
            if verdict and self.absorb_spike is not None:
                asyncio.ensure_future(self.absorb_spike(spike, verdict))
        if verdict and self.enabled and not self.round_under_way():
            self.counters["overload_detected"] += 1
            self._round = asyncio.ensure_future(self.run_round(verdict))

    def may_skip_sample(self) -> bool:
        """Event-driven sampling: a period with nothing changed on the host may go without a
        sample unless the host was overloaded at the last one (step 1 runs again at every sample
        then), a round or a negotiation is under way, or the fit test keeps per-sample statistics."""
        return (not self.policies.cpu_stats and not self._overloaded and not self.ledger.any_active()
                and not self.round_under_way())

    def on_skipped_sample(self) -> None:
        """Instead of on_sample in a skipped period: the same step-1 verdict (nothing changed),
        so only the report: again if what it says changed, or before the brokers' entry expires."""
        self.reporter.on_quiet()

    async def stop(self) -> None:
        """Cancel the round under way, if any, and wait for it to end."""
        if self._round is not None:
            self._round.cancel()
            await asyncio.gather(self._round, return_exceptions=True)
