"""What a node agent keeps per VM (its spec, state and measured use), per incoming migration (the reservation) and per verification."""
from __future__ import annotations

import dataclasses
from cellbed.daemon.guest_channel import GuestStatus
from cellbed.domain.vm import DomState, VmSpec


@dataclasses.dataclass(slots=True)
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
    known_since: float = 0.0  # monotonic time from which the hypervisor lists its domain (a listing begun
                              # earlier may miss it: a sample must not call it vanished)


@dataclasses.dataclass(slots=True)
class Reservation:
    spec: VmSpec
    src: str
    expires: float
    cpu_used: float = 0.0      # the task's usage on its source, cores (counted here while it moves)
    mem_used: float = 0.0      # MiB
    expires_unix_s: float = 0.0   # the lease's expiry as the operator sees it (the journal keeps it)
    since: float = 0.0            # monotonic time it was granted


@dataclasses.dataclass
class Verification:
    verified: bool
    detail: str
    heartbeat_after: int = 0
    integrity_pages: int = 0
    integrity_bad: int = 0
