"""The destination side of a live migration: the reservation (admission, journaled as a lease
owned by the source), its release, and the end of the migration as the source saw it
(FinishIncoming, idempotent): the guest verified (alive, same boot, heartbeat advanced, memory
intact) and adopted, with the lease becoming the VM in one step."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Callable

from cellbed.daemon.admission import Admission
from cellbed.daemon.guest_channel import GuestChannelError
from cellbed.daemon.guests import Guests
from cellbed.daemon.host_view import HostView
from cellbed.daemon.inventory import Reservation, Verification, VmEntry
from cellbed.daemon.journal import Incoming, spec_dict
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors
from cellbed.domain.vm import DomState, Hypervisor, SpecLimits, VmSpec
from cellbed.runtime.clock import Clock

log = logging.getLogger(__name__)


class MigrationDestination:
    def __init__(self, state: NodeState, hv: Hypervisor, clock: Clock, limits: SpecLimits, guests: Guests,
                 admission: Admission) -> None:
        self._state = state
        self._hv = hv
        self._clock = clock
        self._limits = limits
        self._guests = guests
        self._admission = admission

    async def reserve(self, spec: VmSpec, src: str, mid: str, force: bool, cpu_used: float = 0.0,
                      mem_used: float = 0.0, check: Callable[[HostView], None] | None = None) -> None:
        """See NodeAgent.reserve."""
        st = self._state
        spec.validate(self._limits)
        if not mid:
            raise errors.InvalidArgument("migration_id must be set")
        async with self._admission.lock:
            if check is not None:
                check(st.view)
            if spec.name in st.vms:
                raise errors.FailedPrecondition(f"VM {spec.name} already runs on {st.cfg.host}")
            self._admission.admit(spec, force=force)
            ttl = st.cfg.migration_timeout_s * 2 + 120
            if mid in st.incoming or mid in st.journal.results:
                raise errors.AlreadyExists(f"migration {mid} already holds a reservation on {st.cfg.host}")
            r = Reservation(spec, src, self._clock.monotonic() + ttl, cpu_used, mem_used, self._clock.now() + ttl,
                            self._clock.monotonic())
            if st.journal.enabled:
                st.journal.reserve(Incoming(mid=mid, spec=spec_dict(spec), src=src, expires_unix_s=r.expires_unix_s,
                                            cpu_used=cpu_used, mem_used=mem_used))
            st.incoming[mid] = r

    def release(self, mid: str, why: str = "released") -> None:
        """Admission: give back the reservation of migration *mid* (it did not happen)."""
        st = self._state
        if st.incoming.pop(mid, None) is not None:
            st.journal.finish(mid, "released", {"verified": False, "detail": why})

    async def finish_incoming(self, mid: str, name: str, migrated: bool, hb_before: int,
                              boot_id: str) -> Verification:
        """The end of an incoming migration, as its source saw it. Idempotent: asked again (the
        source retried, or reconciled after a crash) it gives the first answer."""
        st = self._state
        done = st.journal.results.get(mid)
        if done is not None:
            return Verification(**done)
        running = st.finishing.get(mid)
        if running is not None:
            return await asyncio.shield(running)
        r = st.incoming.get(mid)
        if r is None or r.spec.name != name:
            raise errors.NotFound(f"no incoming migration {mid!r} of VM {name!r} on {st.cfg.host}")
        if not migrated:
            try:
                state, reason = await self._hv.domain_state(name)
            except errors.NotFound:
                state, reason = None, ""
            if state is DomState.RUNNING:
                raise errors.FailedPrecondition(f"VM {name} runs on {st.cfg.host} ({reason}): migration {mid} did "
                                                "happen; not releasing its reservation")
            self.release(mid, "migration did not happen; reservation released")
            return Verification(False, "migration did not happen; reservation released")
        fut = st.finishing[mid] = asyncio.ensure_future(self.verify_and_adopt(mid, r, name, hb_before, boot_id))
        try:
            return await asyncio.shield(fut)
        finally:
            if fut.done():
                st.finishing.pop(mid, None)

    async def verify_and_adopt(self, mid: str, r: Reservation, name: str, hb_before: int,
                               boot_id: str, how: str = "verified") -> Verification:
        """Verify the guest of lease *mid*, then turn the lease into the VM (if its domain is here)."""
        st = self._state
        try:
            v = await self._verify(name, hb_before, boot_id)
        except errors.CellbedError as e:      # e.g. libvirtd restarting: the lease stays, the source asks again
            raise errors.Unavailable(f"verifying {name} on {st.cfg.host}: {e}; ask again") from e
        try:  # adopt the VM if, and only if, its domain really is here (even when it failed checks)
            state, reason = await self._hv.domain_state(name)
        except errors.NotFound:
            state = None
        except errors.CellbedError as e:      # the lease stays until this host can tell
            raise errors.Unavailable(f"adopting {name} on {st.cfg.host}: {e}; ask again") from e
        # lease to VM with no await between: the VM is never in neither (nor in both)
        st.incoming.pop(mid, None)
        if state is not None:
            st.vms[name] = VmEntry(spec=r.spec, state=state, reason=reason, cpu_used_cores=r.cpu_used,
                                   rss_mib=r.mem_used, known_since=self._clock.monotonic())
        st.journal.finish(mid, how, dataclasses.asdict(v))
        st.finishing.pop(mid, None)
        log.log(logging.INFO if v.verified else logging.ERROR, "incoming %s (%s from %s): %s",
                name, mid, r.src, v.detail)
        return v

    async def _verify(self, name: str, hb_before: int, boot_id: str) -> Verification:
        """A migration succeeds only if the guest is alive and intact here: not panicked,
        same boot, heartbeat advanced, every working-set page holding its last generation."""
        host = self._state.cfg.host
        try:
            state, reason = await self._hv.domain_state(name)
        except errors.NotFound:
            return Verification(False, f"domain {name} is not on {host}")
        if state is DomState.CRASHED:
            return Verification(False, f"guest {state.value} ({reason}) on destination")
        try:
            gs = await self._guests.wait(name, self._state.cfg.verify_timeout_s, after_heartbeat=hb_before)
        except errors.DeadlineExceeded as exc:
            state, reason = await self._hv.domain_state(name)
            return Verification(False, f"{exc}; domain {state.value} ({reason})")
        if boot_id and gs.boot_id != boot_id:
            return Verification(False, f"guest rebooted: boot id {gs.boot_id} != {boot_id}", gs.heartbeat)
        try:
            chk = await self._guests.channel(name).check(timeout_s=10.0)
        except GuestChannelError as exc:
            return Verification(False, f"integrity check did not answer: {exc}", gs.heartbeat)
        state, reason = await self._hv.domain_state(name)
        if state is DomState.CRASHED:
            return Verification(False, f"guest {reason} during verification", gs.heartbeat, chk.pages, chk.bad)
        if not chk.ok:
            return Verification(False, f"memory integrity broken: {chk.bad} of {chk.pages} pages bad "
                                       f"(first {chk.first_bad})", gs.heartbeat, chk.pages, chk.bad)
        return Verification(True, f"heartbeat {hb_before} -> {gs.heartbeat}, {chk.pages} pages intact",
                            gs.heartbeat, chk.pages, chk.bad)
