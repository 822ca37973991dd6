"""The hypervisor backend interface of the node daemon, and the types it speaks.

Two implementations: hv_libvirt (real VMs; the only module importing libvirt) and,
for model cells, a model backend. The node agent only ever sees this interface.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from typing import Awaitable, Callable, Protocol

from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.domain.validate import MAX_CONSTRAINTS, MAX_NAME, bounded_list, bounded_str, shown
from cellbed.domain.constraints import Constraint, ConstraintOp

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")

# Ranges that a request is validated against (allowed values are in every error message).
MEM_MIB_RANGE = (64, 8192)
VCPUS_RANGE = (1, 8)
CPU_LOAD_RANGE = (0.0, 1.0)
DIRTY_MIB_S_RANGE = (0.0, 65536.0)
PRIORITY_RANGE = (0, 11)
BANDWIDTH_RANGE = (0, 100_000)
DOWNTIME_MS_RANGE = (0, 60_000)
PARALLEL_RANGE = (0, 16)
TIMEOUT_S_RANGE = (0.0, 3600.0)


@dataclasses.dataclass(frozen=True)
class SpecLimits:
    """What a backend can run: real guests have the ranges above; model tasks (GCD-sized,
    from a few MiB to a large share of a machine) have wider ones."""

    mem_mib: tuple[int, int] = MEM_MIB_RANGE
    vcpus: tuple[int, int] = VCPUS_RANGE
    guest_overhead_mib: int = 80     # guest memory the working set cannot use


REAL_VM_LIMITS = SpecLimits()
MODEL_LIMITS = SpecLimits(mem_mib=(1, 4 * 1024 * 1024), vcpus=(1, 1024), guest_overhead_mib=0)


def max_wss_mib(mem_mib: int) -> int:
    """Largest working set the guest can hold: a 128 MiB guest has ~71 MiB available
    (single-box facts), so keep 80 MiB of the guest for the kernel and initramfs."""
    return max(0, mem_mib - 80)


@dataclasses.dataclass(frozen=True, slots=True)
class VmSpec:
    name: str
    mem_mib: int = 128
    vcpus: int = 1
    cpu_load: float = 0.1          # fraction of each vCPU
    wss_mib: int = 16              # working set, MiB
    dirty_mib_s: float = 0.0       # MiB/s; math.inf = as fast as possible
    production: bool = False
    priority: int = 0
    req_cpu_cores: float = 0.0     # requested CPU, cores; 0 -> vcpus * cpu_load
    created_unix_s: float = 0.0
    constraints: tuple[Constraint, ...] = ()   # on host attributes, all must hold
    user: str = ""                 # owner (Megha fair shares)

    def validate(self, limits: SpecLimits = REAL_VM_LIMITS) -> "VmSpec":
        if not NAME_RE.fullmatch(self.name or ""):
            raise InvalidArgument(f"name={shown(self.name)} is invalid: allowed [a-z0-9][a-z0-9-]{{0,30}}")
        bounded_str("user", self.user, MAX_NAME)
        bounded_list("constraints", self.constraints, MAX_CONSTRAINTS)
        check_range("mem_mib", self.mem_mib, *limits.mem_mib, "MiB")
        check_range("vcpus", self.vcpus, *limits.vcpus)
        check_range("cpu_load", self.cpu_load, *CPU_LOAD_RANGE)
        check_range("wss_mib", self.wss_mib, 0, max(0, self.mem_mib - limits.guest_overhead_mib), "MiB")
        if self.dirty_mib_s != math.inf:  # +inf = as fast as possible; -inf is out of range
            check_range("dirty_mib_s", self.dirty_mib_s, *DIRTY_MIB_S_RANGE, "MiB/s")
        check_range("priority", self.priority, *PRIORITY_RANGE)
        check_range("req_cpu_cores", self.req_cpu_cores, 0.0, float(self.vcpus), "cores")
        return self

    @property
    def requested_cpu(self) -> float:
        return self.req_cpu_cores if self.req_cpu_cores > 0 else self.vcpus * self.cpu_load

    def with_workload(self, cpu_load: float | None = None, wss_mib: int | None = None,
                      dirty_mib_s: float | None = None, limits: SpecLimits = REAL_VM_LIMITS) -> "VmSpec":
        ch = {k: v for k, v in (("cpu_load", cpu_load), ("wss_mib", wss_mib), ("dirty_mib_s", dirty_mib_s))
              if v is not None}
        return dataclasses.replace(self, **ch).validate(limits)

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["dirty_mib_s"] = "max" if math.isinf(self.dirty_mib_s) else self.dirty_mib_s
        d["constraints"] = [[c.attribute, int(c.op), c.value] for c in self.constraints]
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, s: str) -> "VmSpec":
        d = json.loads(s)
        if d.get("dirty_mib_s") == "max":
            d["dirty_mib_s"] = math.inf
        d["constraints"] = tuple(Constraint(a, ConstraintOp(o), v) for a, o, v in d.get("constraints", ()))
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})


class DomState(str, enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"
    SHUTOFF = "shutoff"
    CRASHED = "crashed"
    OTHER = "other"


@dataclasses.dataclass(slots=True)
class DomainSample:
    """One domain as the hypervisor reports it at one instant."""

    name: str
    state: DomState
    reason: str
    spec: VmSpec | None          # None: not a Cellbed domain (no metadata)
    cpu_time_ns: int = 0
    rss_bytes: int = 0
    dirty_rate_mib_s: float = -1.0  # -1: not measured
    incoming: bool = False       # paused waiting for an incoming migration to finish
    unreadable: bool = False     # listed, but whether it is ours could not be read now (libvirtd restarting)


class TimeoutPolicy(str, enum.Enum):
    ABORT = "abort"
    AUTO_CONVERGE = "auto-converge"
    POSTCOPY = "postcopy"


@dataclasses.dataclass(frozen=True)
class MigrationOptions:
    bandwidth_mib_s: int = 0       # 0 = unlimited
    max_downtime_ms: int = 0       # 0 = QEMU default (300 ms)
    auto_converge: bool = False
    postcopy: bool = False         # switch to post-copy after the first pass
    compression: bool = False
    parallel_connections: int = 0
    completion_timeout_s: float = 120.0
    timeout_policy: TimeoutPolicy = TimeoutPolicy.ABORT
    tls: bool | None = None        # migration data over TLS; None = the node's default (on unless insecure)

    def validate(self) -> "MigrationOptions":
        check_range("bandwidth_mib_s", self.bandwidth_mib_s, *BANDWIDTH_RANGE, "MiB/s")
        check_range("max_downtime_ms", self.max_downtime_ms, *DOWNTIME_MS_RANGE, "ms")
        check_range("parallel_connections", self.parallel_connections, *PARALLEL_RANGE)
        check_range("completion_timeout_s", self.completion_timeout_s, *TIMEOUT_S_RANGE, "s")
        return self

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["timeout_policy"] = self.timeout_policy.value
        return d


@dataclasses.dataclass
class JobProgress:
    elapsed_ms: float = 0.0
    data_processed: int = 0
    data_remaining: int = 0
    data_total: int = 0
    memory_iteration: int = 0
    memory_dirty_rate: int = 0      # bytes/s
    memory_bps: int = 0             # bytes/s
    phase: str = "precopy"

    @classmethod
    def from_job_stats(cls, st: dict, switched: bool) -> "JobProgress":
        """From libvirt's running-job statistics (a jobStats dict)."""
        return cls(elapsed_ms=float(st.get("time_elapsed", 0)), data_processed=int(st.get("data_processed", 0)),
                   data_remaining=int(st.get("data_remaining", 0)), data_total=int(st.get("data_total", 0)),
                   memory_iteration=int(st.get("memory_iteration", 0)),
                   memory_dirty_rate=int(st.get("memory_dirty_rate", 0)), memory_bps=int(st.get("memory_bps", 0)),
                   phase="postcopy" if switched else "precopy")


