"""The node agent's measurement: every monitor period it rebuilds the inventory from the backend (adopting what runs, dropping what vanished), measures each VM and the host, polls the guests, and tells its listeners (the SAN's step-1 trigger)."""
from __future__ import annotations

import asyncio
import logging
from cellbed.domain import errors
from cellbed.domain import wire
from cellbed.daemon.guest_channel import GuestStatus
from cellbed.domain.vm import DomState
from cellbed.policy.scores.asr import node_class
from cellbed.v1 import common_pb2 as cpb, node_pb2 as npb
from cellbed.daemon.inventory import VmEntry

log = logging.getLogger(__name__)


class MonitorMixin:
    """Part of NodeAgent (which owns the state these methods use)."""

    # --- measurement ---------------------------------------------------------------------
    async def sample(self) -> None:
        ensure = getattr(self.hv, "ensure_open", None)    # reconnect after a libvirtd restart
        if ensure is not None and self.journal.enabled:
            await ensure()
        now = self.clock.monotonic()
        if self.cfg.skip_quiet_samples:
            changes = getattr(self.hv, "changes", None)
            self._changes_seen = (self._changes_seen[1], changes(now) if changes is not None else None)
        skipped, self._skipped = self._skipped, False
        self.samples_taken += 1
        period = self.cfg.monitor_period_s
        doms = await self.hv.list()
        departed = {n for n, t in self.departed.items() if t >= now}   # left while we were listing: stale
        seen = set()
        for d in doms:
            if d.spec is None:
                continue  # not a Cellbed domain
            seen.add(d.name)
            e = self.vms.get(d.name)
            if e is None:
                if d.name in self.discarding or d.name in departed:
                    continue          # a failed start being undone, or a VM that just migrated away
                if d.incoming or d.state is DomState.SHUTOFF:
                    continue
                if any(r.spec.name == d.name for r in self.incoming.values()):
                    continue  # arriving; adopted by FinishIncoming
                e = self.vms[d.name] = VmEntry(spec=d.spec)   # found in libvirt: adopt
                log.info("adopted VM %s from libvirt (%s, %s)", d.name, d.state.value, d.reason)
            if e.last_t and d.cpu_time_ns >= e.last_cpu_ns:
                t0, c0 = e.last_t, e.last_cpu_ns
                if skipped and now - t0 > period:
                    # periods skipped while quiet: measure the last one, as a periodic sample
                    # would; the use before it was constant, the one measured at t0
                    c0 += e.cpu_used_cores * (now - period - t0) * 1e9
                    t0 = now - period
                e.cpu_used_cores = (d.cpu_time_ns - c0) / 1e9 / max(1e-3, now - t0)
            e.last_cpu_ns, e.last_t = d.cpu_time_ns, now
            e.rss_mib = d.rss_bytes / 2**20
            if d.dirty_rate_mib_s >= 0:
                e.dirty_rate_mib_s = d.dirty_rate_mib_s
            if e.state is not DomState.CRASHED and d.state is DomState.CRASHED:
                self.emit(npb.EVENT_KIND_VM_CRASHED, d.name, d.reason)
            if e.reason != "starting":
                e.state, e.reason = d.state, d.reason
        self.departed = {n: t for n, t in self.departed.items() if t >= now}
        for name in [n for n in self.discarding if n not in self._undoing]:
            if name not in seen:
                self.discarding.discard(name)                 # its domain is gone
            else:
                await self._discard(name)
        # a VM whose domain appeared after this listing began (a start or an arrival that ended
        # meanwhile) is not in it, and has not vanished
        for name in [n for n, e in self.vms.items() if n not in seen and not e.migrating_out
                     and e.reason != "starting" and e.known_since < now]:
            log.warning("VM %s vanished from libvirt", name)
            self.vms.pop(name)
            await self._drop_channel(name)
        running = [n for n, e in self.vms.items() if e.state is DomState.RUNNING and not e.migrating_out
                   and self.cfg.poll_guests]
        results = await asyncio.gather(*(self.channel(n).status(timeout_s=2.0) for n in running),
                                       return_exceptions=True)
        for n, r in zip(running, results):
            if isinstance(r, GuestStatus) and n in self.vms:
                self.vms[n].guest = r
        self.sample_host(now)

    def sample_host(self, now: float) -> None:
        vm_cpu, vm_mem, cpu_u, mem_u, cpu, mem = self.view().totals()     # one pass over the VMs
        s = self.host_sample
        s.host, s.address = self.cfg.host, self.cfg.address
        c = s.capacity                       # every field of HostCapacity, set in place
        c.cpu_cores, c.mem_mib, c.cpu_norm, c.mem_norm = (self.cfg.cpu_cores, self.cfg.mem_mib,
                                                          self.cfg.cpu_norm, self.cfg.mem_norm)
        s.cpu_used_cores = vm_cpu
        s.mem_alloc_mib, s.cpu_req_cores = mem, cpu
        s.vm_count = len(self.vms)
        s.migrations_out, s.migrations_in = len(self.migrating), len(self.incoming)
        if self.cgroup is not None:
            ns = self.cgroup.cpu_usage_ns()
            if ns is not None:
                if self._cg_last is not None and now > self._cg_last[0]:
                    s.cgroup_cpu_cores = (ns - self._cg_last[1]) / 1e9 / (now - self._cg_last[0])
                self._cg_last = (now, ns)
            mb = self.cgroup.mem_usage_bytes()
            s.cgroup_mem_mib = (mb or 0) / 2**20
        s.mem_used_mib = vm_mem
        if not s.attributes and self.cfg.attributes:
            s.attributes.extend(wire.attributes_pb(self.cfg.attributes))
        if self.vms or self.incoming:
            s.asr_class = int(node_class((cpu_u, mem_u), (self.cfg.cpu_cores, self.cfg.mem_mib))) + 1  # wire codes start at 1
        else:
            s.asr_class = cpb.ASR_CLASS_IDLE
        if self._proc is not None:
            s.daemon_rss_mib = self._proc.memory_info().rss / 2**20
            s.daemon_cpu = self._proc.cpu_percent(None) / 100.0
        s.accel = self.hv.accel
        if self.journal.enabled:
            del s.leases[:]
            s.leases.extend(self.leases())
            del s.unresolved[:]
            s.unresolved.extend(f"{mid}: {why}" for mid, why in self.unresolved.items())
        s.sampled_unix_s = self.clock.now()
        s.qemu_version, s.libvirt_version = self.hv.versions()
        if self.telemetry is not None:
            self.telemetry.publish_state(s)

    async def _monitor(self, first_delay_s: float | None = None) -> None:
        delay = self.cfg.monitor_period_s if first_delay_s is None else first_delay_s
        while True:
            await self.clock.sleep(delay)
            delay = self.cfg.monitor_period_s
            try:
                if self._quiet():
                    self._skipped = True
                    self.samples_skipped += 1
                    for _, _, skipped in self._sample_listeners:
                        skipped()
                    continue
                await self.sample()
                if not self.journal.enabled:   # otherwise leases end by reconciliation
                    self._expire_reservations()
                for fn, _, _ in self._sample_listeners:
                    fn()
            except errors.CellbedError as e:
                log.warning("sampling failed: %s", e)
            except Exception:
                log.exception("sampling failed")

    def _quiet(self) -> bool:
        """Event-driven sampling: this period may go without a sample, because the backend's tasks
        kept their use since the sample before last (so the last one measured it, and this one
        would measure it again), nothing is arriving, leaving, starting or being undone, and
        every sample listener agrees."""
        if not self.cfg.skip_quiet_samples:
            return False
        changes = getattr(self.hv, "changes", None)
        if changes is None:
            return False
        v = changes(self.clock.monotonic())
        if v is None or not self._changes_seen[0] == self._changes_seen[1] == v:
            return False
        if self.incoming or self.migrating or self.discarding or self.departed:
            return False
        for e in self.vms.values():          # a plain loop: this runs for every host every period
            if e.reason == "starting":
                return False
        return all(may_skip is not None and may_skip() for _, may_skip, _ in self._sample_listeners)

    def _expire_reservations(self) -> None:
        now = self.clock.monotonic()
        for mid, r in list(self.incoming.items()):
            if r.expires < now:
                log.warning("reservation %s for %s from %s expired", mid, r.spec.name, r.src)
                del self.incoming[mid]
