"""The source's end of a live migration once its guest has left (or may have): the destination
verifies the guest (FinishIncoming, retried while it does not answer, idempotent there), then the
one final record is written; or the destination is told to drop its reservation. Used by the
migration itself (daemon/migration_source.py) and by reconciliation (daemon/reconcile.py)."""
from __future__ import annotations

import logging

from cellbed.daemon.guests import Guests
from cellbed.daemon.history import MigrationHistory
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors
from cellbed.domain.vm import Hypervisor
from cellbed.runtime.clock import Clock
from cellbed.runtime.transport import Transport
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)


class HandOver:
    def __init__(self, state: NodeState, hv: Hypervisor, clock: Clock, transport: Transport, guests: Guests,
                 history: MigrationHistory) -> None:
        self._state = state
        self._hv = hv
        self._clock = clock
        self._transport = transport
        self._guests = guests
        self._history = history

    async def conclude_on_dest(self, mid: str, rec: npb.MigrationRecord, hb_before: int, boot_id: str,
                               stale_here: bool, budget_s: float) -> npb.MigrationRecord:
        """The guest left: the destination verifies it (FinishIncoming, idempotent), then the
        record is final. Raises MigrationUnresolved while the destination daemon does not answer."""
        st = self._state
        name, dest = rec.vm, rec.dst
        st.handing_over[name] = (mid, dest)     # until the destination has it: "ask again", not "not here"
        st.vms.pop(name, None)
        st.departed[name] = self._clock.monotonic()
        try:
            await self._guests.drop(name)
            if stale_here:        # a leftover definition or paused copy: a source never keeps one
                try:
                    await self._hv.stop(name)
                except errors.NotFound:
                    pass
            fin = await self._finish_rpc(dest, mid, name, True, hb_before, boot_id,
                                         budget_s if st.journal.enabled else 0.0)
        except errors.NotFound as e:        # the destination knows nothing of it: keep asking, never guess
            if not st.journal.enabled:
                raise
            st.unresolved[mid] = f"{name} -> {dest}: transferred; {e}"
            raise errors.MigrationUnresolved(f"migration {mid}: {e}; the record is written once it is verified") from e
        finally:
            st.handing_over.pop(name, None)
        if fin is None and not st.journal.enabled:   # a model cell: no reconciliation to wait for
            fin = npb.FinishIncomingResponse(verified=False, detail="destination unreachable")
        if fin is None:
            why = f"{name} -> {dest}: transferred; destination daemon does not answer, verification pending"
            st.unresolved[mid] = why
            raise errors.MigrationUnresolved(f"migration {mid}: {why}; the record is written once it answers")
        rec.heartbeat_after, rec.integrity_pages, rec.integrity_bad = (
            fin.heartbeat_after, fin.integrity_pages, fin.integrity_bad)
        if fin.verified:
            rec.outcome = npb.MIGRATION_OUTCOME_SUCCEEDED
            rec.detail = fin.detail if not rec.reconciled else f"{rec.detail}; {fin.detail}"
        else:
            rec.outcome = npb.MIGRATION_OUTCOME_VERIFICATION_FAILED
            rec.detail = f"libvirt moved the guest but verification failed: {fin.detail}"
        self._history.final(rec)
        return rec

    async def _finish_rpc(self, dest: str, mid: str, name: str, migrated: bool, hb: int, boot_id: str,
                          budget_s: float) -> npb.FinishIncomingResponse | None:
        """FinishIncoming, retried while the destination does not answer, for up to *budget_s*."""
        deadline = self._clock.monotonic() + budget_s
        while True:
            try:
                return await self._transport.request(dest, "NodeAgent/FinishIncoming", npb.FinishIncomingRequest(
                    migration_id=mid, name=name, migrated=migrated, heartbeat_before=hb, boot_id=boot_id),
                    timeout=self._state.cfg.verify_timeout_s + 10)
            except (errors.Unavailable, errors.DeadlineExceeded) as exc:
                if self._clock.monotonic() >= deadline:
                    log.warning("FinishIncoming %s on %s: %s", mid, dest, exc)
                    return None
            await self._clock.sleep(1.0)

    async def release_remote(self, dest: str, mid: str, name: str) -> None:
        """Tell the destination to drop its reservation (best effort: it releases an orphaned
        lease itself once it sees the VM back on its source)."""
        try:
            await self._transport.request(dest, "NodeAgent/FinishIncoming", npb.FinishIncomingRequest(
                migration_id=mid, name=name, migrated=False), timeout=5.0)
        except errors.CellbedError as exc:
            log.info("releasing reservation %s on %s: %s", mid, dest, exc)
