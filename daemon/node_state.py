"""What a node agent knows (its inventory), shared by the parts of the agent (daemon/agent.py):
the host's configuration, the VMs here, the leases (reservations for incoming migrations), the
migrations in flight from here, and the migration journal.

It holds state and answers questions about it; it takes no decision and calls nobody. The
parts change it in the steps their comments describe (the ones that must happen with no await
between them say so where they happen)."""
from __future__ import annotations

import asyncio
import dataclasses

from cellbed.daemon.config import NodeConfig
from cellbed.daemon.host_view import HostView
from cellbed.daemon.inventory import Reservation, VmEntry
from cellbed.daemon.journal import MigrationJournal
from cellbed.v1 import node_pb2 as npb


class NodeState:
    def __init__(self, cfg: NodeConfig) -> None:
        self._cfg = cfg
        self.vms: dict[str, VmEntry] = {}
        self.incoming: dict[str, Reservation] = {}        # migration id -> reservation (the lease)
        self.view = HostView(cfg, self.vms, self.incoming)  # live and read-only: for the SAN and the model cell
        self.migrating: dict[str, str] = {}                # vm -> migration id (outgoing)
        self.discarding: set[str] = set()                  # VMs whose failed start is being undone
        self.departed: dict[str, float] = {}               # VM -> when it migrated away or stopped (sample must not re-adopt)
        self.journal = MigrationJournal(cfg.state_dir)    # disabled without a state_dir (model cells)
        self.unresolved: dict[str, str] = {}               # open migration id -> why it is not finished
        self.settling: set[str] = set()                    # outgoing ids being finished right now
        self.finishing: dict[str, asyncio.Future] = {}     # incoming ids being verified right now
        self.handing_over: dict[str, tuple[str, str]] = {}  # VM -> (migration id, destination): left, not yet verified there

    # --- the host's configuration ------------------------------------------------------------
    @property
    def cfg(self) -> NodeConfig:
        """The current configuration (a capacity update replaces it: read it here, never keep it)."""
        return self._cfg

    def update_attributes(self, set_: dict | None = None, remove=()) -> None:
        self._cfg.attributes.update(set_ or {})     # the cfg's dict is this host's own
        for k in remove:
            self._cfg.attributes.pop(k, None)

    def update_capacity(self, cpu_cores: float, mem_mib: int) -> None:
        """Replace the configuration with one of the new capacity (validated first); the view follows."""
        self._cfg = dataclasses.replace(self._cfg, cpu_cores=float(cpu_cores), mem_mib=int(mem_mib)).validate()
        self.view.follow(self._cfg)

    # --- questions -------------------------------------------------------------------------------
    def lease_of(self, name: str) -> tuple[str, Reservation] | None:
        """(migration id, reservation) of the incoming migration of VM *name*, if this host holds one."""
        return next(((mid, r) for mid, r in self.incoming.items() if r.spec.name == name), None)

    def arriving(self) -> dict[str, tuple[str, Reservation]]:
        """VMs whose source has let them go and that this host is verifying (FinishIncoming
        under way): name -> (migration id, reservation). Listed as migrating in, so that a VM is
        listed by one host at every step of its hand-over, not by none until it is verified."""
        return {r.spec.name: (mid, r) for mid, r in self.incoming.items() if mid in self.finishing}

    def leases(self) -> list[npb.Lease]:
        return [npb.Lease(migration_id=mid, vm=r.spec.name, owner=r.src, expires_unix_s=r.expires_unix_s)
                for mid, r in self.incoming.items()]

    def forget_departures(self, now: float) -> None:
        """Drop the departures older than *now* (a listing begun at *now* no longer holds them)."""
        self.departed = {n: t for n, t in self.departed.items() if t >= now}
