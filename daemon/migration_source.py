"""The source side of a live migration: the checks, admission at the destination
(PrepareIncoming, unless the SAN's target already holds a reservation), migrateToURI3 through the
backend with its progress and timeout policy, every step journaled before it is taken
(daemon/journal.py), and the one final record: after the destination verified the guest
(daemon/handover.py), or from where the guest is found after a failure (daemon/reconcile.py)."""
from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from typing import Awaitable, Callable

from cellbed.daemon.events import EventHub
from cellbed.daemon.guest_channel import GuestChannelError
from cellbed.daemon.guests import Guests
from cellbed.daemon.handover import HandOver
from cellbed.daemon.history import MigrationHistory
from cellbed.daemon.journal import Outgoing, record_dict
from cellbed.daemon.libvirt_tls import migration_uri_template, tls_by_default
from cellbed.daemon.lookup import Lookup
from cellbed.daemon.migration_record import fill_stats, options_pb
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors
from cellbed.domain.vm import DomState, Hypervisor, JobProgress, MigrationOptions
from cellbed.domain.wire import spec_pb
from cellbed.runtime.clock import Clock
from cellbed.runtime.peers import PeerDirectory
from cellbed.runtime.transport import Transport
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)

Settle = Callable[[str, float], Awaitable["npb.MigrationRecord | None"]]
"""(migration id, budget s) -> the final record, or None while where the guest is cannot be known
(reconciliation's ``reconcile_one``)."""


