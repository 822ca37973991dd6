"""The node agent's reconciliation (issue 12): at start, and every few seconds while anything is
open, it finishes the migrations its journal (daemon/journal.py) still holds, from where the
domain actually is on both ends (the decision table: cellbed/policy/migration/reconcile.py).

- Source side: every open outgoing entry ends in exactly one record, SUCCEEDED only after the
  destination verified the guest; a guest still here is FAILED or ABORTED and the destination's
  lease is released; an unrepairable end (post-copy interrupted, the guest gone from both
  libvirts, the guest on both) gets a named outcome and an operator hint.
- Destination side: every lease ends, released when its migration cannot be in flight any
  more, or with the guest adopted (verified) when it landed here and the lease expired.
"""
from __future__ import annotations

import logging

from cellbed.daemon.guests import Guests
from cellbed.daemon.handover import HandOver
from cellbed.daemon.history import MigrationHistory
from cellbed.daemon.inventory import Reservation
from cellbed.daemon.journal import Outgoing, record_from, spec_from
from cellbed.daemon.migration_dest import MigrationDestination
from cellbed.daemon.migration_record import fill_stats
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors
from cellbed.domain.vm import DomState, Hypervisor, MigrationOptions
from cellbed.policy.migration.reconcile import Decision, Seen, Where, decide, decide_lease, hint
from cellbed.runtime.clock import Clock
from cellbed.runtime.transport import Transport
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)

RECONCILE_PERIOD_S = 2.0
LEASE_GRACE_S = 10.0      # a lease younger than this may belong to a migration about to start (SAN step 5)
_OUTCOME = {Decision.POSTCOPY_FAILED: npb.MIGRATION_OUTCOME_POSTCOPY_FAILED, Decision.LOST: npb.MIGRATION_OUTCOME_LOST,
            Decision.DUPLICATED: npb.MIGRATION_OUTCOME_DUPLICATED}



