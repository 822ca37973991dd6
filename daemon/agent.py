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
from collections import deque
from typing import AsyncIterator

import psutil
from google.protobuf import json_format

from cellbed.domain import errors
from cellbed.runtime.cgroups import HostCgroup
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.guest_channel import GuestChannel, GuestChannelError, GuestStatus
from cellbed.domain.vm import REAL_VM_LIMITS, DomState, Hypervisor, VmSpec
from cellbed.runtime.peers import PeerDirectory
from cellbed.runtime.clock import Clock
from cellbed.runtime.jsonl import JsonlStore
from cellbed.runtime.transport import Transport
from cellbed.daemon.host_view import HostView
from cellbed.v1 import node_pb2 as npb
from cellbed.daemon.admission import AdmissionPolicy
from cellbed.daemon.inventory import Reservation, VmEntry
from cellbed.daemon.lookup import LookupMixin
from cellbed.daemon.migration import MigrationMixin
from cellbed.daemon.monitor import MonitorMixin
from cellbed.daemon.journal import MigrationJournal
from cellbed.daemon.reconcile import ReconcileMixin

log = logging.getLogger(__name__)

EVENT_BUFFER = 512


class NodeAgent(LookupMixin, MonitorMixin, MigrationMixin, ReconcileMixin):
    """Built by :func:`cellbed.assembly.build_node`: clock, transport and backend come from the
    Env (wall clock, gRPC and libvirt on a real cell; virtual time, in-process and model backend
    on a model cell), the admission rule from the node's configuration. Agents in the same
    process see the host through :meth:`view` and change it only through this class's methods."""

    def __init__(self, cfg: NodeConfig, backend: Hypervisor, clock: Clock, transport: Transport,
                 admit: AdmissionPolicy) -> None:
        self.cfg = cfg
        self._admission_policy = admit                     # the admission rule (daemon/admission.py)
        self.hv = backend
        self.limits = getattr(backend, "limits", REAL_VM_LIMITS)
        self.clock = clock
        self.peers = PeerDirectory(cfg.peers_file)
        self.transport = transport
        self._sample_listeners: list = []                  # (fn, may_skip, skipped): after every periodic sample
        self._changes_seen: tuple = (None, None)           # the backend's change count at the last two samples
        self._skipped = False                              # samples were skipped since the last one taken
        self.samples_skipped = 0
        self.samples_taken = 0
        self.vms: dict[str, VmEntry] = {}
        self.incoming: dict[str, Reservation] = {}        # migration id -> reservation
        self._view = HostView(cfg, self.vms, self.incoming)
        self.channels: dict[str, GuestChannel] = {}
        self.migrating: dict[str, str] = {}                # vm -> migration id (outgoing)
        self.discarding: set[str] = set()                  # VMs whose failed start is being undone
        self.departed: dict[str, float] = {}               # VM -> when it migrated away or stopped (sample must not re-adopt)
        self._undoing: set[str] = set()                    # ...and of those, the ones being removed right now
        self.records: list[npb.MigrationRecord] = []
        self._events: deque[npb.Event] = deque(maxlen=EVENT_BUFFER)
        self._subscribers: set[asyncio.Queue] = set()
        self._seq = 0
        self._tasks: list[asyncio.Task] = []
        self._lock = asyncio.Lock()                        # admission decisions
        self.cgroup = HostCgroup(cfg.cgroup) if cfg.cgroup else None
        self._cg_last: tuple[float, int] | None = None
        self._proc = psutil.Process() if cfg.measure_daemon else None
        if self._proc is not None:
            self._proc.cpu_percent(None)
        self.host_sample = npb.HostState()
        self.telemetry = None                              # set by main (MQTT publisher)
        # "" = keep records in memory only (model cells: thousands of agents, no files)
        self._history = JsonlStore(os.path.join(cfg.state_dir, "migrations.jsonl")) if cfg.state_dir else None
        self.journal = MigrationJournal(cfg.state_dir)    # disabled without a state_dir (model cells)
        self.unresolved: dict[str, str] = {}               # open migration id -> why it is not finished
        self._settling: set[str] = set()                   # outgoing ids being finished right now
        self._finishing: dict[str, asyncio.Future] = {}    # incoming ids being verified right now
        self.handing_over: dict[str, tuple[str, str]] = {}  # VM -> (migration id, destination): left, not yet verified there

    # --- lifecycle ------------------------------------------------------------------
    async def start(self, first_sample_delay_s: float | None = None) -> None:
        if self.cfg.state_dir:
            os.makedirs(self.cfg.state_dir, exist_ok=True)
        self._load_history()
        self.restore_journal()
        await self.hv.open()
        await self.sample()       # rebuilds the inventory from libvirt (restart safety)
        self.mark_migrating()
        log.info("node %s: %d VM(s) found in libvirt", self.cfg.host, len(self.vms))
        if self.journal.enabled:
            await self.reconcile()
            self._tasks.append(asyncio.create_task(self._reconcile_loop(), name="reconcile"))
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
        if self._history is not None:
            self.records.extend(self._history.read(lambda line: json_format.Parse(line, npb.MigrationRecord())))

    def _save_record(self, rec: npb.MigrationRecord) -> None:
        """One final record per migration, on disk (fsync) before anyone is told."""
        self.records.append(rec)
        if self._history is not None:
            self._history.append(rec, lambda r: json_format.MessageToJson(r, indent=None))

    # --- events -----------------------------------------------------------------------
    def emit(self, kind: int, vm: str = "", detail: str = "", progress=None, record=None) -> None:
        self._seq += 1
        ev = npb.Event(seq=self._seq, unix_s=self.clock.now(), host=self.cfg.host, kind=kind, vm=vm,
                      detail=detail, progress=progress, record=record)
        self._events.append(ev)
        for q in list(self._subscribers):
            if q.full():
                continue  # a slow watcher loses events rather than stalling the daemon
            q.put_nowait(ev)
        if self.telemetry is not None:
            self.telemetry.publish_event(ev)

    async def watch(self, replay: int) -> AsyncIterator[npb.Event]:
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
            self.emit(npb.EVENT_KIND_VM_CRASHED, name, reason)

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

    def add_sample_listener(self, fn, may_skip=None, skipped=None) -> None:
        """*fn()* runs after every periodic sample (the SAN's step-1 trigger). With event-driven
        sampling (``cfg.skip_quiet_samples``), a period in which nothing here changed is skipped
        only if every listener's *may_skip()* agrees (a listener without one never does); then
        *skipped()* runs instead of *fn*."""
        self._sample_listeners.append((fn, may_skip, skipped))

    def remove_sample_listener(self, fn) -> None:
        self._sample_listeners = [x for x in self._sample_listeners if x[0] != fn]

    def update_attributes(self, set_: dict | None = None, remove=()) -> None:
        """Change this host's attributes (a trace's machine attribute events)."""
        self.cfg.attributes.update(set_ or {})     # the cfg's dict is this host's own
        for k in remove:
            self.cfg.attributes.pop(k, None)
        self.host_sample.ClearField("attributes")

    def update_capacity(self, cpu_cores: float, mem_mib: int) -> None:
        """Change this host's capacity (a trace's machine UPDATE); the view follows. VMs already
        here stay: a host left over capacity is overloaded, which is the SAN's business."""
        self.cfg = dataclasses.replace(self.cfg, cpu_cores=float(cpu_cores), mem_mib=int(mem_mib)).validate()
        self._view.follow(self.cfg)
        self.host_sample.capacity.cpu_cores, self.host_sample.capacity.mem_mib = self.cfg.cpu_cores, self.cfg.mem_mib

    async def update_request(self, name: str, req_cpu_cores: float, mem_mib: int, priority: int,
                             production: bool, constraints: tuple = ()) -> VmEntry:
        """Change what VM *name* requests (a trace's task UPDATE_PENDING/RUNNING and constraint
        update): its requested CPU and memory, priority, production band and constraints, as
        admission and the SAN see them. vCPUs grow to hold the request; the VM's use does not
        change. A VM migrating out refuses (FailedPrecondition): the destination holds its spec."""
        e = self._get(name)
        if e.migrating_out:
            raise errors.FailedPrecondition(f"VM {name} is migrating ({e.migrating_out}); update it once it has landed")
        s = e.spec
        vcpus = max(s.vcpus, math.ceil(req_cpu_cores - 1e-9), 1)
        new = dataclasses.replace(s, vcpus=vcpus, req_cpu_cores=min(float(req_cpu_cores), float(vcpus)),
                                  cpu_load=min(1.0, s.vcpus * s.cpu_load / vcpus), mem_mib=int(mem_mib),
                                  wss_mib=min(s.wss_mib, max(0, int(mem_mib) - self.limits.guest_overhead_mib)),
                                  priority=priority, production=production,
                                  constraints=tuple(constraints)).validate(self.limits)
        await self.hv.update_spec(new)
        e.spec = new
        return e

    def _admit(self, spec: VmSpec, force: bool = False) -> None:
        """Raise FailedPrecondition, with the numbers, unless *spec* fits on this host."""
        self._admission_policy(spec, self._view, force)

    # --- VM operations -------------------------------------------------------------------
    async def start_vm(self, spec: VmSpec) -> VmEntry:
        spec = dataclasses.replace(spec.validate(self.limits), created_unix_s=spec.created_unix_s or self.clock.now())
        async with self._lock:
            if spec.name in self.vms or self._lease_of(spec.name) is not None:
                raise errors.AlreadyExists(f"VM {spec.name!r} already exists on host {self.cfg.host}")
            away = self._away(spec.name)
            if away is not None:      # a VM of that name may be running elsewhere: never two
                raise errors.FailedPrecondition(f"{away}; a new VM of that name cannot start here until then")
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
            entry.known_since = self.clock.monotonic()
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
        self.emit(npb.EVENT_KIND_VM_STARTED, spec.name, f"boot-to-workload {entry.boot_to_workload_s:.2f} s")
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
        self.departed[name] = self.clock.monotonic()   # a sample listing since before must not adopt it back
        self.emit(npb.EVENT_KIND_VM_STOPPED, name)

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
        self.emit(npb.EVENT_KIND_WORKLOAD_SET, name,
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
