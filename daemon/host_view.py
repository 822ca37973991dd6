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

    def allocated(self) -> tuple[float, int]:
        """(CPU cores, memory MiB) requested by the VMs here and those on their way in."""
        cpu = mem = 0                      # one pass, summed in sum()'s order (a hot path at scale)
        for e in self.vms.values():
            s = e.spec
            cpu += s.requested_cpu
            mem += s.mem_mib
        for r in self.incoming.values():
            mem += r.spec.mem_mib
            cpu += r.spec.requested_cpu
        return cpu, mem

    def used(self) -> tuple[float, float]:
        """(CPU cores, memory MiB) used: measured use of the VMs here (incl. those leaving) plus
        the use of every VM on its way in (DESIGN §7: counted on both ends)."""
        cpu = mem = 0
        for e in self.vms.values():
            cpu += e.cpu_used_cores
            mem += e.rss_mib
        for r in self.incoming.values():
            cpu += r.cpu_used
            mem += r.mem_used
        return cpu, mem

    def totals(self) -> tuple[float, float, float, float, float, int]:
        """One pass for a sample or a tick: (CPU cores, memory MiB) used by the VMs here, then
        :meth:`used` and :meth:`allocated`; each sum in the order those methods add it, so
        the figures are theirs to the last bit."""
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
