"""A read-only view of a NodeAgent's host, for the agents that share its process (the SAN, the
model cell): capacity, attributes, the VMs and the incoming reservations, and the usual
(cpu, mem) sums. Whatever changes the host goes through the NodeAgent's own API (admission:
``reserve``/``release``; ``update_attributes``, ``update_capacity``, ``update_request``; VM
operations)."""
from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from cellbed.daemon.inventory import Reservation, VmEntry
    from cellbed.daemon.config import NodeConfig


class HostView:
    """Live, read-only: the mappings follow the agent's state, and cannot be written through."""

    def __init__(self, cfg: "NodeConfig", vms: dict, incoming: dict) -> None:
        self._cfg = cfg
        self.vms: Mapping[str, "VmEntry"] = MappingProxyType(vms)
        self.incoming: Mapping[str, "Reservation"] = MappingProxyType(incoming)   # migration id -> reservation

    def follow(self, cfg: "NodeConfig") -> None:
        """The owning NodeAgent's configuration was replaced (a capacity update): read this one."""
        self._cfg = cfg

    @property
    def host(self) -> str:
        return self._cfg.host

    @property
    def capacity(self) -> tuple[float, int]:
        """(CPU cores, memory MiB)."""
        return self._cfg.cpu_cores, self._cfg.mem_mib

    @property
    def attributes(self) -> Mapping:
        return MappingProxyType(self._cfg.attributes)

    @property
    def vm_count(self) -> int:
        return len(self.vms)

    @property
    def vm_names(self):
        return self.vms.keys()

    @property
    def incoming_names(self) -> set[str]:
        return {r.spec.name for r in self.incoming.values()}

    def totals(self) -> tuple[float, float, float, float, float, int]:
        """One pass over the VMs (a hot path at scale: a tick and a sample read every host):
        (CPU cores, memory MiB) used by the VMs here, then :meth:`used` and :meth:`allocated`.
        Each sum runs over the VMs here first, then those on their way in."""
        cu = mu = cr = mr = 0
        for e in self.vms.values():
            cu += e.cpu_used_cores
            mu += e.rss_mib
            s = e.spec
            cr += s.requested_cpu
            mr += s.mem_mib
        vm_cu, vm_mu = cu, mu
        for r in self.incoming.values():
            cu += r.cpu_used
            mu += r.mem_used
            mr += r.spec.mem_mib
            cr += r.spec.requested_cpu
        return vm_cu, vm_mu, cu, mu, cr, mr

    def allocated(self) -> tuple[float, int]:
        """(CPU cores, memory MiB) requested by the VMs here and those on their way in."""
        t = self.totals()
        return t[4], t[5]

    def used(self) -> tuple[float, float]:
        """(CPU cores, memory MiB) used: measured use of the VMs here (incl. those leaving) plus
        the use of every VM on its way in (DESIGN §7: counted on both ends)."""
        t = self.totals()
        return t[2], t[3]

    def prod_requested(self) -> tuple[float, float]:
        """(CPU cores, memory MiB) requested by production VMs, here and incoming."""
        cpu = mem = 0.0
        for e in self.vms.values():
            if e.spec.production:
                cpu += e.spec.requested_cpu
                mem += e.spec.mem_mib
        for r in self.incoming.values():
            if r.spec.production:
                cpu += r.spec.requested_cpu
                mem += r.spec.mem_mib
        return cpu, mem
