"""The node agent: VM inventory, admission, measurement, migration and its verification.

A thin facade over its parts, each an object with its own file, built here and given only what
it needs:

=======================  ==========================================================================
part                     holds / does
=======================  ==========================================================================
NodeState                the inventory: configuration, VMs, leases, migrations in flight, journal
EventHub                 the events (WatchEvents) and the telemetry publisher
Guests                   the guests' control channels
MigrationHistory         the final records, and the step that writes one
Admission                the admission lock and the injected policy (daemon/admission.py)
Lookup                   the answer for a VM by name (incl. hand-over refusals)
VmOperations             start, stop, pause, workload, requests, faults, lifecycle events
Monitor                  sampling, the host state report, sample listeners
MigrationDestination     reservations, FinishIncoming: verification and adoption
HandOver                 the source's end: the destination verifies, the record is written
Reconciler               the journal's open entries, at start and every 2 s
MigrationSource          MigrateVm: checks, PrepareIncoming, the transfer, the record
=======================  ==========================================================================

It speaks to the hypervisor through the backend interface, to guests through their control
channel, and to other hosts through the transport. The gRPC servicer is a thin translation
layer over this class.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import AsyncIterator, Callable

from cellbed.daemon.admission import Admission, AdmissionPolicy
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.events import EventHub
from cellbed.daemon.guest_channel import GuestChannel
from cellbed.daemon.guests import Guests
from cellbed.daemon.handover import HandOver
from cellbed.daemon.history import MigrationHistory
from cellbed.daemon.host_view import HostView
from cellbed.daemon.inventory import Reservation, Verification, VmEntry
from cellbed.daemon.journal import MigrationJournal
from cellbed.daemon.lookup import Lookup
from cellbed.daemon.migration_dest import MigrationDestination
from cellbed.daemon.migration_source import MigrationSource
from cellbed.daemon.monitor import Monitor
from cellbed.daemon.node_state import NodeState
from cellbed.daemon.reconcile import Reconciler
from cellbed.daemon.vm_ops import VmOperations
from cellbed.domain.vm import REAL_VM_LIMITS, DomState, Hypervisor, MigrationOptions, SpecLimits, VmSpec
from cellbed.runtime.clock import Clock
from cellbed.runtime.peers import PeerDirectory
from cellbed.runtime.transport import Transport
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)


class NodeAgent:
    """Built by :func:`cellbed.assembly.build_node`: clock, transport and backend come from the
    Env (wall clock, gRPC and libvirt on a real cell; virtual time, in-process and model backend
    on a model cell), the admission rule from the node's configuration. Agents in the same
    process see the host through :meth:`view` and change it only through this class's methods."""

    def __init__(self, cfg: NodeConfig, backend: Hypervisor, clock: Clock, transport: Transport,
                 admit: AdmissionPolicy) -> None:
        self._hv = backend
        self._limits = getattr(backend, "limits", REAL_VM_LIMITS)
        self._clock = clock
        self._peers = PeerDirectory(cfg.peers_file)
        self._transport = transport
        self._state = st = NodeState(cfg)
        self._events = EventHub(cfg.host, clock)
        self._guests = Guests(backend, clock)
        self._history = MigrationHistory(cfg.state_dir, st.journal, st.unresolved, self._events)
        self._admission = Admission(st.view, admit)
        self._lookup = Lookup(st)
        self._ops = VmOperations(st, backend, clock, self._limits, self._guests, self._events, self._admission,
                                 self._lookup)
        self._monitor = Monitor(st, backend, clock, self._guests, self._events, self._ops.settle_discards)
        self._dest = MigrationDestination(st, backend, clock, self._limits, self._guests, self._admission)
        self._handover = HandOver(st, backend, clock, transport, self._guests, self._history)
        self._reconciler = Reconciler(st, backend, clock, transport, self._guests, self._history, self._handover,
                                      self._dest)
        self._source = MigrationSource(st, backend, clock, transport, self._peers, self._guests, self._events,
                                       self._history, self._handover, self._lookup, self._reconciler.reconcile_one)
        self._tasks: list[asyncio.Task] = []

    # --- lifecycle ------------------------------------------------------------------
    async def start(self, first_sample_delay_s: float | None = None) -> None:
        cfg, st = self.cfg, self._state
        if cfg.state_dir:
            os.makedirs(cfg.state_dir, exist_ok=True)
        self._history.load()
        self._reconciler.restore_journal()
        await self._hv.open()
        await self._monitor.sample()       # rebuilds the inventory from libvirt (restart safety)
        self._reconciler.mark_migrating()
        log.info("node %s: %d VM(s) found in libvirt", cfg.host, len(st.vms))
        if st.journal.enabled:
            await self._reconciler.reconcile()
            self._tasks.append(asyncio.create_task(self._reconciler.run(), name="reconcile"))
        self._tasks.append(asyncio.create_task(self._monitor.run(first_sample_delay_s), name="monitor"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._guests.close_all()
        close = getattr(self._transport, "close", None)
        if close is not None:
            await close()
        await self._hv.close()

    # --- what the agent is built on (read-only) ------------------------------------------
    @property
    def cfg(self) -> NodeConfig:
        """The current configuration (:meth:`update_capacity` replaces it)."""
        return self._state.cfg

    @property
    def hv(self) -> Hypervisor:
        return self._hv

    @property
    def limits(self) -> SpecLimits:
        return self._limits

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def peers(self) -> PeerDirectory:
        return self._peers

    @property
    def transport(self) -> Transport:
        return self._transport

    # --- the inventory (live objects: read them, change them through the methods) ---------
    @property
    def vms(self) -> dict[str, VmEntry]:
        return self._state.vms

    @property
    def incoming(self) -> dict[str, Reservation]:
        """Migration id -> reservation (the leases for incoming migrations)."""
        return self._state.incoming

    @property
    def migrating(self) -> dict[str, str]:
        """VM -> id of its outgoing migration."""
        return self._state.migrating

    @property
    def discarding(self) -> set[str]:
        """VMs whose failed start is being undone."""
        return self._state.discarding

    @property
    def departed(self) -> dict[str, float]:
        """VM -> when it migrated away or stopped (a sample begun before must not adopt it back)."""
        return self._state.departed

    @property
    def handing_over(self) -> dict[str, tuple[str, str]]:
        """VM -> (migration id, destination): left here, not yet verified there."""
        return self._state.handing_over

    @property
    def unresolved(self) -> dict[str, str]:
        """Open migration id -> why it is not finished."""
        return self._state.unresolved

    @property
    def journal(self) -> MigrationJournal:
        return self._state.journal

    @property
    def records(self) -> list[npb.MigrationRecord]:
        """The final records of the migrations from here."""
        return self._history.records

    @property
    def channels(self) -> dict[str, GuestChannel]:
        return self._guests.channels

    def channel(self, name: str) -> GuestChannel:
        return self._guests.channel(name)

    # --- measurement ----------------------------------------------------------------------
    @property
    def host_sample(self) -> npb.HostState:
        """The host state report, as last sampled (GetHostState, PrepareIncoming, telemetry)."""
        return self._monitor.host_sample

    @property
    def samples_taken(self) -> int:
        return self._monitor.samples_taken

    @property
    def samples_skipped(self) -> int:
        return self._monitor.samples_skipped

    @property
    def cgroup(self):
        return self._monitor.cgroup

    async def sample(self) -> None:
        """Rebuild the inventory from the backend and measure the VMs and the host."""
        await self._monitor.sample()

    def sample_host(self, now: float) -> None:
        """Refresh the host state report (:attr:`host_sample`)."""
        self._monitor.sample_host(now)

    def add_sample_listener(self, fn: Callable[[], None], may_skip: Callable[[], bool] | None = None,
                            skipped: Callable[[], None] | None = None) -> None:
        """*fn()* runs after every periodic sample (the SAN's step-1 trigger). With event-driven
        sampling (``cfg.skip_quiet_samples``), a period in which nothing here changed is skipped
        only if every listener's *may_skip()* agrees (a listener without one never does); then
        *skipped()* runs instead of *fn*."""
        self._monitor.add_sample_listener(fn, may_skip, skipped)

    def remove_sample_listener(self, fn: Callable[[], None]) -> None:
        self._monitor.remove_sample_listener(fn)

    # --- events ---------------------------------------------------------------------------
    @property
    def telemetry(self):
        """The telemetry publisher (MQTT; set by the daemon's entry point), or None."""
        return self._events.telemetry

    @telemetry.setter
    def telemetry(self, publisher) -> None:
        self._events.telemetry = publisher

    def emit(self, kind: int, vm: str = "", detail: str = "", progress=None, record=None) -> None:
        self._events.emit(kind, vm, detail, progress, record)

    def watch(self, replay: int) -> AsyncIterator[npb.Event]:
        """The events from now on, after the last *replay* ones (WatchEvents)."""
        return self._events.watch(replay)

    def recent_events(self) -> list[npb.Event]:
        """The events still in the replay buffer, oldest first."""
        return self._events.recent()

    def on_lifecycle(self, name: str, state: DomState, reason: str) -> None:
        """The hypervisor's lifecycle event for domain *name*."""
        self._ops.on_lifecycle(name, state, reason)

    # --- the host as other agents see it ------------------------------------------------
    def view(self) -> HostView:
        """The read-only view of this host (live: it follows every change)."""
        return self._state.view

    def allocated(self) -> tuple[float, int]:
        """(CPU cores, memory MiB) requested here, incoming reservations included."""
        return self._state.view.allocated()

    def used(self) -> tuple[float, float]:
        """(CPU cores, memory MiB) used here, incoming VMs' use included (DESIGN §7)."""
        return self._state.view.used()

    def update_attributes(self, set_: dict | None = None, remove=()) -> None:
        """Change this host's attributes (a trace's machine attribute events)."""
        self._state.update_attributes(set_, remove)
        self._monitor.attributes_changed()

    def update_capacity(self, cpu_cores: float, mem_mib: int) -> None:
        """Change this host's capacity (a trace's machine UPDATE); the view follows. VMs already
        here stay: a host left over capacity is overloaded, which is the SAN's business."""
        self._state.update_capacity(cpu_cores, mem_mib)
        self._monitor.capacity_changed()

    # --- VM operations -------------------------------------------------------------------
    async def start_vm(self, spec: VmSpec) -> VmEntry:
        """Admit, boot and wait for the guest's first answer; undone if any of it fails."""
        return await self._ops.start_vm(spec)

    async def stop_vm(self, name: str) -> None:
        await self._ops.stop_vm(name)

    async def set_workload(self, name: str, cpu_load: float | None, wss_mib: int | None,
                           dirty_mib_s: float | None) -> VmEntry:
        return await self._ops.set_workload(name, cpu_load, wss_mib, dirty_mib_s)

    async def update_request(self, name: str, req_cpu_cores: float, mem_mib: int, priority: int,
                             production: bool, constraints: tuple = ()) -> VmEntry:
        """Change what VM *name* requests (a trace's task UPDATE_PENDING/RUNNING and constraint
        update): its requested CPU and memory, priority, production band and constraints, as
        admission and the SAN see them. vCPUs grow to hold the request; the VM's use does not
        change. A VM migrating out refuses (FailedPrecondition): the destination holds its spec."""
        return await self._ops.update_request(name, req_cpu_cores, mem_mib, priority, production, constraints)

    async def pause_vm(self, name: str) -> None:
        """Pause a running VM (RUS spike policy); its resources stay allocated."""
        await self._ops.pause_vm(name)

    async def inject_fault(self, name: str, kind: str) -> str:
        return await self._ops.inject_fault(name, kind)

    # --- migration: source side -----------------------------------------------------------
    async def migrate(self, name: str, dest: str, opts: MigrationOptions,
                      prepared_mid: str = "", forced: bool = False) -> npb.MigrationRecord:
        """Live-migrate *name* to *dest*. The destination admits it with PrepareIncoming, unless
        *prepared_mid* names a reservation it already holds (SAN TaskMigrationProcessRequest).
        Every step is journaled before it is taken (daemon/journal.py); the one final record is
        written when the guest is verified on one end, here or by reconciliation after a crash."""
        return await self._source.migrate(name, dest, opts, prepared_mid, forced)

    async def abort_migration(self, name: str) -> None:
        await self._source.abort_migration(name)

    # --- migration: destination side ---------------------------------------------------------
    async def reserve(self, spec: VmSpec, src: str, mid: str, force: bool, cpu_used: float = 0.0,
                      mem_used: float = 0.0, check: Callable[[HostView], None] | None = None) -> None:
        """Admission: reserve *spec*'s resources for incoming migration *mid* (PrepareIncoming, or
        a SAN's TaskMigrationProcessRequest) as a lease owned by *src*. *check(view)* (the SAN's
        final check, a policy over this host's view) runs inside the admission lock, so that
        check and reservation are one step: the first request wins."""
        await self._dest.reserve(spec, src, mid, force, cpu_used, mem_used, check)

    def release(self, mid: str, why: str = "released") -> None:
        """Admission: give back the reservation of migration *mid* (it did not happen)."""
        self._dest.release(mid, why)

    def arriving(self) -> dict[str, tuple[str, Reservation]]:
        """VMs whose source has let them go and that this host is verifying: name -> (migration
        id, reservation). Listed as migrating in, so that a VM is listed by one host at every
        step of its hand-over."""
        return self._state.arriving()

    async def finish_incoming(self, mid: str, name: str, migrated: bool, hb_before: int,
                              boot_id: str) -> Verification:
        """The end of an incoming migration, as its source saw it. Idempotent: asked again (the
        source retried, or reconciled after a crash) it gives the first answer."""
        return await self._dest.finish_incoming(mid, name, migrated, hb_before, boot_id)

    # --- reconciliation --------------------------------------------------------------------
    def restore_journal(self) -> None:
        self._reconciler.restore_journal()

    def mark_migrating(self) -> None:
        self._reconciler.mark_migrating()

    async def reconcile(self) -> None:
        """Finish what the journal still holds open, from where the domains are."""
        await self._reconciler.reconcile()

    async def reconcile_one(self, mid: str, budget_s: float, after_crash: bool = False) -> npb.MigrationRecord | None:
        return await self._reconciler.reconcile_one(mid, budget_s, after_crash)

    def leases(self) -> list[npb.Lease]:
        return self._state.leases()
