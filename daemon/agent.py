"""The node agent: VM inventory, admission, measurement, migration and its verification.

It speaks to the hypervisor through the backend interface, to guests through their
control channel, and to other hosts through NodeClient. The gRPC servicer is a thin
translation layer over this class.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import uuid
from collections import deque
from typing import AsyncIterator, Callable

import psutil
from google.protobuf import json_format

from cellbed.domain import errors
from cellbed.runtime.cgroups import HostCgroup
from cellbed.domain import wire
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.guest_channel import GuestChannel, GuestChannelError, GuestStatus
from cellbed.domain.vm import (REAL_VM_LIMITS, DomState, Hypervisor, JobProgress, MigrationOptions,
                                       VmSpec)
from cellbed.runtime.peers import PeerDirectory
from cellbed.policy.scores.asr import node_class
from cellbed.runtime.clock import Clock
from cellbed.runtime.transport import Transport
from cellbed.daemon.host_view import HostView
from cellbed.v1 import common_pb2 as cpb, node_pb2 as pb
from cellbed.domain.constraints import constraints_match

log = logging.getLogger(__name__)

EVENT_BUFFER = 512


@dataclasses.dataclass
class VmEntry:
    spec: VmSpec
    state: DomState = DomState.RUNNING
    reason: str = ""
    cpu_used_cores: float = 0.0
    rss_mib: float = 0.0
    dirty_rate_mib_s: float = -1.0
    last_cpu_ns: int = 0
    last_t: float = 0.0
    guest: GuestStatus | None = None
    boot_to_workload_s: float = 0.0
    migrating_out: str = ""   # migration id while leaving


@dataclasses.dataclass
class Reservation:
    spec: VmSpec
    src: str
    expires: float
    cpu_used: float = 0.0      # the task's usage on its source, cores (counted here while it moves)
    mem_used: float = 0.0      # MiB


@dataclasses.dataclass
class Verification:
    verified: bool
    detail: str
    heartbeat_after: int = 0
    integrity_pages: int = 0
    integrity_bad: int = 0


class NodeAgent:
    """Built by :func:`cellbed.assembly.build_node`: clock, transport and backend come from the
    Env (wall clock, gRPC and libvirt on a real cell; virtual time, in-process and model backend
    on a model cell). Agents in the same process see the host through :meth:`view` and change it
    only through this class's methods."""

    def __init__(self, cfg: NodeConfig, backend: Hypervisor, clock: Clock, transport: Transport) -> None:
        self.cfg = cfg
        self.hv = backend
        self.limits = getattr(backend, "limits", REAL_VM_LIMITS)
        self.clock = clock
        self.peers = PeerDirectory(cfg.peers_file)
        self.transport = transport
        self._sample_listeners: list = []                  # called after every periodic sample
        self.vms: dict[str, VmEntry] = {}
        self.incoming: dict[str, Reservation] = {}        # migration id -> reservation
        self._view = HostView(cfg, self.vms, self.incoming)
        self.channels: dict[str, GuestChannel] = {}
        self.migrating: dict[str, str] = {}                # vm -> migration id (outgoing)
        self.discarding: set[str] = set()                  # VMs whose failed start is being undone
        self._undoing: set[str] = set()                    # ...and of those, the ones being removed right now
        self.records: list[pb.MigrationRecord] = []
        self._events: deque[pb.Event] = deque(maxlen=EVENT_BUFFER)
        self._subscribers: set[asyncio.Queue] = set()
        self._seq = 0
        self._tasks: list[asyncio.Task] = []
        self._lock = asyncio.Lock()                        # admission decisions
        self.cgroup = HostCgroup(cfg.cgroup) if cfg.cgroup else None
        self._cg_last: tuple[float, int] | None = None
        self._proc = psutil.Process() if cfg.measure_daemon else None
        if self._proc is not None:
            self._proc.cpu_percent(None)
        self.host_sample = pb.HostState()
        self.telemetry = None                              # set by main (MQTT publisher)
        # "" = keep records in memory only (model cells: thousands of agents, no files)
        self._history_path = os.path.join(cfg.state_dir, "migrations.jsonl") if cfg.state_dir else ""

    # --- lifecycle ------------------------------------------------------------------
    async def start(self, first_sample_delay_s: float | None = None) -> None:
        if self.cfg.state_dir:
            os.makedirs(self.cfg.state_dir, exist_ok=True)
        self._load_history()
        await self.hv.open()
        await self.sample()       # rebuilds the inventory from libvirt (restart safety)
        log.info("node %s: %d VM(s) found in libvirt", self.cfg.host, len(self.vms))
        self._tasks.append(asyncio.create_task(self._monitor(first_sample_delay_s), name="monitor"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for ch in self.channels.values():
            await ch.close()
        close = getattr(self.transport, "close", None)
        if close is not None:
            await close()
        await self.hv.close()

    def _load_history(self) -> None:
        if not self._history_path:
            return
        try:
            with open(self._history_path) as f:
                for line in f:
                    if line.strip():
                        self.records.append(json_format.Parse(line, pb.MigrationRecord()))
        except FileNotFoundError:
            pass

    def _save_record(self, rec: pb.MigrationRecord) -> None:
        self.records.append(rec)
        if not self._history_path:
            return
        with open(self._history_path, "a") as f:
            f.write(json_format.MessageToJson(rec, indent=None) + "\n")

    # --- events -----------------------------------------------------------------------
    def emit(self, kind: int, vm: str = "", detail: str = "", progress=None, record=None) -> None:
        self._seq += 1
        ev = pb.Event(seq=self._seq, unix_s=self.clock.now(), host=self.cfg.host, kind=kind, vm=vm,
                      detail=detail, progress=progress, record=record)
        self._events.append(ev)
        for q in list(self._subscribers):
            if q.full():
                continue  # a slow watcher loses events rather than stalling the daemon
            q.put_nowait(ev)
        if self.telemetry is not None:
            self.telemetry.publish_event(ev)

    async def watch(self, replay: int) -> AsyncIterator[pb.Event]:
        q: asyncio.Queue = asyncio.Queue(maxsize=1024)
        for ev in list(self._events)[-replay:] if replay else []:
            q.put_nowait(ev)
        self._subscribers.add(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._subscribers.discard(q)

    def on_lifecycle(self, name: str, state: DomState, reason: str) -> None:
        e = self.vms.get(name)
        if e is None:
            return
        if state is DomState.CRASHED and e.state is not DomState.CRASHED:
            e.state, e.reason = state, reason
            log.warning("VM %s crashed (%s)", name, reason)
            self.emit(pb.EVENT_KIND_VM_CRASHED, name, reason)

    # --- guests -----------------------------------------------------------------------
    def channel(self, name: str) -> GuestChannel:
        ch = self.channels.get(name)
        if ch is None:
            make = getattr(self.hv, "guest_channel", None)   # the model backend simulates its guests
            ch = self.channels[name] = (make(name) if make is not None
                                        else GuestChannel(self.hv.channel_path(name), timeout_s=5.0))
        return ch

    async def _drop_channel(self, name: str) -> None:
        ch = self.channels.pop(name, None)
        if ch is not None:
            await ch.close()

    async def _wait_guest(self, name: str, timeout_s: float, after_heartbeat: int = -1) -> GuestStatus:
        """Poll the guest until it answers (with heartbeat > after_heartbeat) or time runs out."""
        deadline = self.clock.monotonic() + timeout_s
        last_err = "no answer"
        while True:
            try:
                st = await self.channel(name).status(timeout_s=2.0)
                if st.heartbeat > after_heartbeat:
                    return st
                last_err = f"heartbeat {st.heartbeat} not above {after_heartbeat}"
            except (GuestChannelError, OSError) as e:
                last_err = str(e) or type(e).__name__
            if self.clock.monotonic() >= deadline:
                raise errors.DeadlineExceeded(f"guest {name} did not answer within {timeout_s:.0f} s: {last_err}")
            await self.clock.sleep(0.2)

    # --- the host as other agents see it ------------------------------------------------
    def view(self) -> HostView:
        """The read-only view of this host (live: it follows every change)."""
        return self._view

    def allocated(self) -> tuple[float, int]:
        """(CPU cores, memory MiB) requested here, incoming reservations included."""
        return self._view.allocated()

    def used(self) -> tuple[float, float]:
        """(CPU cores, memory MiB) used here, incoming VMs' use included (DESIGN §7)."""
        return self._view.used()

    def add_sample_listener(self, fn) -> None:
        """*fn()* runs after every periodic sample (the SAN's step-1 trigger)."""
        self._sample_listeners.append(fn)

    def remove_sample_listener(self, fn) -> None:
        if fn in self._sample_listeners:
            self._sample_listeners.remove(fn)

    def update_attributes(self, set_: dict | None = None, remove=()) -> None:
        """Change this host's attributes (a trace's machine attribute events)."""
        self.cfg.attributes.update(set_ or {})     # the cfg's dict is this host's own
        for k in remove:
            self.cfg.attributes.pop(k, None)
        self.host_sample.ClearField("attributes")

    def _admit(self, spec: VmSpec, force: bool = False) -> None:
        """Raise FailedPrecondition, with the numbers, unless *spec* fits on this host."""
        cap_mem, cap_cpu = self.cfg.mem_mib, self.cfg.cpu_cores
        if spec.constraints and not constraints_match(spec.constraints, self.cfg.attributes):
            bad = [c for c in spec.constraints if not c.matches(self.cfg.attributes)]
            raise errors.FailedPrecondition(
                f"{self.cfg.host}: VM {spec.name} constraint(s) not met: "
                + ", ".join(f"{c.attribute} {c.op.name} {c.value!r} (host has "
                            f"{self.cfg.attributes.get(c.attribute)!r})" for c in bad))
        if force:  # MASB forced migration: against total capacity only
            if spec.mem_mib > cap_mem or spec.requested_cpu > cap_cpu + 1e-9:
                raise errors.FailedPrecondition(
                    f"{self.cfg.host}: VM {spec.name} ({spec.mem_mib} MiB, {spec.requested_cpu:.2f} cores) "
                    f"exceeds total capacity ({cap_mem} MiB, {cap_cpu:.2f} cores)")
            return
        if self.cfg.admission == "used":   # overcommitted cells (MASB): admit on measured use
            cpu_u, mem_u = self.used()
            if mem_u + spec.mem_mib > cap_mem or cpu_u + spec.requested_cpu > cap_cpu + 1e-9:
                raise errors.FailedPrecondition(
                    f"{self.cfg.host}: used {cpu_u:.2f} cores / {mem_u:.0f} MiB + requested "
                    f"{spec.requested_cpu:.2f} cores / {spec.mem_mib} MiB > capacity {cap_cpu:.2f} cores / "
                    f"{cap_mem} MiB")
            if spec.production:   # production is not overcommitted: its requests must fit
                pc = sum(e.spec.requested_cpu for e in self.vms.values() if e.spec.production)
                pm = sum(e.spec.mem_mib for e in self.vms.values() if e.spec.production)
                pc += sum(r.spec.requested_cpu for r in self.incoming.values() if r.spec.production)
                pm += sum(r.spec.mem_mib for r in self.incoming.values() if r.spec.production)
                if pm + spec.mem_mib > cap_mem or pc + spec.requested_cpu > cap_cpu + 1e-9:
                    raise errors.FailedPrecondition(
                        f"{self.cfg.host}: production requests {pc:.2f} cores / {pm} MiB + {spec.requested_cpu:.2f} / "
                        f"{spec.mem_mib} MiB > capacity {cap_cpu:.2f} cores / {cap_mem} MiB")
            return
        cpu, mem = self.allocated()
        if mem + spec.mem_mib > cap_mem:
            raise errors.FailedPrecondition(
                f"{self.cfg.host}: memory {mem} + {spec.mem_mib} MiB > capacity {cap_mem} MiB")
        if cpu + spec.requested_cpu > cap_cpu + 1e-9:
            raise errors.FailedPrecondition(
                f"{self.cfg.host}: requested CPU {cpu:.2f} + {spec.requested_cpu:.2f} cores > capacity {cap_cpu:.2f} cores")

    def _get(self, name: str) -> VmEntry:
        e = self.vms.get(name)
        if e is None:
            raise errors.NotFound(f"VM {name!r} is not on host {self.cfg.host}")
        return e

    # --- VM operations -------------------------------------------------------------------
    async def start_vm(self, spec: VmSpec) -> VmEntry:
        spec = dataclasses.replace(spec.validate(self.limits), created_unix_s=spec.created_unix_s or self.clock.now())
        async with self._lock:
            if spec.name in self.vms or any(r.spec.name == spec.name for r in self.incoming.values()):
                raise errors.AlreadyExists(f"VM {spec.name!r} already exists on host {self.cfg.host}")
            if spec.name in self.discarding:
                raise errors.Unavailable(f"VM {spec.name!r}: a failed start of it on {self.cfg.host} is still being "
                                         "undone; retry later")
            self._admit(spec)
            # until its first sample, count what the VM is expected to use
            self.vms[spec.name] = entry = VmEntry(spec=spec, state=DomState.PAUSED, reason="starting",
                                                  cpu_used_cores=spec.vcpus * spec.cpu_load,
                                                  rss_mib=float(spec.wss_mib or spec.mem_mib))
        t0 = self.clock.monotonic()
        try:
            await self.hv.start(spec)
            st = await self._wait_guest(spec.name, self.cfg.boot_timeout_s)
        except BaseException:
            # Undo: the caller (a broker, an LM) will place the VM elsewhere, so it must not
            # survive here. Until the domain is gone, sampling must not adopt it back.
            self.vms.pop(spec.name, None)
            self.discarding.add(spec.name)
            await self._discard(spec.name)
            raise
        entry.boot_to_workload_s = self.clock.monotonic() - t0
        entry.guest, entry.state, entry.reason = st, DomState.RUNNING, "booted"
        log.info("VM %s started on %s: boot-to-workload %.2f s", spec.name, self.cfg.host, entry.boot_to_workload_s)
        self.emit(pb.EVENT_KIND_VM_STARTED, spec.name, f"boot-to-workload {entry.boot_to_workload_s:.2f} s")
        return entry

    async def _discard(self, name: str) -> bool:
        """Remove the domain of a VM whose start failed; True once it is gone. On failure the
        name stays in ``discarding`` and the next sample tries again."""
        self._undoing.add(name)
        try:
            await self._drop_channel(name)
            await self.hv.stop(name)
        except errors.NotFound:
            pass
        except errors.CellbedError as e:
            log.error("VM %s: undoing its failed start: %s (retried at the next sample)", name, e)
            return False
        finally:
            self._undoing.discard(name)
        self.discarding.discard(name)
        return True

    async def stop_vm(self, name: str) -> None:
        e = self._get(name)
        if e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is migrating ({e.migrating_out}); abort it first")
        await self._drop_channel(name)
        await self.hv.stop(name)
        self.vms.pop(name, None)
        self.emit(pb.EVENT_KIND_VM_STOPPED, name)

    async def set_workload(self, name: str, cpu_load: float | None, wss_mib: int | None,
                           dirty_mib_s: float | None) -> VmEntry:
        e = self._get(name)
        new = e.spec.with_workload(cpu_load, wss_mib, dirty_mib_s, self.limits)   # validates the ranges
        if e.state is not DomState.RUNNING:
            raise errors.FailedPrecondition(f"VM {name} is {e.state.value} ({e.reason}); cannot change its workload")
        try:
            st = await self.channel(name).set_workload(cpu=new.cpu_load, wss_mib=new.wss_mib,
                                                       dirty_mib_s=new.dirty_mib_s)
        except GuestChannelError as exc:
            code = errors.InvalidArgument if type(exc).__name__ == "GuestRefused" else errors.Unavailable
            raise code(f"guest {name}: {exc}") from exc
        await self.hv.update_spec(new)
        e.spec, e.guest = new, st
        self.emit(pb.EVENT_KIND_WORKLOAD_SET, name,
                  f"cpu {new.cpu_load:g} wss {new.wss_mib} MiB dirty {new.dirty_mib_s:g} MiB/s")
        return e

    async def pause_vm(self, name: str) -> None:
        """Pause a running VM (RUS spike policy); its resources stay allocated."""
        e = self._get(name)
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is {e.state.value} ({e.reason}); only running VMs pause")
        await self.hv.pause(name)
        e.state, e.reason, e.cpu_used_cores = DomState.PAUSED, "paused (spike)", 0.0

    async def inject_fault(self, name: str, kind: str) -> str:
        e = self._get(name)
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is {e.state.value} ({e.reason}); faults need a running guest")
        try:
            rep = await self.channel(name).fault(kind)
        except GuestChannelError as exc:
            raise errors.Unavailable(f"guest {name}: {exc}") from exc
        log.warning("fault %s injected into %s: %s", kind, name, rep)
        return str(rep)

    # --- measurement ---------------------------------------------------------------------
    async def sample(self) -> None:
        now = self.clock.monotonic()
        doms = await self.hv.list()
        seen = set()
        for d in doms:
            if d.spec is None:
                continue  # not a Cellbed domain
            seen.add(d.name)
            e = self.vms.get(d.name)
            if e is None:
                if d.name in self.discarding:
                    continue          # a failed start being undone: never adopt it back
                if d.incoming or d.state is DomState.SHUTOFF:
                    continue
                if any(r.spec.name == d.name for r in self.incoming.values()):
                    continue  # arriving; adopted by FinishIncoming
                e = self.vms[d.name] = VmEntry(spec=d.spec)   # found in libvirt: adopt
                log.info("adopted VM %s from libvirt (%s, %s)", d.name, d.state.value, d.reason)
            if e.last_t and d.cpu_time_ns >= e.last_cpu_ns:
                e.cpu_used_cores = (d.cpu_time_ns - e.last_cpu_ns) / 1e9 / max(1e-3, now - e.last_t)
            e.last_cpu_ns, e.last_t = d.cpu_time_ns, now
            e.rss_mib = d.rss_bytes / 2**20
            if d.dirty_rate_mib_s >= 0:
                e.dirty_rate_mib_s = d.dirty_rate_mib_s
            if e.state is not DomState.CRASHED and d.state is DomState.CRASHED:
                self.emit(pb.EVENT_KIND_VM_CRASHED, d.name, d.reason)
            if e.reason != "starting":
                e.state, e.reason = d.state, d.reason
        for name in [n for n in self.discarding if n not in self._undoing]:
            if name not in seen:
                self.discarding.discard(name)                 # its domain is gone
            else:
                await self._discard(name)
        for name in [n for n, e in self.vms.items() if n not in seen and not e.migrating_out
                     and e.reason != "starting"]:
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
        cpu, mem = self.allocated()
        s = self.host_sample
        s.host, s.address = self.cfg.host, self.cfg.address
        s.capacity.CopyFrom(pb.HostCapacity(cpu_cores=self.cfg.cpu_cores, mem_mib=self.cfg.mem_mib,
                                            cpu_norm=self.cfg.cpu_norm, mem_norm=self.cfg.mem_norm))
        s.cpu_used_cores = sum(e.cpu_used_cores for e in self.vms.values())
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
        s.mem_used_mib = sum(e.rss_mib for e in self.vms.values())
        if not s.attributes and self.cfg.attributes:
            s.attributes.extend(wire.attributes_pb(self.cfg.attributes))
        cpu_u, mem_u = self.used()
        if self.vms or self.incoming:
            s.asr_class = int(node_class((cpu_u, mem_u), (self.cfg.cpu_cores, self.cfg.mem_mib))) + 1  # wire codes start at 1
        else:
            s.asr_class = cpb.ASR_CLASS_IDLE
        if self._proc is not None:
            s.daemon_rss_mib = self._proc.memory_info().rss / 2**20
            s.daemon_cpu = self._proc.cpu_percent(None) / 100.0
        s.accel = self.hv.accel
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
                await self.sample()
                self._expire_reservations()
                for fn in self._sample_listeners:
                    fn()
            except errors.CellbedError as e:
                log.warning("sampling failed: %s", e)
            except Exception:
                log.exception("sampling failed")

    def _expire_reservations(self) -> None:
        now = self.clock.monotonic()
        for mid, r in list(self.incoming.items()):
            if r.expires < now:
                log.warning("reservation %s for %s from %s expired", mid, r.spec.name, r.src)
                del self.incoming[mid]

    # --- migration: source side -----------------------------------------------------------
    async def migrate(self, name: str, dest: str, opts: MigrationOptions,
                      prepared_mid: str = "", forced: bool = False) -> pb.MigrationRecord:
        """Live-migrate *name* to *dest*. The destination admits it with PrepareIncoming, unless
        *prepared_mid* names a reservation it already holds (SAN TaskMigrationProcessRequest)."""
        opts = opts.validate()
        e = self._get(name)
        if dest == self.cfg.host:
            raise errors.FailedPrecondition(f"VM {name} already runs on {dest}: choose another destination")
        tmpl = self.cfg.migration_uri_template
        address = self.peers.get(dest).address if "{address}" in tmpl else ""
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
        rec = pb.MigrationRecord(id=mid, vm=name, src=self.cfg.host, dst=dest, start_unix_s=self.clock.now(),
                                 options=_options_pb(opts), heartbeat_before=before.heartbeat,
                                 mem_mib=e.spec.mem_mib, wss_mib=e.spec.wss_mib,
                                 dirty_mib_s=-1 if math.isinf(e.spec.dirty_mib_s) else e.spec.dirty_mib_s,
                                 forced=forced)
        try:
            if not prepared_mid:
                await self.transport.request(dest, "NodeAgent/PrepareIncoming", pb.PrepareIncomingRequest(
                    spec=spec_pb(e.spec), src_host=self.cfg.host, migration_id=mid,
                    cpu_used_cores=e.cpu_used_cores, mem_used_mib=e.rss_mib), timeout=10.0)
        except errors.CellbedError as exc:
            rec.outcome, rec.detail = pb.MIGRATION_OUTCOME_REFUSED, str(exc)
            self._save_record(rec)
            self.emit(pb.EVENT_KIND_MIGRATION_FINISHED, name, f"refused: {exc}", record=rec)
            raise
        e.migrating_out = mid
        self.migrating[name] = mid
        self.emit(pb.EVENT_KIND_MIGRATION_STARTED, name, f"{mid} -> {dest}")
        migrated = False
        t0 = self.clock.monotonic()
        try:
            stats = await self.hv.migrate(
                name, tmpl.format(address=address, host=dest), opts,
                lambda p: self._progress(mid, name, p))
            migrated = True
            _fill_stats(rec, stats)
        except errors.CellbedError as exc:
            aborted = isinstance(exc, errors.MigrationFailed) and exc.aborted
            rec.outcome = pb.MIGRATION_OUTCOME_ABORTED if aborted else pb.MIGRATION_OUTCOME_FAILED
            rec.detail = str(exc)
            rec.wall_ms = (self.clock.monotonic() - t0) * 1000
            rec.timeout_action = getattr(exc, "timeout_action", "")
        finally:
            self.migrating.pop(name, None)
        try:
            fin = await self.transport.request(dest, "NodeAgent/FinishIncoming", pb.FinishIncomingRequest(
                migration_id=mid, name=name, migrated=migrated, heartbeat_before=before.heartbeat,
                boot_id=before.boot_id), timeout=self.cfg.verify_timeout_s + 10)
        except errors.CellbedError as exc:
            fin = pb.FinishIncomingResponse(verified=False, detail=f"destination unreachable: {exc}")
        if migrated:
            self.vms.pop(name, None)
            await self._drop_channel(name)
            rec.heartbeat_after, rec.integrity_pages, rec.integrity_bad = (
                fin.heartbeat_after, fin.integrity_pages, fin.integrity_bad)
            if fin.verified:
                rec.outcome = pb.MIGRATION_OUTCOME_SUCCEEDED
                rec.detail = fin.detail
            else:
                rec.outcome = pb.MIGRATION_OUTCOME_VERIFICATION_FAILED
                rec.detail = f"libvirt reported success but verification failed: {fin.detail}"
        else:
            e.migrating_out = ""
            await self._confirm_still_here(name, rec)
        self._save_record(rec)
        level = logging.INFO if rec.outcome == pb.MIGRATION_OUTCOME_SUCCEEDED else logging.WARNING
        log.log(level, "migration %s of %s %s->%s: %s in %.0f ms, downtime %.0f ms, %d B; %s", mid, name,
                self.cfg.host, dest, pb.MigrationOutcome.Name(rec.outcome), rec.wall_ms, rec.downtime_ms,
                rec.data_total_bytes, rec.detail)
        self.emit(pb.EVENT_KIND_MIGRATION_FINISHED, name, pb.MigrationOutcome.Name(rec.outcome), record=rec)
        return rec

    async def _confirm_still_here(self, name: str, rec: pb.MigrationRecord) -> None:
        try:
            state, reason = await self.hv.domain_state(name)
            rec.detail += f"; VM still on source ({state.value}, {reason})"
        except errors.NotFound:
            rec.detail += "; VM NOT found on source after failed migration"
            log.error("VM %s not on source after failed migration %s", name, rec.id)

    def _progress(self, mid: str, name: str, p: JobProgress) -> None:
        self.emit(pb.EVENT_KIND_MIGRATION_PROGRESS, name, progress=pb.MigrationProgress(
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


# --- conversions between the domain types and the wire -----------------------------------
def spec_pb(s: VmSpec) -> pb.VmSpec:
    inf = math.isinf(s.dirty_mib_s)
    return pb.VmSpec(name=s.name, mem_mib=s.mem_mib, vcpus=s.vcpus, production=s.production,
                     priority=s.priority, req_cpu_cores=s.req_cpu_cores, user=s.user,
                     constraints=wire.constraints_pb(s.constraints),
                     workload=pb.Workload(cpu_load=s.cpu_load, wss_mib=s.wss_mib,
                                          dirty_mib_s=0 if inf else s.dirty_mib_s, dirty_max=inf))


def spec_from_pb(p: pb.VmSpec) -> VmSpec:
    w = p.workload
    return VmSpec(name=p.name, mem_mib=p.mem_mib or 128, vcpus=p.vcpus or 1, cpu_load=w.cpu_load,
                  wss_mib=w.wss_mib, dirty_mib_s=math.inf if w.dirty_max else w.dirty_mib_s,
                  production=p.production, priority=p.priority, req_cpu_cores=p.req_cpu_cores,
                  constraints=wire.constraints_from_pb(p.constraints), user=p.user)


def _options_pb(o: MigrationOptions) -> pb.MigrationOptions:
    pol = {"abort": pb.TIMEOUT_POLICY_ABORT, "auto-converge": pb.TIMEOUT_POLICY_AUTO_CONVERGE,
           "postcopy": pb.TIMEOUT_POLICY_POSTCOPY}[o.timeout_policy.value]
    return pb.MigrationOptions(bandwidth_mib_s=o.bandwidth_mib_s, max_downtime_ms=o.max_downtime_ms,
                               auto_converge=o.auto_converge, postcopy=o.postcopy, compression=o.compression,
                               parallel_connections=o.parallel_connections,
                               completion_timeout_s=o.completion_timeout_s, timeout_policy=pol)


def _fill_stats(rec: pb.MigrationRecord, st) -> None:
    rec.wall_ms, rec.time_elapsed_ms, rec.downtime_ms = st.wall_ms, st.time_elapsed_ms, st.downtime_ms
    rec.setup_time_ms, rec.data_total_bytes = st.setup_time_ms, st.data_total_bytes
    rec.memory_processed_bytes, rec.memory_iteration = st.memory_processed_bytes, st.memory_iteration
    rec.memory_dirty_rate, rec.memory_bps = st.memory_dirty_rate, st.memory_bps
    rec.postcopy_switched, rec.timeout_action = st.postcopy_switched, st.timeout_action