class Reconciler:
    def __init__(self, state: NodeState, hv: Hypervisor, clock: Clock, transport: Transport, guests: Guests,
                 history: MigrationHistory, handover: HandOver, dest: MigrationDestination) -> None:
        self._state = state
        self._hv = hv
        self._clock = clock
        self._transport = transport
        self._guests = guests
        self._history = history
        self._handover = handover
        self._dest = dest

    def restore_journal(self) -> None:
        """Before the first sample: the open leases come back as reservations (so the sample does
        not adopt an arriving guest), with their expiry in this process's clock."""
        st = self._state
        st.journal.load()
        now_unix, now_mono = self._clock.now(), self._clock.monotonic()
        for mid, i in st.journal.incoming.items():
            st.incoming[mid] = Reservation(spec_from(i.spec), i.src, now_mono + (i.expires_unix_s - now_unix),
                                           i.cpu_used, i.mem_used, i.expires_unix_s, now_mono - LEASE_GRACE_S)

    def mark_migrating(self) -> None:
        """After the first sample: a VM whose outgoing migration is open is migrating."""
        st = self._state
        for o in st.journal.outgoing.values():
            e = st.vms.get(o.vm)
            if e is not None:
                e.migrating_out = o.mid

    async def run(self) -> None:
        """Reconciliation every RECONCILE_PERIOD_S, until cancelled."""
        while True:
            await self._clock.sleep(RECONCILE_PERIOD_S)
            try:
                await self.reconcile()
            except errors.CellbedError as e:
                log.warning("reconciliation: %s", e)
            except Exception:
                log.exception("reconciliation failed")

    async def reconcile(self) -> None:
        settling = self._state.settling
        for mid in [m for m in self._state.journal.outgoing if m not in settling]:
            settling.add(mid)
            try:
                await self.reconcile_one(mid, budget_s=0.0, after_crash=True)
            finally:
                settling.discard(mid)
        await self._reconcile_leases()

    # --- the source's side -------------------------------------------------------------------
    async def reconcile_one(self, mid: str, budget_s: float, after_crash: bool = False) -> npb.MigrationRecord | None:
        """Finish outgoing migration *mid* if where its guest is can be known; None otherwise
        (it stays open, with why in ``unresolved``)."""
        st = self._state
        o = st.journal.outgoing.get(mid)
        if o is None:
            return None
        rec = record_from(o.record)
        done = self._history.find(mid)
        if done is not None:          # saved before a crash; only the journal's close was lost
            st.journal.close(mid, npb.MigrationOutcome.Name(done.outcome))
            return done
        src, dst, raw = await self._observe(o)
        d = decide(src, dst, o.postcopy_resumed)
        log.info("reconcile %s (%s -> %s, %s): here %s%s, there %s -> %s", mid, o.vm, o.peer, o.phase, src.where.value,
                 " (job running)" if src.job else "", dst.where.value, d.value)
        if after_crash:
            rec.reconciled = True
            rec.detail = (rec.detail + "; " if rec.detail else "") + f"reconciled from where the domain was found (journal at {o.phase})"
        if d is Decision.WAIT:
            st.unresolved[mid] = f"{o.vm} -> {o.peer}: " + (hint(d, st.cfg.host, o.peer, src, dst)
                                                            or "libvirt is still migrating it")
            return None
        if d is Decision.ON_SOURCE:
            return await self._conclude_on_source(o, rec, src)
        if d is Decision.DUPLICATED and await self._destroy_copy_on_dest(o, dst):
            rec.detail = (rec.detail + "; " if rec.detail else "") + (
                f"the guest ran on {o.peer} too ({dst.detail}; its libvirtd lost the end of the switch-over): "
                "that copy was destroyed")
            return await self._conclude_on_source(o, rec, src)
        if d is Decision.ON_DEST:
            if not rec.data_total_bytes and hasattr(self._hv, "dest_completed_stats"):   # libvirt finished it alone
                fill_stats(rec, await self._hv.dest_completed_stats(o.vm, o.peer_uri))
            try:
                return await self._handover.conclude_on_dest(mid, rec, rec.heartbeat_before, o.boot_id,
                                                             stale_here=raw in (DomState.SHUTOFF, DomState.PAUSED),
                                                             budget_s=budget_s)
            except errors.MigrationUnresolved:
                return None
        if d is Decision.POSTCOPY_RECOVER:
            st.journal.step(mid, "postcopy_resume", postcopy_resumed=True)
            try:
                await self._hv.postcopy_resume(o.vm, o.peer_uri, MigrationOptions(postcopy=True, tls=rec.tls))
            except errors.CellbedError as e:
                log.warning("post-copy resume of %s failed: %s", o.vm, e)
            st.unresolved[mid] = f"{o.vm} -> {o.peer}: post-copy interrupted; resume tried"
            return None
        rec.outcome, rec.hint = _OUTCOME[d], hint(d, st.cfg.host, o.peer, src, dst)
        rec.detail = (rec.detail + "; " if rec.detail else "") + f"here {src.detail}, on {o.peer} {dst.detail}"
        if d is Decision.LOST:
            await self._handover.release_remote(o.peer, o.mid, o.vm)
            st.vms.pop(o.vm, None)
            await self._guests.drop(o.vm)
            try:                          # its dead definition must not come back as a VM
                await self._hv.stop(o.vm)
            except errors.CellbedError:
                pass
        self._history.final(rec)
        return rec

    async def _conclude_on_source(self, o: Outgoing, rec: npb.MigrationRecord, src: Seen) -> npb.MigrationRecord:
        if src.where is Where.PAUSED:
            try:
                await self._hv.resume(o.vm)
            except errors.CellbedError as e:
                log.warning("resuming %s on its source: %s", o.vm, e)
        rec.outcome = npb.MIGRATION_OUTCOME_ABORTED if o.aborted else npb.MIGRATION_OUTCOME_FAILED
        rec.detail = (rec.detail + "; " if rec.detail else "") + f"VM still on source ({src.detail})"
        e = self._state.vms.get(o.vm)
        if e is not None:
            e.migrating_out = ""
        await self._handover.release_remote(o.peer, o.mid, o.vm)
        self._history.final(rec)
        return rec

    async def _destroy_copy_on_dest(self, o: Outgoing, dst: Seen) -> bool:
        """The guest runs here and on the destination: destroy the destination's copy (this one
        is kept, as libvirt resumed it). False if that cannot be done now (DUPLICATED, named)."""
        try:
            await self._hv.destroy_on(o.uuid, o.peer_uri)
        except errors.CellbedError as e:
            log.error("migration %s: %s runs here and on %s (%s), and destroying that copy failed: %s",
                      o.mid, o.vm, o.peer, dst.detail, e)
            return False
        log.warning("migration %s: %s ran here and on %s (%s); that copy was destroyed, this one kept",
                    o.mid, o.vm, o.peer, dst.detail)
        return True

    async def _observe(self, o: Outgoing) -> tuple[Seen, Seen, DomState | None]:
        try:
            await self._hv.ensure_open()
            src, raw = await self._seen(o.uuid, "")
        except errors.CellbedError as e:
            src, raw = Seen(Where.UNKNOWN, detail=str(e)), None
        dst, _ = await self._seen(o.uuid, o.peer_uri)
        return src, dst, raw

    async def _seen(self, uuid: str, uri: str) -> tuple[Seen, DomState | None]:
        try:
            st, why, job = await self._hv.locate(uuid, uri)
        except errors.CellbedError as e:
            return Seen(Where.UNKNOWN, detail=str(e)), None
        if st is None or st is DomState.SHUTOFF:
            return Seen(Where.ABSENT, detail=why if st is None else f"shut off ({why})"), st
        if "post-copy" in why:
            return Seen(Where.POSTCOPY, job=job, detail=f"{st.value} ({why})"), st
        where = Where.RUNNING if st is DomState.RUNNING else Where.PAUSED
        return Seen(where, job=job, detail=f"{st.value} ({why})"), st

    # --- the destination's side ----------------------------------------------------------------
    async def _reconcile_leases(self) -> None:
        st = self._state
        now = self._clock.monotonic()
        for mid, r in list(st.incoming.items()):
            if mid in st.finishing:
                continue
            name = r.spec.name
            try:
                ds, why = await self._hv.domain_state(name)
                here = Seen(Where.RUNNING if ds is DomState.RUNNING else
                            Where.ABSENT if ds is DomState.SHUTOFF else Where.PAUSED, detail=why)
            except errors.NotFound:
                here = Seen(Where.ABSENT)
            except errors.CellbedError:
                continue              # libvirtd down: decide later
            source_has_it = None
            if here.where is Where.ABSENT and now - r.since < LEASE_GRACE_S and r.expires >= now:
                continue
            if here.where is Where.ABSENT:
                try:
                    resp = await self._transport.request(r.src, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=3.0)
                    # the source answered and is not migrating it (it has it back, or it is gone): over
                    source_has_it = not any(v.spec.name == name and v.state == npb.VM_STATE_MIGRATING_OUT
                                            for v in resp.vms)
                except errors.CellbedError:
                    pass
            ld = decide_lease(here, r.expires < now, source_has_it)
            if ld.release:
                log.warning("lease %s of %s from %s: %s", mid, name, r.src, ld.why)
                self._dest.release(mid, ld.why)
            elif ld.adopt:
                log.warning("lease %s of %s from %s: %s", mid, name, r.src, ld.why)
                await self._dest.verify_and_adopt(mid, r, name, 0, "", how="adopted")
