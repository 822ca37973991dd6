"""The node agent's live migration: the source side (admission at the destination, migrateToURI3 through the backend, progress, the timeout policy, the record) and the destination side (reservation, verification of the guest, adoption)."""
from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from typing import Callable
from cellbed.domain import errors
from cellbed.daemon.guest_channel import GuestChannelError
from cellbed.domain.vm import DomState, JobProgress, MigrationOptions, VmSpec
from cellbed.daemon.host_view import HostView
from cellbed.v1 import node_pb2 as npb
from cellbed.domain.wire import spec_pb
from cellbed.daemon.migration_record import fill_stats, options_pb
from cellbed.daemon.inventory import Reservation, Verification, VmEntry
from cellbed.daemon.libvirt_tls import migration_uri_template, tls_by_default

log = logging.getLogger(__name__)


class MigrationMixin:
    """Part of NodeAgent (which owns the state these methods use)."""

    # --- migration: source side -----------------------------------------------------------
    async def migrate(self, name: str, dest: str, opts: MigrationOptions,
                      prepared_mid: str = "", forced: bool = False) -> npb.MigrationRecord:
        """Live-migrate *name* to *dest*. The destination admits it with PrepareIncoming, unless
        *prepared_mid* names a reservation it already holds (SAN TaskMigrationProcessRequest)."""
        opts = opts.validate()
        e = self._get(name)
        if dest == self.cfg.host:
            raise errors.FailedPrecondition(f"VM {name} already runs on {dest}: choose another destination")
        tmpl = migration_uri_template(self.cfg.migration_uri_template, self.cfg.insecure)
        address = self.peers.get(dest).address if "{address}" in tmpl else ""
        if opts.tls and self.cfg.insecure:
            raise errors.FailedPrecondition(f"tls=true but node {self.cfg.host} is insecure (plaintext libvirt, "
                                            "no certificates for QEMU): migrate without TLS")
        opts = dataclasses.replace(opts, tls=tls_by_default(tmpl) if opts.tls is None else opts.tls)
        if e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is already migrating ({e.migrating_out})")
        state, reason = await self.hv.domain_state(name)
        if state is not DomState.RUNNING:
            raise errors.FailedPrecondition(f"VM {name} is {state.value} ({reason}); only running VMs migrate")
        try:
            before = await self.channel(name).status(timeout_s=3.0)
        except GuestChannelError as exc:
            raise errors.FailedPrecondition(f"guest {name} does not answer ({exc}); its migration could not be verified")
        mid = prepared_mid or uuid.uuid4().hex[:12]
        rec = npb.MigrationRecord(id=mid, vm=name, src=self.cfg.host, dst=dest, start_unix_s=self.clock.now(),
                                 options=options_pb(opts), heartbeat_before=before.heartbeat,
                                 mem_mib=e.spec.mem_mib, wss_mib=e.spec.wss_mib,
                                 dirty_mib_s=-1 if math.isinf(e.spec.dirty_mib_s) else e.spec.dirty_mib_s,
                                 forced=forced, tls=opts.tls, guest_dirty_mib_s=before.dirty_actual_mib_s,
                                 sampled_dirty_mib_s=e.dirty_rate_mib_s)
        try:
            if not prepared_mid:
                await self.transport.request(dest, "NodeAgent/PrepareIncoming", npb.PrepareIncomingRequest(
                    spec=spec_pb(e.spec), src_host=self.cfg.host, migration_id=mid,
                    cpu_used_cores=e.cpu_used_cores, mem_used_mib=e.rss_mib), timeout=10.0)
        except errors.CellbedError as exc:
            rec.outcome, rec.detail = npb.MIGRATION_OUTCOME_REFUSED, str(exc)
            self._save_record(rec)
            self.emit(npb.EVENT_KIND_MIGRATION_FINISHED, name, f"refused: {exc}", record=rec)
            raise
        e.migrating_out = mid
        self.migrating[name] = mid
        self.emit(npb.EVENT_KIND_MIGRATION_STARTED, name, f"{mid} -> {dest}")
        migrated = False
        t0 = self.clock.monotonic()
        try:
            stats = await self.hv.migrate(
                name, tmpl.format(address=address, host=dest), opts,
                lambda p: self._progress(mid, name, p))
            migrated = True
            fill_stats(rec, stats)
        except errors.CellbedError as exc:
            aborted = isinstance(exc, errors.MigrationFailed) and exc.aborted
            rec.outcome = npb.MIGRATION_OUTCOME_ABORTED if aborted else npb.MIGRATION_OUTCOME_FAILED
            rec.detail = str(exc)
            rec.wall_ms = (self.clock.monotonic() - t0) * 1000
            rec.timeout_action = getattr(exc, "timeout_action", "")
        finally:
            self.migrating.pop(name, None)
        try:
            fin = await self.transport.request(dest, "NodeAgent/FinishIncoming", npb.FinishIncomingRequest(
                migration_id=mid, name=name, migrated=migrated, heartbeat_before=before.heartbeat,
                boot_id=before.boot_id), timeout=self.cfg.verify_timeout_s + 10)
        except errors.CellbedError as exc:
            fin = npb.FinishIncomingResponse(verified=False, detail=f"destination unreachable: {exc}")
        if migrated:
            self.vms.pop(name, None)
            await self._drop_channel(name)
            rec.heartbeat_after, rec.integrity_pages, rec.integrity_bad = (
                fin.heartbeat_after, fin.integrity_pages, fin.integrity_bad)
            if fin.verified:
                rec.outcome = npb.MIGRATION_OUTCOME_SUCCEEDED
                rec.detail = fin.detail
            else:
                rec.outcome = npb.MIGRATION_OUTCOME_VERIFICATION_FAILED
                rec.detail = f"libvirt reported success but verification failed: {fin.detail}"
        else:
            e.migrating_out = ""
            await self._confirm_still_here(name, rec)
        self._save_record(rec)
        level = logging.INFO if rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED else logging.WARNING
        log.log(level, "migration %s of %s %s->%s: %s in %.0f ms, downtime %.0f ms, %d B; %s", mid, name,
                self.cfg.host, dest, npb.MigrationOutcome.Name(rec.outcome), rec.wall_ms, rec.downtime_ms,
                rec.data_total_bytes, rec.detail)
        self.emit(npb.EVENT_KIND_MIGRATION_FINISHED, name, npb.MigrationOutcome.Name(rec.outcome), record=rec)
        return rec

    async def _confirm_still_here(self, name: str, rec: npb.MigrationRecord) -> None:
        try:
            state, reason = await self.hv.domain_state(name)
            rec.detail += f"; VM still on source ({state.value}, {reason})"
        except errors.NotFound:
            rec.detail += "; VM NOT found on source after failed migration"
            log.error("VM %s not on source after failed migration %s", name, rec.id)

    def _progress(self, mid: str, name: str, p: JobProgress) -> None:
        self.emit(npb.EVENT_KIND_MIGRATION_PROGRESS, name, progress=npb.MigrationProgress(
            migration_id=mid, vm=name, elapsed_ms=p.elapsed_ms, data_processed_bytes=p.data_processed,
            data_remaining_bytes=p.data_remaining, data_total_bytes=p.data_total,
            memory_iteration=p.memory_iteration, memory_dirty_rate=p.memory_dirty_rate,
            memory_bps=p.memory_bps, phase=p.phase))

    async def abort_migration(self, name: str) -> None:
        self._get(name)
        if name not in self.migrating:
            raise errors.FailedPrecondition(f"VM {name} has no outgoing migration to abort")
        await self.hv.abort_migration(name)

    # --- migration: target side ----------------------------------------------------------
    async def reserve(self, spec: VmSpec, src: str, mid: str, force: bool, cpu_used: float = 0.0,
                      mem_used: float = 0.0, check: Callable[[HostView], None] | None = None) -> None:
        """Admission: reserve *spec*'s resources for incoming migration *mid* (PrepareIncoming, or
        a SAN's TaskMigrationProcessRequest). *check(view)* (the SAN's final check, a policy over
        this host's view) runs inside the admission lock, so that check and reservation are one
        step: the first request wins."""
        spec.validate(self.limits)
        if not mid:
            raise errors.InvalidArgument("migration_id must be set")
        async with self._lock:
            if check is not None:
                check(self._view)
            if spec.name in self.vms:
                raise errors.FailedPrecondition(f"VM {spec.name} already runs on {self.cfg.host}")
            self._admit(spec, force=force)
            ttl = self.cfg.migration_timeout_s * 2 + 120
            if mid in self.incoming:
                raise errors.AlreadyExists(f"migration {mid} already holds a reservation on {self.cfg.host}")
            self.incoming[mid] = Reservation(spec, src, self.clock.monotonic() + ttl, cpu_used, mem_used)

    def release(self, mid: str) -> None:
        """Admission: give back the reservation of migration *mid* (it did not happen)."""
        self.incoming.pop(mid, None)

    async def finish_incoming(self, mid: str, name: str, migrated: bool, hb_before: int,
                              boot_id: str) -> Verification:
        r = self.incoming.get(mid)
        if r is None or r.spec.name != name:
            raise errors.NotFound(f"no incoming migration {mid!r} of VM {name!r} on {self.cfg.host}")
        if not migrated:
            self.release(mid)
            return Verification(False, "migration did not happen; reservation released")
        try:
            v = await self._verify(name, hb_before, boot_id)
        finally:
            self.incoming.pop(mid, None)
        try:  # adopt the VM if, and only if, its domain really is here (even when it failed checks)
            state, reason = await self.hv.domain_state(name)
            self.vms[name] = VmEntry(spec=r.spec, state=state, reason=reason, cpu_used_cores=r.cpu_used,
                                     rss_mib=r.mem_used)
        except errors.NotFound:
            pass
        log.log(logging.INFO if v.verified else logging.ERROR, "incoming %s (%s from %s): %s",
                name, mid, r.src, v.detail)
        return v

    async def _verify(self, name: str, hb_before: int, boot_id: str) -> Verification:
        """A migration succeeds only if the guest is alive and intact here: not panicked,
        same boot, heartbeat advanced, every working-set page holding its last generation."""
        try:
            state, reason = await self.hv.domain_state(name)
        except errors.NotFound:
            return Verification(False, f"domain {name} is not on {self.cfg.host}")
        if state is DomState.CRASHED:
            return Verification(False, f"guest {state.value} ({reason}) on destination")
        try:
            st = await self._wait_guest(name, self.cfg.verify_timeout_s, after_heartbeat=hb_before)
        except errors.DeadlineExceeded as exc:
            state, reason = await self.hv.domain_state(name)
            return Verification(False, f"{exc}; domain {state.value} ({reason})")
        if boot_id and st.boot_id != boot_id:
            return Verification(False, f"guest rebooted: boot id {st.boot_id} != {boot_id}", st.heartbeat)
        try:
            chk = await self.channel(name).check(timeout_s=10.0)
        except GuestChannelError as exc:
            return Verification(False, f"integrity check did not answer: {exc}", st.heartbeat)
        state, reason = await self.hv.domain_state(name)
        if state is DomState.CRASHED:
            return Verification(False, f"guest {reason} during verification", st.heartbeat, chk.pages, chk.bad)
        if not chk.ok:
            return Verification(False, f"memory integrity broken: {chk.bad} of {chk.pages} pages bad "
                                       f"(first {chk.first_bad})", st.heartbeat, chk.pages, chk.bad)
        return Verification(True, f"heartbeat {hb_before} -> {st.heartbeat}, {chk.pages} pages intact",
                            st.heartbeat, chk.pages, chk.bad)
