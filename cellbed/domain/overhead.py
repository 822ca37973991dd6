"""What a guest costs its host beyond its own workload: the model backend's picture of a real
TCG guest (QEMU's resident memory and CPU, and its boot). Fitted from a real run by
:mod:`cellbed.experiment.twin.fit`; the identity (the default) is the plain model, in which a
task uses exactly what its workload says and starts at once.

    host CPU of a guest   = cpu_base_cores + cpu_gain × its workload's cores   (while it runs)
    host memory of a guest = mem_base_mib   + mem_gain × its memory (MiB)   (moved_mem_base_mib once migrated)
    a sample's measured CPU = the above + N(0, cpu_noise_sd); with host_cpu_cap, a host's guests
    share at most its capacity, as a real host's cgroup quota makes them

Under TCG a guest's QEMU soon holds all of its RAM (the kernel's page cache and allocator touch
it) plus the translation cache and device state, whatever its working set.
"""
from __future__ import annotations

import dataclasses

from cellbed.domain.errors import check_range


@dataclasses.dataclass(frozen=True)
class GuestOverhead:
    cpu_base_cores: float = 0.0
    cpu_gain: float = 1.0
    mem_base_mib: float = 0.0
    mem_gain: float = 1.0
    boot_s: float = 0.0            # from StartVm to a running guest (the node agent waits for it)
    boot_cpu_cores: float = 0.0    # host CPU while it boots
    moved_mem_base_mib: float | None = None   # mem_base_mib once the guest has migrated (None: the same):
                                   # a migration sends only non-zero pages, so the destination's QEMU holds less
    cpu_noise_sd: float = 0.0      # sd of a sample's measured CPU around the model's, cores (TCG's jitter)
    host_cpu_cap: bool = False     # a host's guests together use at most its CPU capacity (its cgroup quota)

    def validate(self) -> "GuestOverhead":
        check_range("guest.cpu_base_cores", self.cpu_base_cores, 0.0, 4.0, "cores")
        check_range("guest.cpu_gain", self.cpu_gain, 0.0, 20.0)
        check_range("guest.mem_base_mib", self.mem_base_mib, 0.0, 65536.0, "MiB")
        check_range("guest.mem_gain", self.mem_gain, 0.0, 20.0)
        check_range("guest.boot_s", self.boot_s, 0.0, 3600.0, "s")
        check_range("guest.boot_cpu_cores", self.boot_cpu_cores, 0.0, 64.0, "cores")
        if self.moved_mem_base_mib is not None:
            check_range("guest.moved_mem_base_mib", self.moved_mem_base_mib, -65536.0, 65536.0, "MiB")
        check_range("guest.cpu_noise_sd", self.cpu_noise_sd, 0.0, 4.0, "cores")
        return self

    @property
    def identity(self) -> bool:
        return self == GuestOverhead()

    def cpu(self, cores: float) -> float:
        return self.cpu_base_cores + self.cpu_gain * max(0.0, cores)

    def mem(self, mem_mib: float, moved: bool = False) -> float:
        base = self.moved_mem_base_mib if moved and self.moved_mem_base_mib is not None else self.mem_base_mib
        return max(0.0, base + self.mem_gain * max(0.0, mem_mib))
