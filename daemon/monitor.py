"""The node agent's measurement: every monitor period it rebuilds the inventory from the backend
(adopting what runs, dropping what vanished), measures each VM and the host, polls the guests,
and tells its listeners (the SAN's step-1 trigger). It keeps the host state report
(``host_sample``) that GetHostState, PrepareIncoming and the telemetry send."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import psutil

from cellbed.daemon.events import EventHub
from cellbed.daemon.guest_channel import GuestStatus
from cellbed.daemon.guests import Guests
from cellbed.daemon.inventory import VmEntry
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors
from cellbed.domain import wire
from cellbed.domain.vm import DomState, Hypervisor
from cellbed.policy.scores.asr import node_class
from cellbed.runtime.cgroups import HostCgroup
from cellbed.runtime.clock import Clock
from cellbed.v1 import common_pb2 as cpb, node_pb2 as npb

log = logging.getLogger(__name__)


class Monitor:
    """*settle_discards(seen)* (daemon/vm_ops.py) finishes undoing failed starts, given the
    domains a sample listed."""

    def __init__(self, state: NodeState, hv: Hypervisor, clock: Clock, guests: Guests, events: EventHub,
                 settle_discards: Callable[[set[str]], Awaitable[None]]) -> None:
        self._state = state
        self._hv = hv
        self._clock = clock
        self._guests = guests
        self._events = events
        self._settle_discards = settle_discards
        self._sample_listeners: list = []                  # (fn, may_skip, skipped): after every periodic sample
        self._changes_seen: tuple = (None, None)           # the backend's change count at the last two samples
        self._skipped = False                              # samples were skipped since the last one taken
        self.samples_skipped = 0
        self.samples_taken = 0
        cfg = state.cfg
        self.cgroup = HostCgroup(cfg.cgroup) if cfg.cgroup else None
        self._cg_last: tuple[float, int] | None = None
        self._proc = psutil.Process() if cfg.measure_daemon else None
        if self._proc is not None:
            self._proc.cpu_percent(None)
        self.host_sample = npb.HostState()

    # --- listeners ---------------------------------------------------------------------------
    def add_sample_listener(self, fn, may_skip=None, skipped=None) -> None:
        """See NodeAgent.add_sample_listener."""
        self._sample_listeners.append((fn, may_skip, skipped))

    def remove_sample_listener(self, fn) -> None:
        self._sample_listeners = [x for x in self._sample_listeners if x[0] != fn]

    # --- the host's configuration changed ----------------------------------------------------------
    def attributes_changed(self) -> None:
        self.host_sample.ClearField("attributes")          # the next report lists them again

    def capacity_changed(self) -> None:
        cfg = self._state.cfg
        self.host_sample.capacity.cpu_cores, self.host_sample.capacity.mem_mib = cfg.cpu_cores, cfg.mem_mib

    # --- measurement ---------------------------------------------------------------------
    async def sample(self) -> None:
        st = self._state
        ensure = getattr(self._hv, "ensure_open", None)    # reconnect after a libvirtd restart
        if ensure is not None and st.journal.enabled:
            await ensure()
        now = self._clock.monotonic()
        if st.cfg.skip_quiet_samples:
            changes = getattr(self._hv, "changes", None)
            self._changes_seen = (self._changes_seen[1], changes(now) if changes is not None else None)
        skipped, self._skipped = self._skipped, False
        self.samples_taken += 1
        period = st.cfg.monitor_period_s
        doms = await self._hv.list()
        departed = {n for n, t in st.departed.items() if t >= now}   # left while we were listing: stale
        seen = set()
        vms = st.vms
        for d in doms:
            if d.spec is None:
                if d.unreadable:
                    seen.add(d.name)   # there, but not readable now: neither vanished nor adopted yet
                continue  # not a Cellbed domain
            seen.add(d.name)
            e = vms.get(d.name)
            if e is None:
                if d.name in st.discarding or d.name in departed:
                    continue          # a failed start being undone, or a VM that just migrated away
                if d.incoming or d.state is DomState.SHUTOFF:
                    continue
                if any(r.spec.name == d.name for r in st.incoming.values()):
                    continue  # arriving; adopted by FinishIncoming
                e = vms[d.name] = VmEntry(spec=d.spec)   # found in libvirt: adopt
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
                self._events.emit(npb.EVENT_KIND_VM_CRASHED, d.name, d.reason)
            if e.reason != "starting":
                e.state, e.reason = d.state, d.reason
        st.forget_departures(now)
        await self._settle_discards(seen)
        # a VM whose domain appeared after this listing began (a start or an arrival that ended
        # meanwhile) is not in it, and has not vanished
        for name in [n for n, e in vms.items() if n not in seen and not e.migrating_out
                     and e.reason != "starting" and e.known_since < now]:
            log.warning("VM %s vanished from libvirt", name)
            vms.pop(name)
            await self._guests.drop(name)
        running = [n for n, e in vms.items() if e.state is DomState.RUNNING and not e.migrating_out
                   and st.cfg.poll_guests]
        results = await asyncio.gather(*(self._guests.channel(n).status(timeout_s=2.0) for n in running),
                                       return_exceptions=True)
        for n, r in zip(running, results):
            if isinstance(r, GuestStatus) and n in vms:
                vms[n].guest = r
        self.sample_host(now)

    def sample_host(self, now: float) -> None:
        st = self._state
        cfg = st.cfg
        vm_cpu, vm_mem, cpu_u, mem_u, cpu, mem = st.view.totals()     # one pass over the VMs
        s = self.host_sample
        s.host, s.address = cfg.host, cfg.address
        c = s.capacity                       # every field of HostCapacity, set in place
        c.cpu_cores, c.mem_mib, c.cpu_norm, c.mem_norm = (cfg.cpu_cores, cfg.mem_mib,
                                                          cfg.cpu_norm, cfg.mem_norm)
        s.cpu_used_cores = vm_cpu
        s.mem_alloc_mib, s.cpu_req_cores = mem, cpu
        s.vm_count = len(st.vms)
        s.migrations_out, s.migrations_in = len(st.migrating), len(st.incoming)
        if self.cgroup is not None:
            ns = self.cgroup.cpu_usage_ns()
            if ns is not None:
                if self._cg_last is not None and now > self._cg_last[0]:
                    s.cgroup_cpu_cores = (ns - self._cg_last[1]) / 1e9 / (now - self._cg_last[0])
                self._cg_last = (now, ns)
            mb = self.cgroup.mem_usage_bytes()
            s.cgroup_mem_mib = (mb or 0) / 2**20
        s.mem_used_mib = vm_mem
        if not s.attributes and cfg.attributes:
            s.attributes.extend(wire.attributes_pb(cfg.attributes))
        if st.vms or st.incoming:
            s.asr_class = int(node_class((cpu_u, mem_u), (cfg.cpu_cores, cfg.mem_mib))) + 1  # wire codes start at 1
        else:
            s.asr_class = cpb.ASR_CLASS_IDLE
        if self._proc is not None:
            s.daemon_rss_mib = self._proc.memory_info().rss / 2**20
            s.daemon_cpu = self._proc.cpu_percent(None) / 100.0
        s.accel = self._hv.accel
        if st.journal.enabled:
            del s.leases[:]
            s.leases.extend(st.leases())
            del s.unresolved[:]
            s.unresolved.extend(f"{mid}: {why}" for mid, why in st.unresolved.items())
        s.sampled_unix_s = self._clock.now()
        s.qemu_version, s.libvirt_version = self._hv.versions()
        self._events.publish_state(s)

    async def run(self, first_delay_s: float | None = None) -> None:
        """The periodic sampling, until cancelled."""
        st = self._state
        delay = st.cfg.monitor_period_s if first_delay_s is None else first_delay_s
        while True:
            await self._clock.sleep(delay)
            delay = st.cfg.monitor_period_s
            try:
                if self._quiet():
                    self._skipped = True
                    self.samples_skipped += 1
                    for _, _, skipped in self._sample_listeners:
                        skipped()
                    continue
                await self.sample()
                if not st.journal.enabled:   # otherwise leases end by reconciliation
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
        st = self._state
        if not st.cfg.skip_quiet_samples:
            return False
        changes = getattr(self._hv, "changes", None)
        if changes is None:
            return False
        v = changes(self._clock.monotonic())
        if v is None or not self._changes_seen[0] == self._changes_seen[1] == v:
            return False
        if st.incoming or st.migrating or st.discarding or st.departed:
            return False
        for e in st.vms.values():          # a plain loop: this runs for every host every period
            if e.reason == "starting":
                return False
        return all(may_skip is not None and may_skip() for _, may_skip, _ in self._sample_listeners)

    def _expire_reservations(self) -> None:
        """Without a journal (model cells) a lease ends at its expiry; with one, by reconciliation."""
        now = self._clock.monotonic()
        incoming = self._state.incoming
        for mid, r in list(incoming.items()):
            if r.expires < now:
                log.warning("reservation %s for %s from %s expired", mid, r.spec.name, r.src)
                del incoming[mid]
