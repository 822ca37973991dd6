"""The node agent's live migration: the source side (admission at the destination, migrateToURI3 through the backend, progress, the timeout policy, the record) and the destination side (reservation, verification of the guest, adoption)."""
from __future__ import annotations

import asyncio
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
from cellbed.daemon.journal import spec_dict
from cellbed.daemon.migration_record import fill_stats, options_pb
from cellbed.daemon.inventory import Reservation, Verification, VmEntry
from cellbed.daemon.libvirt_tls import migration_uri_template, tls_by_default
from cellbed.daemon.journal import Incoming, Outgoing, record_dict

log = logging.getLogger(__name__)


class MigrationMixin:
    """Part of NodeAgent (which owns the state these methods use)."""

    # --- migration: source side -----------------------------------------------------------
    async def migrate(self, name: str, dest: str, opts: MigrationOptions,
                      prepared_mid: str = "", forced: bool = False) -> npb.MigrationRecord:
        """Live-migrate *name* to *dest*. The destination admits it with PrepareIncoming, unless
        *prepared_mid* names a reservation it already holds (SAN TaskMigrationProcessRequest).
        Every step is journaled before it is taken (daemon/journal.py); the one final record is
        written when the guest is verified on one end, here or by reconciliation after a crash."""
        try:
            opts, e, tmpl, address, before = await self._migration_checks(name, dest, opts)
        except errors.CellbedError:
            if prepared_mid:      # the SAN's target holds a reservation for a migration that will not run
                await self._release_remote(dest, prepared_mid, name)
            raise
        mid = prepared_mid or uuid.uuid4().hex[:12]
        peer_uri = tmpl.format(address=address, host=dest)
        rec = npb.MigrationRecord(id=mid, vm=name, src=self.cfg.host, dst=dest, start_unix_s=self.clock.now(),
                                 options=options_pb(opts), heartbeat_before=before.heartbeat,
                                 mem_mib=e.spec.mem_mib, wss_mib=e.spec.wss_mib,
                                 dirty_mib_s=-1 if math.isinf(e.spec.dirty_mib_s) else e.spec.dirty_mib_s,
                                 forced=forced, tls=opts.tls, guest_dirty_mib_s=before.dirty_actual_mib_s,
                                 sampled_dirty_mib_s=e.dirty_rate_mib_s)
        e.migrating_out = mid
        self.migrating[name] = mid
        self._settling.add(mid)
        try:
            return await self._migrate_journaled(e, rec, opts, peer_uri, before, prepared_mid)
        finally:
            self._settling.discard(mid)
            self.migrating.pop(name, None)

    async def _migration_checks(self, name: str, dest: str, opts: MigrationOptions):
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
        return opts, e, tmpl, address, before

    async def _migrate_journaled(self, e, rec: npb.MigrationRecord, opts: MigrationOptions, peer_uri: str,
                                 before, prepared_mid: str) -> npb.MigrationRecord:
        mid, name, dest = rec.id, rec.vm, rec.dst
        try:
            if self.journal.enabled:   # the intent, before anything happens on either end
                self.journal.intent(Outgoing(mid=mid, vm=name, uuid=await self.hv.domain_uuid(name), peer=dest,
                                             peer_uri=peer_uri, record=record_dict(rec), boot_id=before.boot_id))
            if not prepared_mid:
                await self.transport.request(dest, "NodeAgent/PrepareIncoming", npb.PrepareIncomingRequest(
                    spec=spec_pb(e.spec), src_host=self.cfg.host, migration_id=mid,
                    cpu_used_cores=e.cpu_used_cores, mem_used_mib=e.rss_mib), timeout=10.0)
        except errors.CellbedError as exc:
            e.migrating_out = ""
            rec.outcome, rec.detail = npb.MIGRATION_OUTCOME_REFUSED, str(exc)
            if prepared_mid or isinstance(exc, (errors.Unavailable, errors.DeadlineExceeded)):
                await self._release_remote(dest, mid, name)   # it may hold a reservation whose answer was lost
            self._final(rec)
            raise
        self.emit(npb.EVENT_KIND_MIGRATION_STARTED, name, f"{mid} -> {dest}")
        t0 = self.clock.monotonic()
        try:
            stats = await self.hv.migrate(name, peer_uri, opts, lambda p: self._progress(mid, name, p))
        except errors.CellbedError as exc:
            aborted = isinstance(exc, errors.MigrationFailed) and exc.aborted
            rec.outcome = npb.MIGRATION_OUTCOME_ABORTED if aborted else npb.MIGRATION_OUTCOME_FAILED
            rec.detail = str(exc)
            rec.wall_ms = (self.clock.monotonic() - t0) * 1000
            rec.timeout_action = getattr(exc, "timeout_action", "")
            self.journal.step(mid, "failed", record=record_dict(rec), aborted=aborted)
            if not self.journal.enabled:      # a model cell: the backend's word is the truth
                e.migrating_out = ""
                await self._confirm_still_here(name, rec)
                await self._release_remote(dest, mid, name)
                self._final(rec)
                return rec
            return await self._settle_now(mid, rec)
        fill_stats(rec, stats)
        self.journal.step(mid, "transferred", record=record_dict(rec))
        return await self._conclude_on_dest(mid, rec, before.heartbeat, before.boot_id, stale_here=False,
                                            budget_s=self.cfg.verify_timeout_s + 30)

    async def _settle_now(self, mid: str, rec: npb.MigrationRecord) -> npb.MigrationRecord:
        """After libvirt reported a failure: look where the guest is (daemon/reconcile.py)."""
        done = await self.reconcile_one(mid, budget_s=self.cfg.verify_timeout_s + 30)
        if done is None:
            raise errors.MigrationUnresolved(
                f"migration {mid} of {rec.vm}: {rec.detail}; where the guest is could not be confirmed yet "
                f"({self.unresolved.get(mid, '')}); its record is written when it is")
        return done

    async def _conclude_on_dest(self, mid: str, rec: npb.MigrationRecord, hb_before: int, boot_id: str,
                                stale_here: bool, budget_s: float) -> npb.MigrationRecord:
        """The guest left: the destination verifies it (FinishIncoming, idempotent), then the
        record is final. Raises MigrationUnresolved while the destination daemon does not answer."""
        name, dest = rec.vm, rec.dst
        self.handing_over[name] = (mid, dest)     # until the destination has it: "ask again", not "not here"
        self.vms.pop(name, None)
        self.departed[name] = self.clock.monotonic()
        try:
            await self._drop_channel(name)
            if stale_here:        # a leftover definition or paused copy: a source never keeps one
                try:
                    await self.hv.stop(name)
                except errors.NotFound:
                    pass
            fin = await self._finish_rpc(dest, mid, name, True, hb_before, boot_id,
                                         budget_s if self.journal.enabled else 0.0)
        except errors.NotFound as e:        # the destination knows nothing of it: keep asking, never guess
            if not self.journal.enabled:
                raise
            self.unresolved[mid] = f"{name} -> {dest}: transferred; {e}"
            raise errors.MigrationUnresolved(f"migration {mid}: {e}; the record is written once it is verified") from e
        finally:
            self.handing_over.pop(name, None)
        if fin is None and not self.journal.enabled:   # a model cell: no reconciliation to wait for
            fin = npb.FinishIncomingResponse(verified=False, detail="destination unreachable")
        if fin is None:
            why = f"{name} -> {dest}: transferred; destination daemon does not answer, verification pending"
            self.unresolved[mid] = why
            raise errors.MigrationUnresolved(f"migration {mid}: {why}; the record is written once it answers")
        rec.heartbeat_after, rec.integrity_pages, rec.integrity_bad = (
            fin.heartbeat_after, fin.integrity_pages, fin.integrity_bad)
        if fin.verified:
            rec.outcome = npb.MIGRATION_OUTCOME_SUCCEEDED
            rec.detail = fin.detail if not rec.reconciled else f"{rec.detail}; {fin.detail}"
        else:
            rec.outcome = npb.MIGRATION_OUTCOME_VERIFICATION_FAILED
            rec.detail = f"libvirt moved the guest but verification failed: {fin.detail}"
        self._final(rec)
        return rec

    async def _finish_rpc(self, dest: str, mid: str, name: str, migrated: bool, hb: int, boot_id: str,
                          budget_s: float) -> npb.FinishIncomingResponse | None:
        """FinishIncoming, retried while the destination does not answer, for up to *budget_s*."""
        deadline = self.clock.monotonic() + budget_s
        while True:
            try:
                return await self.transport.request(dest, "NodeAgent/FinishIncoming", npb.FinishIncomingRequest(
                    migration_id=mid, name=name, migrated=migrated, heartbeat_before=hb, boot_id=boot_id),
                    timeout=self.cfg.verify_timeout_s + 10)
            except (errors.Unavailable, errors.DeadlineExceeded) as exc:
                if self.clock.monotonic() >= deadline:
                    log.warning("FinishIncoming %s on %s: %s", mid, dest, exc)
                    return None
            await self.clock.sleep(1.0)

    async def _release_remote(self, dest: str, mid: str, name: str) -> None:
        """Tell the destination to drop its reservation (best effort: it releases an orphaned
        lease itself once it sees the VM back on its source)."""
        try:
            await self.transport.request(dest, "NodeAgent/FinishIncoming", npb.FinishIncomingRequest(
                migration_id=mid, name=name, migrated=False), timeout=5.0)
        except errors.CellbedError as exc:
            log.info("releasing reservation %s on %s: %s", mid, dest, exc)

    def _final(self, rec: npb.MigrationRecord) -> None:
        """The one final record: saved (fsync), then the journal entry closed, then announced."""
        self._save_record(rec)
        self.journal.close(rec.id, npb.MigrationOutcome.Name(rec.outcome))
        self.unresolved.pop(rec.id, None)
        level = logging.INFO if rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED else logging.WARNING
        log.log(level, "migration %s of %s %s->%s: %s in %.0f ms, downtime %.0f ms, %d B; %s%s", rec.id, rec.vm,
                rec.src, rec.dst, npb.MigrationOutcome.Name(rec.outcome), rec.wall_ms, rec.downtime_ms,
                rec.data_total_bytes, rec.detail, f"; hint: {rec.hint}" if rec.hint else "")
        self.emit(npb.EVENT_KIND_MIGRATION_FINISHED, rec.vm, npb.MigrationOutcome.Name(rec.outcome), record=rec)

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
        a SAN's TaskMigrationProcessRequest) as a lease owned by *src*. *check(view)* (the SAN's
        final check, a policy over this host's view) runs inside the admission lock, so that
        check and reservation are one step: the first request wins."""
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
            if mid in self.incoming or mid in self.journal.results:
                raise errors.AlreadyExists(f"migration {mid} already holds a reservation on {self.cfg.host}")
            r = Reservation(spec, src, self.clock.monotonic() + ttl, cpu_used, mem_used, self.clock.now() + ttl,
                            self.clock.monotonic())
            if self.journal.enabled:
                self.journal.reserve(Incoming(mid=mid, spec=spec_dict(spec), src=src, expires_unix_s=r.expires_unix_s,
                                              cpu_used=cpu_used, mem_used=mem_used))
            self.incoming[mid] = r

    def arriving(self) -> dict[str, tuple[str, Reservation]]:
        """VMs whose source has let them go and that this host is verifying (FinishIncoming
        under way): name -> (migration id, reservation). Listed as migrating in, so that a VM is
        listed by one host at every step of its hand-over, not by none until it is verified."""
        return {r.spec.name: (mid, r) for mid, r in self.incoming.items() if mid in self._finishing}

    def release(self, mid: str, why: str = "released") -> None:
        """Admission: give back the reservation of migration *mid* (it did not happen)."""
        if self.incoming.pop(mid, None) is not None:
            self.journal.finish(mid, "released", {"verified": False, "detail": why})

    async def finish_incoming(self, mid: str, name: str, migrated: bool, hb_before: int,
                              boot_id: str) -> Verification:
        """The end of an incoming migration, as its source saw it. Idempotent: asked again (the
        source retried, or reconciled after a crash) it gives the first answer."""
        done = self.journal.results.get(mid)
        if done is not None:
            return Verification(**done)
        running = self._finishing.get(mid)
        if running is not None:
            return await asyncio.shield(running)
        r = self.incoming.get(mid)
        if r is None or r.spec.name != name:
            raise errors.NotFound(f"no incoming migration {mid!r} of VM {name!r} on {self.cfg.host}")
        if not migrated:
            try:
                state, reason = await self.hv.domain_state(name)
            except errors.NotFound:
                state, reason = None, ""
            if state is DomState.RUNNING:
                raise errors.FailedPrecondition(f"VM {name} runs on {self.cfg.host} ({reason}): migration {mid} did "
                                                "happen; not releasing its reservation")
            self.release(mid, "migration did not happen; reservation released")
            return Verification(False, "migration did not happen; reservation released")
        fut = self._finishing[mid] = asyncio.ensure_future(self._verify_and_adopt(mid, r, name, hb_before, boot_id))
        try:
            return await asyncio.shield(fut)
        finally:
            if fut.done():
                self._finishing.pop(mid, None)

    async def _verify_and_adopt(self, mid: str, r: Reservation, name: str, hb_before: int,
                                boot_id: str, how: str = "verified") -> Verification:
        try:
            v = await self._verify(name, hb_before, boot_id)
        except errors.CellbedError as e:      # e.g. libvirtd restarting: the lease stays, the source asks again
            raise errors.Unavailable(f"verifying {name} on {self.cfg.host}: {e}; ask again") from e
        try:  # adopt the VM if, and only if, its domain really is here (even when it failed checks)
            state, reason = await self.hv.domain_state(name)
        except errors.NotFound:
            state = None
        except errors.CellbedError as e:      # the lease stays until this host can tell
            raise errors.Unavailable(f"adopting {name} on {self.cfg.host}: {e}; ask again") from e
        # lease to VM with no await between: the VM is never in neither (nor in both)
        self.incoming.pop(mid, None)
        if state is not None:
            self.vms[name] = VmEntry(spec=r.spec, state=state, reason=reason, cpu_used_cores=r.cpu_used,
                                     rss_mib=r.mem_used, known_since=self.clock.monotonic())
        self.journal.finish(mid, how, dataclasses.asdict(v))
        self._finishing.pop(mid, None)
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
