"""The node agent's VM operations: start (admitted, booted, the guest's first answer awaited;
undone if any of it fails), stop, pause, workload and request changes, fault injection, and the
hypervisor's lifecycle events. A VM in a hand-over is refused with the lookup's answer
(daemon/lookup.py)."""
from __future__ import annotations

import dataclasses
import logging
import math

from cellbed.daemon.admission import Admission
from cellbed.daemon.events import EventHub
from cellbed.daemon.guest_channel import GuestChannelError
from cellbed.daemon.guests import Guests
from cellbed.daemon.inventory import VmEntry
from cellbed.daemon.lookup import Lookup
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors
from cellbed.domain.vm import DomState, Hypervisor, SpecLimits, VmSpec
from cellbed.runtime.clock import Clock
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)


class VmOperations:
    def __init__(self, state: NodeState, hv: Hypervisor, clock: Clock, limits: SpecLimits, guests: Guests,
                 events: EventHub, admission: Admission, lookup: Lookup) -> None:
        self._state = state
        self._hv = hv
        self._clock = clock
        self._limits = limits
        self._guests = guests
        self._events = events
        self._admission = admission
        self._lookup = lookup
        self._undoing: set[str] = set()                    # of the VMs in state.discarding, the ones being removed right now

    async def start_vm(self, spec: VmSpec) -> VmEntry:
        st = self._state
        spec = dataclasses.replace(spec.validate(self._limits), created_unix_s=spec.created_unix_s or self._clock.now())
        async with self._admission.lock:
            if spec.name in st.vms or st.lease_of(spec.name) is not None:
                raise errors.AlreadyExists(f"VM {spec.name!r} already exists on host {st.cfg.host}")
            away = self._lookup.away(spec.name)
            if away is not None:      # a VM of that name may be running elsewhere: never two
                raise errors.FailedPrecondition(f"{away}; a new VM of that name cannot start here until then")
            if spec.name in st.discarding:
                raise errors.Unavailable(f"VM {spec.name!r}: a failed start of it on {st.cfg.host} is still being "
                                         "undone; retry later")
            self._admission.admit(spec)
            # until its first sample, count what the VM is expected to use
            st.vms[spec.name] = entry = VmEntry(spec=spec, state=DomState.PAUSED, reason="starting",
                                                cpu_used_cores=spec.vcpus * spec.cpu_load,
                                                rss_mib=float(spec.wss_mib or spec.mem_mib))
        t0 = self._clock.monotonic()
        try:
            await self._hv.start(spec)
            entry.known_since = self._clock.monotonic()
            gs = await self._guests.wait(spec.name, st.cfg.boot_timeout_s)
        except BaseException:
            # Undo: the caller (a broker, an LM) will place the VM elsewhere, so it must not
            # survive here. Until the domain is gone, sampling must not adopt it back.
            st.vms.pop(spec.name, None)
            st.discarding.add(spec.name)
            await self._discard(spec.name)
            raise
        entry.boot_to_workload_s = self._clock.monotonic() - t0
        entry.guest, entry.state, entry.reason = gs, DomState.RUNNING, "booted"
        log.info("VM %s started on %s: boot-to-workload %.2f s", spec.name, st.cfg.host, entry.boot_to_workload_s)
        self._events.emit(npb.EVENT_KIND_VM_STARTED, spec.name, f"boot-to-workload {entry.boot_to_workload_s:.2f} s")
        return entry

    async def _discard(self, name: str) -> bool:
        """Remove the domain of a VM whose start failed; True once it is gone. On failure the
        name stays in ``discarding`` and the next sample tries again."""
        self._undoing.add(name)
        try:
            await self._guests.drop(name)
            await self._hv.stop(name)
        except errors.NotFound:
            pass
        except errors.CellbedError as e:
            log.error("VM %s: undoing its failed start: %s (retried at the next sample)", name, e)
            return False
        finally:
            self._undoing.discard(name)
        self._state.discarding.discard(name)
        return True

    async def settle_discards(self, seen: set[str]) -> None:
        """At a sample (*seen*: the domains it listed): forget a failed start whose domain is
        gone, try again to remove one that is still there (unless that is under way)."""
        discarding = self._state.discarding
        for name in [n for n in discarding if n not in self._undoing]:
            if name not in seen:
                discarding.discard(name)                 # its domain is gone
            else:
                await self._discard(name)

    async def stop_vm(self, name: str) -> None:
        e = self._lookup.get(name)
        if e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is migrating ({e.migrating_out}); abort it first")
        await self._guests.drop(name)
        await self._hv.stop(name)
        self._state.vms.pop(name, None)
        self._state.departed[name] = self._clock.monotonic()   # a sample listing since before must not adopt it back
        self._events.emit(npb.EVENT_KIND_VM_STOPPED, name)

    async def set_workload(self, name: str, cpu_load: float | None, wss_mib: int | None,
                           dirty_mib_s: float | None) -> VmEntry:
        e = self._lookup.get(name)
        new = e.spec.with_workload(cpu_load, wss_mib, dirty_mib_s, self._limits)   # validates the ranges
        if e.state is not DomState.RUNNING:
            raise errors.FailedPrecondition(f"VM {name} is {e.state.value} ({e.reason}); cannot change its workload")
        try:
            gs = await self._guests.channel(name).set_workload(cpu=new.cpu_load, wss_mib=new.wss_mib,
                                                               dirty_mib_s=new.dirty_mib_s)
        except GuestChannelError as exc:
            code = errors.InvalidArgument if type(exc).__name__ == "GuestRefused" else errors.Unavailable
            raise code(f"guest {name}: {exc}") from exc
        await self._hv.update_spec(new)
        e.spec, e.guest = new, gs
        self._events.emit(npb.EVENT_KIND_WORKLOAD_SET, name,
                          f"cpu {new.cpu_load:g} wss {new.wss_mib} MiB dirty {new.dirty_mib_s:g} MiB/s")
        return e

    async def update_request(self, name: str, req_cpu_cores: float, mem_mib: int, priority: int,
                             production: bool, constraints: tuple = ()) -> VmEntry:
        """Change what VM *name* requests (see NodeAgent.update_request)."""
        e = self._lookup.get(name)
        if e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is migrating ({e.migrating_out}); update it once it has landed")
        s = e.spec
        vcpus = max(s.vcpus, math.ceil(req_cpu_cores - 1e-9), 1)
        new = dataclasses.replace(s, vcpus=vcpus, req_cpu_cores=min(float(req_cpu_cores), float(vcpus)),
                                  cpu_load=min(1.0, s.vcpus * s.cpu_load / vcpus), mem_mib=int(mem_mib),
                                  wss_mib=min(s.wss_mib, max(0, int(mem_mib) - self._limits.guest_overhead_mib)),
                                  priority=priority, production=production,
                                  constraints=tuple(constraints)).validate(self._limits)
        await self._hv.update_spec(new)
        e.spec = new
        return e

    async def pause_vm(self, name: str) -> None:
        """Pause a running VM (RUS spike policy); its resources stay allocated."""
        e = self._lookup.get(name)
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is {e.state.value} ({e.reason}); only running VMs pause")
        await self._hv.pause(name)
        e.state, e.reason, e.cpu_used_cores = DomState.PAUSED, "paused (spike)", 0.0

    async def inject_fault(self, name: str, kind: str) -> str:
        e = self._lookup.get(name)
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is {e.state.value} ({e.reason}); faults need a running guest")
        try:
            rep = await self._guests.channel(name).fault(kind)
        except GuestChannelError as exc:
            raise errors.Unavailable(f"guest {name}: {exc}") from exc
        log.warning("fault %s injected into %s: %s", kind, name, rep)
        return str(rep)

    def on_lifecycle(self, name: str, state: DomState, reason: str) -> None:
        """The hypervisor's word that a domain changed state (libvirt's lifecycle events)."""
        e = self._state.vms.get(name)
        if e is None:
            return
        if state is DomState.CRASHED and e.state is not DomState.CRASHED:
            e.state, e.reason = state, reason
            log.warning("VM %s crashed (%s)", name, reason)
            self._events.emit(npb.EVENT_KIND_VM_CRASHED, name, reason)
