"""The libvirt hypervisor backend: the only module in Cellbed that imports libvirt.

Every blocking libvirt call runs in a dedicated thread pool, so the asyncio daemon stays
responsive; libvirt's own events (job completed, lifecycle) arrive on the asyncio loop
through libvirtaio, which is registered before any connection is opened. libvirt errors
are classified into the project's hierarchy in one place: classify() from libvirt_codes.py, the
table of what libvirt's error, state and reason codes mean, by name (bound here to libvirt's
numbers).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import os
import time
import xml.etree.ElementTree as ET
from typing import Any, Callable

import libvirt
import libvirtaio

from cellbed.domain import errors
from cellbed.daemon import domxml
from cellbed.domain.vm import (DomainSample, DomState, MigrationOptions, MigrationStats,
                               ProgressCallback, VmSpec, version_text)
from cellbed.policy.migration.timeout import Action, JobWatch, needs_postcopy_flag
from cellbed.daemon.job_watch import watch_job
from cellbed.daemon.libvirt_codes import Codes

log = logging.getLogger(__name__)

_aio_registered = False
RETRY_MARK = "retry-with-auto-converge"  # internal: first attempt aborted, retry follows

# libvirt's default error handler prints every error on stderr; errors are raised anyway.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
_CODES = Codes(libvirt)                 # libvirt's numbers -> the project's errors and states
NOT_FOUND, classify, state_of = _CODES.not_found, _CODES.classify, _CODES.state_of


def register_event_loop() -> None:
    """Register libvirtaio on the running asyncio loop; must precede every libvirt.open."""
    global _aio_registered
    if not _aio_registered:
        libvirtaio.virEventRegisterAsyncIOImpl(loop=asyncio.get_running_loop())
        _aio_registered = True


class MetadataUnreadable(Exception):
    """libvirt listed a domain but could not say now whether it carries Cellbed metadata."""


class LibvirtBackend:
    """Hypervisor backend over one libvirt connection (normally qemu:///system)."""

    def __init__(self, uri: str, *, accel: str, image: domxml.GuestImage,
                 layout: domxml.DomainLayout = domxml.DomainLayout(), cpu_model: str | None = None,
                 measure_dirty_rate: bool = True, progress_period_s: float = 0.5,
                 on_lifecycle: Callable[[str, DomState, str], None] | None = None) -> None:
        self.uri, self.accel, self.image, self.layout, self.cpu_model = uri, accel, image, layout, cpu_model
        self.measure_dirty_rate, self.progress_period_s = measure_dirty_rate, progress_period_s
        self.on_lifecycle = on_lifecycle
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="libvirt")
        self._conn: libvirt.virConnect | None = None
        self._spec_cache: dict[str, VmSpec | None] = {}   # by domain UUID
        self._completed: dict[str, asyncio.Future] = {}   # domain name -> JOB_COMPLETED params
        self._watches: dict[str, JobWatch] = {}           # domain name -> its running migration's watch
        self._callbacks: list[int] = []
        self._versions = ("", "")

    # --- plumbing ------------------------------------------------------------------
    async def _call(self, what: str, fn: Callable, *args: Any, to_the_end: bool = False) -> Any:
        """*fn* in the pool. *to_the_end*: a cancelled caller still waits for the thread, which
        runs on (a start whose domain appeared after its undo outlived it, adopted as a stray)."""
        loop = asyncio.get_running_loop()
        try:
            fut = loop.run_in_executor(self._pool, functools.partial(fn, *args))
            if not to_the_end:
                return await fut
            try:
                return await asyncio.shield(fut)
            except asyncio.CancelledError:
                await asyncio.wait([fut])
                fut.cancelled() or fut.exception()       # retrieved: the caller is gone
                raise
        except libvirt.libvirtError as e:
            err = classify(e, what)
            if isinstance(err, errors.HypervisorError) and not self._alive():
                err = errors.Unavailable(f"{what}: libvirtd connection lost ({e.get_error_message()})")
            raise err from e

    def _alive(self) -> bool:
        with contextlib.suppress(libvirt.libvirtError):
            return self._conn is not None and bool(self._conn.isAlive())
        return False

    @property
    def conn(self) -> libvirt.virConnect:
        if self._conn is None:
            raise errors.Unavailable("libvirt connection is not open")
        return self._conn

    async def open(self) -> None:
        register_event_loop()
        self._conn = await self._call(f"connect {self.uri}", libvirt.open, self.uri)
        self.conn.setKeepAlive(5, 3)
        self._callbacks.append(self.conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_JOB_COMPLETED, self._on_job_completed, None))
        self._callbacks.append(self.conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None))
        self._versions = (version_text(await self._call("getVersion", self.conn.getVersion)),
                          version_text(await self._call("getLibVersion", self.conn.getLibVersion)))
        for d in (self.layout.channel_dir, self.layout.console_dir):
            os.makedirs(d, exist_ok=True)
        log.info("libvirt %s open: QEMU %s, libvirt %s, accel %s", self.uri, *self._versions, self.accel)

    async def ensure_open(self) -> None:
        """Reopen the connection if libvirtd went away (killed, restarted); Unavailable while it is down."""
        conn = self._conn
        if self._alive():
            return
        if conn is not None:
            log.warning("libvirt connection %s lost; reconnecting", self.uri)
            self._callbacks.clear()
            self._conn = None
            with contextlib.suppress(libvirt.libvirtError):
                conn.close()
        await self.open()

    async def close(self) -> None:
        if self._conn is not None:
            for cb in self._callbacks:
                with contextlib.suppress(libvirt.libvirtError):
                    self._conn.domainEventDeregisterAny(cb)
            self._callbacks.clear()
            conn, self._conn = self._conn, None
            await asyncio.get_running_loop().run_in_executor(self._pool, conn.close)
        self._pool.shutdown(wait=False)

    def versions(self) -> tuple[str, str]:
        return self._versions

    def channel_path(self, name: str) -> str:
        return self.layout.channel_path(name)

    # --- events (run on the asyncio loop via libvirtaio) -----------------------------
    def _on_job_completed(self, _conn, dom, params, _opaque) -> None:
        fut = self._completed.get(dom.name())
        if fut is not None and not fut.done():
            fut.set_result(dict(params))

    def _on_lifecycle(self, _conn, dom, event, detail, _opaque) -> None:
        if self.on_lifecycle is None:
            return
        if event == libvirt.VIR_DOMAIN_EVENT_CRASHED:
            self.on_lifecycle(dom.name(), DomState.CRASHED,
                              "panicked" if detail == libvirt.VIR_DOMAIN_EVENT_CRASHED_PANICKED else "crashed")
        elif event == libvirt.VIR_DOMAIN_EVENT_STOPPED:
            self.on_lifecycle(dom.name(), DomState.SHUTOFF, f"stopped detail {detail}")
        elif (event == libvirt.VIR_DOMAIN_EVENT_SUSPENDED
              and detail == getattr(libvirt, "VIR_DOMAIN_EVENT_SUSPENDED_PANICKED", -1)):
            self.on_lifecycle(dom.name(), DomState.CRASHED, "panicked")

    # --- inventory and measurement ---------------------------------------------------
    def _spec_of(self, dom: libvirt.virDomain) -> VmSpec | None:
        """The Cellbed spec in *dom*'s metadata; None if it has none (not ours). Only that answer
        is cached: an error that is not "no such metadata" (libvirtd restarting, a connection
        closing) raises MetadataUnreadable and is asked again at the next listing. (Cached as "not
        ours", a chaos run's VM that arrived while libvirtd restarted was never seen again.)"""
        uuid = dom.UUIDString()
        if uuid not in self._spec_cache:
            try:
                xml = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, domxml.METADATA_NS, 0)
            except libvirt.libvirtError as e:
                code = e.get_error_code()
                if code in NOT_FOUND:
                    raise
                if code != libvirt.VIR_ERR_NO_DOMAIN_METADATA:
                    raise MetadataUnreadable(f"metadata of {dom.name()}: {e}") from e
                self._spec_cache[uuid] = None  # not ours: no Cellbed metadata
            else:
                try:
                    self._spec_cache[uuid] = domxml.spec_from_metadata(xml)
                except (ValueError, TypeError, ET.ParseError):
                    log.warning("domain %s has unreadable Cellbed metadata; ignoring it", dom.name())
                    self._spec_cache[uuid] = None
        return self._spec_cache[uuid]

    def _list_blocking(self) -> list[DomainSample]:
        what = (libvirt.VIR_DOMAIN_STATS_STATE | libvirt.VIR_DOMAIN_STATS_CPU_TOTAL
                | libvirt.VIR_DOMAIN_STATS_BALLOON | libvirt.VIR_DOMAIN_STATS_DIRTYRATE)
        out = []
        for dom, st in self.conn.getAllDomainStats(what, 0):
            unreadable = False
            try:  # a domain may vanish between listing and inspection: skip it
                name = dom.name()
                spec = self._spec_of(dom)
            except MetadataUnreadable as e:
                log.warning("%s; listed as present, read again next time", e)
                spec, unreadable = None, True
            except libvirt.libvirtError as e:
                if e.get_error_code() in NOT_FOUND:
                    continue
                raise
            state, reason = state_of(st.get("state.state", 0), st.get("state.reason", 0))
            dirty = -1.0
            if st.get("dirtyrate.calc_status") == libvirt.VIR_DOMAIN_DIRTYRATE_MEASURED:
                dirty = float(st.get("dirtyrate.megabytes_per_second", -1))
            incoming = state is DomState.PAUSED and reason in ("migration", "starting up")
            out.append(DomainSample(name=name, state=state, reason=reason, spec=spec,
                                    cpu_time_ns=int(st.get("cpu.time", 0)),
                                    rss_bytes=int(st.get("balloon.rss", 0)) * 1024,
                                    dirty_rate_mib_s=dirty, incoming=incoming, unreadable=unreadable))
            if self.measure_dirty_rate and spec is not None and state is DomState.RUNNING:
                with contextlib.suppress(libvirt.libvirtError):
                    dom.startDirtyRateCalc(1, 0)
        return out

    async def list(self) -> list[DomainSample]:
        return await self._call("list domains", self._list_blocking)

    async def domain_state(self, name: str) -> tuple[DomState, str]:
        def blocking():
            return state_of(*self.conn.lookupByName(name).state())
        return await self._call(f"state of {name}", blocking)

    async def domain_uuid(self, name: str) -> str:
        return await self._call(f"UUID of {name}", lambda: self.conn.lookupByName(name).UUIDString())
    async def locate(self, uuid: str, uri: str = "") -> tuple[DomState | None, str, bool]:
        """Where the domain with *uuid* is, on this libvirt or (*uri*) another host's: (state or
        None if absent, reason, an outgoing job still runs). Unavailable if that libvirtd is down."""
        def blocking():
            conn = libvirt.open(uri) if uri else self.conn
            try:
                dom = conn.lookupByUUIDString(uuid)
                st, why = state_of(*dom.state())
                job = not uri and st is not DomState.SHUTOFF and dom.jobInfo()[0] in (
                    libvirt.VIR_DOMAIN_JOB_BOUNDED, libvirt.VIR_DOMAIN_JOB_UNBOUNDED)
                return st, why, job
            finally:
                if uri:
                    conn.close()
        try:
            return await self._call(f"locate {uuid} on {uri or self.uri}", blocking)
        except errors.NotFound:
            return None, "no such domain", False
        except errors.CellbedError as e:
            raise errors.Unavailable(str(e)) from e

    async def destroy_on(self, uuid: str, uri: str) -> None:
        """Destroy and undefine the domain with *uuid* on another host's libvirt (*uri*): a copy
        left running there by a migration whose source kept the guest. Absent already is done."""
        def blocking():
            conn = libvirt.open(uri)
            try:
                dom = conn.lookupByUUIDString(uuid)
                if dom.isActive():
                    dom.destroy()
                if dom.isPersistent():
                    dom.undefine()
            finally:
                conn.close()
        try:
            await self._call(f"destroy {uuid} on {uri}", blocking)
        except errors.NotFound:
            pass

    async def postcopy_resume(self, name: str, dest_uri: str, opts: MigrationOptions) -> None:
        """Resume an interrupted post-copy migration (VIR_MIGRATE_POSTCOPY_RESUME)."""
        flags, params, _ = self._flags(dataclasses.replace(opts, postcopy=True))
        flags |= libvirt.VIR_MIGRATE_POSTCOPY | libvirt.VIR_MIGRATE_POSTCOPY_RESUME
        await self._call(f"post-copy resume of {name}",
                         lambda: self.conn.lookupByName(name).migrateToURI3(dest_uri, params, flags))

    # --- lifecycle --------------------------------------------------------------------
    async def start(self, spec: VmSpec) -> None:
        xml = domxml.domain_xml(spec, accel=self.accel, image=self.image, layout=self.layout,
                                cpu_model=self.cpu_model)

        def blocking():
            dom = self.conn.defineXML(xml)
            try:
                dom.create()
            except libvirt.libvirtError:
                with contextlib.suppress(libvirt.libvirtError):
                    dom.undefine()  # leave nothing half-made behind
                raise
            self._spec_cache[dom.UUIDString()] = spec
        try:
            await self._call(f"start {spec.name}", blocking, to_the_end=True)
        except errors.HypervisorError as e:
            raise errors.HypervisorError(f"{e} (domain XML kernel {self.image.kernel})") from e

    async def stop(self, name: str) -> None:
        def blocking():
            dom = self.conn.lookupByName(name)
            if dom.isActive():
                dom.destroy()
            if dom.isPersistent():
                dom.undefine()
            self._spec_cache.pop(dom.UUIDString(), None)
        await self._call(f"stop {name}", blocking)

    async def update_spec(self, spec: VmSpec) -> None:
        def blocking():
            dom = self.conn.lookupByName(spec.name)
            flags = libvirt.VIR_DOMAIN_AFFECT_LIVE
            if dom.isPersistent():
                flags |= libvirt.VIR_DOMAIN_AFFECT_CONFIG
            dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, domxml.metadata_xml(spec),
                            domxml.METADATA_PREFIX, domxml.METADATA_NS, flags)
            self._spec_cache[dom.UUIDString()] = spec
        await self._call(f"update metadata of {spec.name}", blocking)

    async def pause(self, name: str) -> None:
        await self._call(f"pause {name}", lambda: self.conn.lookupByName(name).suspend())

    async def resume(self, name: str) -> None:
        await self._call(f"resume {name}", lambda: self.conn.lookupByName(name).resume())

    # --- migration --------------------------------------------------------------------
    async def abort_migration(self, name: str) -> None:
        await self._call(f"abort job of {name}", lambda: self.conn.lookupByName(name).abortJob())
        self._watches.get(name, JobWatch()).abort_sent = True   # the job's failure is this abort, as the policy's

    async def migrate(self, name: str, dest_uri: str, opts: MigrationOptions,
                      on_progress: ProgressCallback | None = None) -> MigrationStats:
        """Live-migrate *name* to the libvirtd at *dest_uri* (peer to peer). Raises
        MigrationFailed when the job fails or is aborted; the domain then still runs here."""
        stats = await self._migrate_once(name, dest_uri, opts, on_progress)
        if stats.timeout_action == RETRY_MARK:
            first = stats
            retry = dataclasses.replace(opts, auto_converge=True)
            log.warning("migration of %s timed out (%s); retrying with auto-converge", name, first.source)
            stats = await self._migrate_once(name, dest_uri, retry, on_progress)
            stats.timeout_action = f"aborted after {first.wall_ms:.0f} ms, retried with auto-converge"
        return stats

    @staticmethod
    def _flags(opts: MigrationOptions) -> tuple[int, dict[str, Any], list[str]]:   # and names for the log
        flags = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
                 | libvirt.VIR_MIGRATE_PERSIST_DEST | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE)
        names = ["live", "p2p", "persist-dest", "undefine-source"]
        par = opts.parallel_connections > 1
        for on, flag, name in ((opts.auto_converge, libvirt.VIR_MIGRATE_AUTO_CONVERGE, "auto-converge"),
                               (needs_postcopy_flag(opts), libvirt.VIR_MIGRATE_POSTCOPY, "postcopy"),
                               (par, libvirt.VIR_MIGRATE_PARALLEL, f"parallel={opts.parallel_connections}"),
                               (opts.compression, libvirt.VIR_MIGRATE_COMPRESSED, "compressed"),
                               (bool(opts.tls), libvirt.VIR_MIGRATE_TLS, "tls")):
            if on:
                flags |= flag
                names.append(name)
        params: dict[str, Any] = {k: v for k, v, on in (
            (libvirt.VIR_MIGRATE_PARAM_BANDWIDTH, int(opts.bandwidth_mib_s), opts.bandwidth_mib_s),
            (libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS, int(opts.parallel_connections), par),
            (libvirt.VIR_MIGRATE_PARAM_COMPRESSION, "zlib" if par else "xbzrle", opts.compression)) if on}
        names += [f"bandwidth={opts.bandwidth_mib_s}MiB/s"] * bool(opts.bandwidth_mib_s)
        names += [f"max-downtime={opts.max_downtime_ms}ms"] * bool(opts.max_downtime_ms)
        return flags, params, names

    async def _migrate_once(self, name: str, dest_uri: str, opts: MigrationOptions,
                            on_progress: ProgressCallback | None) -> MigrationStats:
        dom = await self._call(f"lookup {name}", self.conn.lookupByName, name)
        flags, params, names = self._flags(opts)
        if opts.max_downtime_ms:
            try:
                await self._call("set max downtime", dom.migrateSetMaxDowntime, int(opts.max_downtime_ms), 0)
            except errors.CellbedError as e:
                log.debug("setting max downtime before the job failed (%s); will set it during", e)
        log.info("migrate %s -> %s flags=%s", name, dest_uri, ",".join(names))
        loop = asyncio.get_running_loop()
        completed: asyncio.Future = loop.create_future()
        self._completed[name] = completed
        t0 = time.monotonic()
        job = loop.run_in_executor(self._pool, dom.migrateToURI3, dest_uri, params, flags)
        w = self._watches[name] = JobWatch()
        try:
            await self._watch(name, dom, job, opts, on_progress, t0, w)
            try:
                await job
            except libvirt.libvirtError as e:
                err = classify(e, f"migrate {name} to {dest_uri}")
                if w.retry_auto_converge:
                    return MigrationStats(wall_ms=(time.monotonic() - t0) * 1000,
                                          timeout_action=RETRY_MARK, source=str(err))
                raise errors.MigrationFailed(
                    str(err), aborted=w.ended_by_abort(e.get_error_code() == libvirt.VIR_ERR_OPERATION_ABORTED),
                    timeout_action=w.action_taken) from e
            wall_ms = (time.monotonic() - t0) * 1000
            try:
                params_done = await asyncio.wait_for(asyncio.shield(completed), timeout=5.0)
                stats = MigrationStats.from_job_stats(params_done, "source JOB_COMPLETED event")
            except asyncio.TimeoutError:
                stats = await self.dest_completed_stats(name, dest_uri)
            stats.wall_ms, stats.postcopy_switched, stats.timeout_action = wall_ms, w.switched, w.action_taken
            return stats
        finally:
            self._completed.pop(name, None)
            self._watches.pop(name, None)
            if not job.done():
                job.cancel()

    async def _watch(self, name: str, dom, job, opts: MigrationOptions, on_progress: ProgressCallback | None,
                     t0: float, w: JobWatch) -> None:
        def stats():
            try:
                st = dom.jobStats(0)
            except libvirt.libvirtError:
                return None               # the job may just have ended
            return None if st.get("type", 0) == libvirt.VIR_DOMAIN_JOB_NONE else st
        await watch_job(job, opts, w, t0, on_progress, period_s=self.progress_period_s,
                        stats=lambda: asyncio.get_running_loop().run_in_executor(self._pool, stats),
                        set_downtime=lambda: self._quiet("set max downtime during job", dom.migrateSetMaxDowntime,
                                                         int(opts.max_downtime_ms), 0),
                        apply=lambda d: self._apply_policy(name, dom, d, w))

    async def _apply_policy(self, name: str, dom, d, w: JobWatch) -> None:
        if d.action is Action.SWITCH_POSTCOPY:
            log.info("migration of %s: switching to post-copy (%s)", name, d.why)
            w.switched = await self._quiet(f"post-copy switch of {name}", dom.migrateStartPostCopy, 0) or w.switched
        elif d.action in (Action.ABORT, Action.ABORT_AND_RETRY_AUTO_CONVERGE):
            log.warning("migration of %s: %s -> %s", name, d.why, d.action.value)
            w.abort_sent = await self._quiet(f"abort of {name}", dom.abortJob)

    async def _quiet(self, what: str, fn: Callable, *args: Any) -> bool:
        """A best-effort libvirt call during a job: False (logged) if libvirt refused it."""
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args))
            return True
        except libvirt.libvirtError as e:
            log.warning("%s failed: %s", what, e)
            return False

    async def dest_completed_stats(self, name: str, dest_uri: str) -> MigrationStats:
        def blocking():
            c = libvirt.open(dest_uri)
            try:
                return c.lookupByName(name).jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
            finally:
                c.close()
        try:
            return MigrationStats.from_job_stats(await self._call("completed job stats on destination", blocking),
                                                 "destination completed jobStats")
        except errors.CellbedError as e:
            log.warning("no completed-job statistics for %s: %s", name, e)
            return MigrationStats(source=f"unavailable: {e}")
