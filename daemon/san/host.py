"""The host as the SAN's policies see it (capacity, load, the target state, the node report), the
step-1 trigger on every sample (overload, spikes) and the spike policy."""
from __future__ import annotations

import asyncio
import logging
import math

import numpy as np

from cellbed.domain import errors, wire
from cellbed.domain.topics import report_topic
from cellbed.domain.vm import DomState
from cellbed.policy.masb import accept, overload
from cellbed.policy.scores.asr import node_class
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb, node_pb2 as npb

log = logging.getLogger(__name__)


class HostMixin:
    """The host-reading half of SanAgent (which owns the state these methods use)."""

    def capacity(self) -> tuple[float, float]:
        cpu, mem = self.view.capacity
        return cpu, float(mem)

    def prod_requested(self) -> tuple[float, float]:
        return self.view.prod_requested()

    def _young(self) -> list:
        """VMs still booting or within boot_grace_s of their start: their CPU is boot noise."""
        now = self.clock.now()
        return [e for e in self.view.vms.values()
                if e.reason == "starting" or (self.cfg.boot_grace_s and now - e.spec.created_unix_s < self.cfg.boot_grace_s)]

    def load(self) -> overload.HostLoad:
        cpu, mem = self.view.used()
        for e in self._young() if self.cfg.boot_grace_s else ():
            cpu -= e.cpu_used_cores
        return overload.HostLoad(self.capacity(), (max(cpu, 0.0), mem), self.prod_requested())

    def target_state(self) -> accept.TargetState:
        cpu_u = mem_u = 0.0
        for e in self.view.vms.values():
            cpu_u += e.cpu_used_cores
            mem_u += e.rss_mib
        inc_c = sum(r.cpu_used for r in self.view.incoming.values())
        inc_m = sum(r.mem_used for r in self.view.incoming.values())
        mean = var = 0.0
        samples = math.inf
        if self.cfg.fit == "gpa":
            for name in self.view.vms:
                m, v, n = self._gpa(name)
                mean, var, samples = mean + m, var + v, min(samples, n)
        return accept.TargetState(self.host, self.capacity(), (cpu_u, mem_u), (inc_c, inc_m), self.prod_requested(),
                                  self.view.attributes, mean, var, samples)

    def report(self) -> masbpb.NodeReport:
        _, _, cpu_u, mem_u, cpu_req, mem_req = self.view.totals()     # one pass over the VMs
        cap, used = self.capacity(), (cpu_u, mem_u)
        pr = self.prod_requested()
        if self.view.vms or self.view.incoming:
            asr = int(node_class(used, cap)) + 1
        else:
            asr = cpb.ASR_CLASS_IDLE
        return masbpb.NodeReport(host=self.host, capacity=wire.resources(*cap), used=wire.resources(*used),
                              requested=wire.resources(cpu_req, mem_req), prod_requested=wire.resources(*pr),
                              task_count=len(self.view.vms), attributes=self._attributes_pb(),
                              asr_class=asr, sampled_unix_s=self.clock.now())

    def _attributes_pb(self) -> list:
        key = tuple(self.view.attributes.items())
        if key != self._attrs_pb[0]:
            self._attrs_pb = (key, wire.attributes_pb(self.view.attributes))
        return self._attrs_pb[1]

    def _report_key(self) -> tuple:
        """What a report says changes only with a sample (the VMs' measured use), a VM or a
        reservation coming or going, capacity or attributes (event-driven sampling: did it?)."""
        return (self.node.samples_taken, self.view.capacity, len(self.view.vms), len(self.view.incoming),
                tuple(self.view.attributes.items()))

    def publish_report(self) -> None:
        if self.node.cfg.skip_quiet_samples:
            self._reported = self._report_key()
        self._last_report = self.clock.monotonic()
        self.transport.publish(report_topic(self.cell, self.host), self.report())
        self.counters["reports"] += 1

    # --- step 1 trigger -------------------------------------------------------------------
    def _update_cpu_stats(self) -> None:
        """Welford running mean/variance of each VM's sampled CPU use, for the GPA fit test.
        (Seed 003 uses 1-s samples; here a sample is one monitor period's mean.)"""
        for name in [n for n in self.cpu_stats if n not in self.view.vms]:
            del self.cpu_stats[name]
        for name, e in self.view.vms.items():
            if e.reason == "starting":
                continue
            st = self.cpu_stats.setdefault(name, [0, 0.0, 0.0])
            st[0] += 1
            d = e.cpu_used_cores - st[1]
            st[1] += d / st[0]
            st[2] += d * (e.cpu_used_cores - st[1])

    def _gpa(self, name: str) -> tuple[float, float, int]:
        st = self.cpu_stats.get(name)
        if not st or st[0] < 2:
            return 0.0, 0.0, 0
        return st[1], st[2] / (st[0] - 1), int(st[0])

    def on_sample(self) -> None:
        if self.cfg.fit == "gpa":
            self._update_cpu_stats()
        if self.clock.monotonic() - self._last_report >= self.cfg.report_period_s - 1e-9:
            self.publish_report()
        load = self.load()
        pct = load.used_pct()
        verdict = overload.check(load, self.cfg.max_util)
        self._overloaded = bool(verdict)
        spike = overload.spike(self._prev_pct, pct, self.cfg.rus_threshold_pct)
        self._prev_pct = pct
        if spike:
            self.counters["spikes"] += 1
            if verdict and self.cfg.spike_policy != "none":
                asyncio.ensure_future(self._absorb_spike(spike, verdict))
        if verdict and self.cfg.enabled and (self._round is None or self._round.done()):
            self.counters["overload_detected"] += 1
            self._round = asyncio.ensure_future(self.run_round(verdict))

    def may_skip_sample(self) -> bool:
        """Event-driven sampling: a period with nothing changed on the host may go without a
        sample unless the host was overloaded at the last one (step 1 runs again at every sample
        then), a round or a negotiation is under way, or the fit test keeps per-sample statistics."""
        return (self.cfg.fit != "gpa" and not self._overloaded and not self.active
                and (self._round is None or self._round.done()))

    def on_skipped_sample(self) -> None:
        """Instead of on_sample in a skipped period: the same step-1 verdict (nothing changed),
        so only the report: again if what it says changed, or before the brokers' entry expires."""
        if (self.clock.monotonic() - self._last_report >= self.cfg.quiet_report_s - 1e-9
                or self._report_key() != self._reported):
            self.publish_report()

    async def _absorb_spike(self, spike: str, verdict: overload.Verdict) -> None:
        """Pause or kill non-production VMs (lowest priority, largest CPU first) until use is
        back within max_util, so that production can grow at once."""
        cap = np.asarray(self.capacity())
        limit = self.cfg.max_util * cap
        used = np.asarray(self.view.used())
        victims = sorted((e for n, e in self.view.vms.items() if not e.spec.production and not e.migrating_out
                          and e.state is DomState.RUNNING and n not in self.active),
                         key=lambda e: (e.spec.priority, -e.cpu_used_cores))
        for e in victims:
            if np.all(used <= limit):
                break
            name = e.spec.name
            try:
                if self.cfg.spike_policy == "pause":
                    await self.node.pause_vm(name)
                    used = used - np.array([e.cpu_used_cores or 0.0, 0.0])
                else:
                    freed = np.array([e.cpu_used_cores, e.rss_mib])
                    await self.node.stop_vm(name)
                    used = used - freed
            except errors.CellbedError as exc:
                log.warning("%s: spike policy could not %s %s: %s", self.host, self.cfg.spike_policy, name, exc)
                continue
            self.counters[f"spike_{self.cfg.spike_policy}"] += 1
            self.node.emit(npb.EVENT_KIND_SPIKE_ACTION, name, f"{self.cfg.spike_policy} on spike ({spike}); "
                                                              + "; ".join(verdict.reasons))