class MigrationSource:
    """*settle* finishes a migration whose transfer libvirt reported failed, from where its guest
    is found (daemon/reconcile.py)."""

    def __init__(self, state: NodeState, hv: Hypervisor, clock: Clock, transport: Transport, peers: PeerDirectory,
                 guests: Guests, events: EventHub, history: MigrationHistory, handover: HandOver,
                 lookup: Lookup, settle: Settle) -> None:
        self._state = state
        self._hv = hv
        self._clock = clock
        self._transport = transport
        self._peers = peers
        self._guests = guests
        self._events = events
        self._history = history
        self._handover = handover
        self._lookup = lookup
        self._settle = settle

    async def migrate(self, name: str, dest: str, opts: MigrationOptions,
                      prepared_mid: str = "", forced: bool = False) -> npb.MigrationRecord:
        """See NodeAgent.migrate."""
        st = self._state
        try:
            opts, e, tmpl, address, before = await self._migration_checks(name, dest, opts)
        except errors.CellbedError:
            if prepared_mid:      # the SAN's target holds a reservation for a migration that will not run
                await self._handover.release_remote(dest, prepared_mid, name)
            raise
        mid = prepared_mid or uuid.uuid4().hex[:12]
        peer_uri = tmpl.format(address=address, host=dest)
        rec = npb.MigrationRecord(id=mid, vm=name, src=st.cfg.host, dst=dest, start_unix_s=self._clock.now(),
                                 options=options_pb(opts), heartbeat_before=before.heartbeat,
                                 mem_mib=e.spec.mem_mib, wss_mib=e.spec.wss_mib,
                                 dirty_mib_s=-1 if math.isinf(e.spec.dirty_mib_s) else e.spec.dirty_mib_s,
                                 forced=forced, tls=opts.tls, guest_dirty_mib_s=before.dirty_actual_mib_s,
                                 sampled_dirty_mib_s=e.dirty_rate_mib_s)
        e.migrating_out = mid
        st.migrating[name] = mid
        st.settling.add(mid)
        try:
            return await self._migrate_journaled(e, rec, opts, peer_uri, before, prepared_mid)
        finally:
            st.settling.discard(mid)
            st.migrating.pop(name, None)

    async def _migration_checks(self, name: str, dest: str, opts: MigrationOptions):
        cfg = self._state.cfg
        opts = opts.validate()
        e = self._lookup.get(name)
        if dest == cfg.host:
            raise errors.FailedPrecondition(f"VM {name} already runs on {dest}: choose another destination")
        tmpl = migration_uri_template(cfg.migration_uri_template, cfg.insecure)
        address = self._peers.get(dest).address if "{address}" in tmpl else ""
        if opts.tls and cfg.insecure:
            raise errors.FailedPrecondition(f"tls=true but node {cfg.host} is insecure (plaintext libvirt, "
                                            "no certificates for QEMU): migrate without TLS")
        opts = dataclasses.replace(opts, tls=tls_by_default(tmpl) if opts.tls is None else opts.tls)
        if e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is already migrating ({e.migrating_out})")
        state, reason = await self._hv.domain_state(name)
        if state is not DomState.RUNNING:
            raise errors.FailedPrecondition(f"VM {name} is {state.value} ({reason}); only running VMs migrate")
        try:
            before = await self._guests.channel(name).status(timeout_s=3.0)
        except GuestChannelError as exc:
            raise errors.FailedPrecondition(f"guest {name} does not answer ({exc}); its migration could not be verified")
        return opts, e, tmpl, address, before

    async def _migrate_journaled(self, e, rec: npb.MigrationRecord, opts: MigrationOptions, peer_uri: str,
                                 before, prepared_mid: str) -> npb.MigrationRecord:
        st = self._state
        journal = st.journal
        mid, name, dest = rec.id, rec.vm, rec.dst
        try:
            if journal.enabled:   # the intent, before anything happens on either end
                journal.intent(Outgoing(mid=mid, vm=name, uuid=await self._hv.domain_uuid(name), peer=dest,
                                        peer_uri=peer_uri, record=record_dict(rec), boot_id=before.boot_id))
            if not prepared_mid:
                await self._transport.request(dest, "NodeAgent/PrepareIncoming", npb.PrepareIncomingRequest(
                    spec=spec_pb(e.spec), src_host=st.cfg.host, migration_id=mid,
                    cpu_used_cores=e.cpu_used_cores, mem_used_mib=e.rss_mib), timeout=10.0)
        except errors.CellbedError as exc:
            e.migrating_out = ""
            rec.outcome, rec.detail = npb.MIGRATION_OUTCOME_REFUSED, str(exc)
            if prepared_mid or isinstance(exc, (errors.Unavailable, errors.DeadlineExceeded)):
                await self._handover.release_remote(dest, mid, name)   # it may hold a reservation whose answer was lost
            self._history.final(rec)
            raise
        self._events.emit(npb.EVENT_KIND_MIGRATION_STARTED, name, f"{mid} -> {dest}")
        t0 = self._clock.monotonic()
        try:
            stats = await self._hv.migrate(name, peer_uri, opts, lambda p: self._progress(mid, name, p))
        except errors.CellbedError as exc:
            aborted = isinstance(exc, errors.MigrationFailed) and exc.aborted
            rec.outcome = npb.MIGRATION_OUTCOME_ABORTED if aborted else npb.MIGRATION_OUTCOME_FAILED
            rec.detail = str(exc)
            rec.wall_ms = (self._clock.monotonic() - t0) * 1000
            rec.timeout_action = getattr(exc, "timeout_action", "")
            journal.step(mid, "failed", record=record_dict(rec), aborted=aborted)
            if not journal.enabled:      # a model cell: the backend's word is the truth
                e.migrating_out = ""
                await self._confirm_still_here(name, rec)
                await self._handover.release_remote(dest, mid, name)
                self._history.final(rec)
                return rec
            return await self._settle_now(mid, rec)
        fill_stats(rec, stats)
        journal.step(mid, "transferred", record=record_dict(rec))
        return await self._handover.conclude_on_dest(mid, rec, before.heartbeat, before.boot_id, stale_here=False,
                                                     budget_s=st.cfg.verify_timeout_s + 30)

    async def _settle_now(self, mid: str, rec: npb.MigrationRecord) -> npb.MigrationRecord:
        """After libvirt reported a failure: look where the guest is (daemon/reconcile.py)."""
        st = self._state
        done = await self._settle(mid, st.cfg.verify_timeout_s + 30)
        if done is None:
            raise errors.MigrationUnresolved(
                f"migration {mid} of {rec.vm}: {rec.detail}; where the guest is could not be confirmed yet "
                f"({st.unresolved.get(mid, '')}); its record is written when it is")
        return done

    async def _confirm_still_here(self, name: str, rec: npb.MigrationRecord) -> None:
        try:
            state, reason = await self._hv.domain_state(name)
            rec.detail += f"; VM still on source ({state.value}, {reason})"
        except errors.NotFound:
            rec.detail += "; VM NOT found on source after failed migration"
            log.error("VM %s not on source after failed migration %s", name, rec.id)

    def _progress(self, mid: str, name: str, p: JobProgress) -> None:
        self._events.emit(npb.EVENT_KIND_MIGRATION_PROGRESS, name, progress=npb.MigrationProgress(
            migration_id=mid, vm=name, elapsed_ms=p.elapsed_ms, data_processed_bytes=p.data_processed,
            data_remaining_bytes=p.data_remaining, data_total_bytes=p.data_total,
            memory_iteration=p.memory_iteration, memory_dirty_rate=p.memory_dirty_rate,
            memory_bps=p.memory_bps, phase=p.phase))

    async def abort_migration(self, name: str) -> None:
        self._lookup.get(name)
        if name not in self._state.migrating:
            raise errors.FailedPrecondition(f"VM {name} has no outgoing migration to abort")
        await self._hv.abort_migration(name)