@dataclasses.dataclass
class MigrationStats:
    """libvirt's completed-job statistics (units as in the MigrationRecord)."""

    time_elapsed_ms: float = 0.0
    downtime_ms: float = 0.0
    setup_time_ms: float = 0.0
    data_total_bytes: int = 0
    memory_processed_bytes: int = 0
    memory_iteration: int = 0
    memory_dirty_rate: int = 0
    memory_bps: int = 0
    wall_ms: float = 0.0
    postcopy_switched: bool = False
    timeout_action: str = ""
    source: str = ""                # where the numbers came from (event / destination)

    @classmethod
    def from_job_stats(cls, st: dict, source: str) -> "MigrationStats":
        return cls(
            time_elapsed_ms=float(st.get("time_elapsed", 0)),
            downtime_ms=float(st.get("downtime", 0)),
            setup_time_ms=float(st.get("setup_time", 0)),
            data_total_bytes=int(st.get("data_total", 0)),
            memory_processed_bytes=int(st.get("memory_processed", 0)),
            memory_iteration=int(st.get("memory_iteration", 0)),
            memory_dirty_rate=int(st.get("memory_dirty_rate", 0)),
            memory_bps=int(st.get("memory_bps", 0)),
            source=source,
        )


ProgressCallback = Callable[[JobProgress], Awaitable[None] | None]


class Hypervisor(Protocol):
    accel: str

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def list(self) -> list[DomainSample]: ...
    async def start(self, spec: VmSpec) -> None: ...
    async def stop(self, name: str) -> None: ...
    async def domain_state(self, name: str) -> tuple[DomState, str]: ...
    async def update_spec(self, spec: VmSpec) -> None: ...
    async def pause(self, name: str) -> None: ...
    async def resume(self, name: str) -> None: ...
    async def migrate(self, name: str, dest_uri: str, opts: MigrationOptions,
                      on_progress: ProgressCallback | None = None) -> MigrationStats: ...
    async def abort_migration(self, name: str) -> None: ...
    def channel_path(self, name: str) -> str: ...
    def versions(self) -> tuple[str, str]: ...


def version_text(v: int) -> str:
    """libvirt's integer version (major * 1,000,000 + minor * 1,000 + release) as text."""
    return f"{v // 1_000_000}.{(v // 1000) % 1000}.{v % 1000}"
