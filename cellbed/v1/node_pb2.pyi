from cellbed.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VmState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VM_STATE_UNSPECIFIED: _ClassVar[VmState]
    VM_STATE_RUNNING: _ClassVar[VmState]
    VM_STATE_PAUSED: _ClassVar[VmState]
    VM_STATE_SHUTOFF: _ClassVar[VmState]
    VM_STATE_CRASHED: _ClassVar[VmState]
    VM_STATE_MIGRATING_OUT: _ClassVar[VmState]
    VM_STATE_MIGRATING_IN: _ClassVar[VmState]

class TimeoutPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIMEOUT_POLICY_UNSPECIFIED: _ClassVar[TimeoutPolicy]
    TIMEOUT_POLICY_ABORT: _ClassVar[TimeoutPolicy]
    TIMEOUT_POLICY_AUTO_CONVERGE: _ClassVar[TimeoutPolicy]
    TIMEOUT_POLICY_POSTCOPY: _ClassVar[TimeoutPolicy]

class MigrationOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MIGRATION_OUTCOME_UNSPECIFIED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_SUCCEEDED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_FAILED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_ABORTED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_VERIFICATION_FAILED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_REFUSED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_POSTCOPY_FAILED: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_LOST: _ClassVar[MigrationOutcome]
    MIGRATION_OUTCOME_DUPLICATED: _ClassVar[MigrationOutcome]

class FaultKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAULT_KIND_UNSPECIFIED: _ClassVar[FaultKind]
    FAULT_KIND_CORRUPT: _ClassVar[FaultKind]
    FAULT_KIND_PANIC: _ClassVar[FaultKind]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_VM_STARTED: _ClassVar[EventKind]
    EVENT_KIND_VM_STOPPED: _ClassVar[EventKind]
    EVENT_KIND_VM_CRASHED: _ClassVar[EventKind]
    EVENT_KIND_MIGRATION_STARTED: _ClassVar[EventKind]
    EVENT_KIND_MIGRATION_PROGRESS: _ClassVar[EventKind]
    EVENT_KIND_MIGRATION_FINISHED: _ClassVar[EventKind]
    EVENT_KIND_WORKLOAD_SET: _ClassVar[EventKind]
    EVENT_KIND_SAN_STEP: _ClassVar[EventKind]
    EVENT_KIND_SPIKE_ACTION: _ClassVar[EventKind]
VM_STATE_UNSPECIFIED: VmState
VM_STATE_RUNNING: VmState
VM_STATE_PAUSED: VmState
VM_STATE_SHUTOFF: VmState
VM_STATE_CRASHED: VmState
VM_STATE_MIGRATING_OUT: VmState
VM_STATE_MIGRATING_IN: VmState
TIMEOUT_POLICY_UNSPECIFIED: TimeoutPolicy
TIMEOUT_POLICY_ABORT: TimeoutPolicy
TIMEOUT_POLICY_AUTO_CONVERGE: TimeoutPolicy
TIMEOUT_POLICY_POSTCOPY: TimeoutPolicy
MIGRATION_OUTCOME_UNSPECIFIED: MigrationOutcome
MIGRATION_OUTCOME_SUCCEEDED: MigrationOutcome
MIGRATION_OUTCOME_FAILED: MigrationOutcome
MIGRATION_OUTCOME_ABORTED: MigrationOutcome
MIGRATION_OUTCOME_VERIFICATION_FAILED: MigrationOutcome
MIGRATION_OUTCOME_REFUSED: MigrationOutcome
MIGRATION_OUTCOME_POSTCOPY_FAILED: MigrationOutcome
MIGRATION_OUTCOME_LOST: MigrationOutcome
MIGRATION_OUTCOME_DUPLICATED: MigrationOutcome
FAULT_KIND_UNSPECIFIED: FaultKind
FAULT_KIND_CORRUPT: FaultKind
FAULT_KIND_PANIC: FaultKind
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_VM_STARTED: EventKind
EVENT_KIND_VM_STOPPED: EventKind
EVENT_KIND_VM_CRASHED: EventKind
EVENT_KIND_MIGRATION_STARTED: EventKind
EVENT_KIND_MIGRATION_PROGRESS: EventKind
EVENT_KIND_MIGRATION_FINISHED: EventKind
EVENT_KIND_WORKLOAD_SET: EventKind
EVENT_KIND_SAN_STEP: EventKind
EVENT_KIND_SPIKE_ACTION: EventKind

class Workload(_message.Message):
    __slots__ = ("cpu_load", "wss_mib", "dirty_mib_s", "dirty_max")
    CPU_LOAD_FIELD_NUMBER: _ClassVar[int]
    WSS_MIB_FIELD_NUMBER: _ClassVar[int]
    DIRTY_MIB_S_FIELD_NUMBER: _ClassVar[int]
    DIRTY_MAX_FIELD_NUMBER: _ClassVar[int]
    cpu_load: float
    wss_mib: int
    dirty_mib_s: float
    dirty_max: bool
    def __init__(self, cpu_load: _Optional[float] = ..., wss_mib: _Optional[int] = ..., dirty_mib_s: _Optional[float] = ..., dirty_max: _Optional[bool] = ...) -> None: ...

class VmSpec(_message.Message):
    __slots__ = ("name", "mem_mib", "vcpus", "workload", "production", "priority", "req_cpu_cores", "constraints", "user")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    VCPUS_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    PRODUCTION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REQ_CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    name: str
    mem_mib: int
    vcpus: int
    workload: Workload
    production: bool
    priority: int
    req_cpu_cores: float
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    user: str
    def __init__(self, name: _Optional[str] = ..., mem_mib: _Optional[int] = ..., vcpus: _Optional[int] = ..., workload: _Optional[_Union[Workload, _Mapping]] = ..., production: _Optional[bool] = ..., priority: _Optional[int] = ..., req_cpu_cores: _Optional[float] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., user: _Optional[str] = ...) -> None: ...

class VmInfo(_message.Message):
    __slots__ = ("spec", "state", "state_reason", "host", "cpu_used_cores", "rss_mib", "dirty_rate_mib_s", "heartbeat", "boot_id", "guest_cpu_actual", "guest_dirty_mib_s", "created_unix_s", "boot_to_workload_s")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_CORES_FIELD_NUMBER: _ClassVar[int]
    RSS_MIB_FIELD_NUMBER: _ClassVar[int]
    DIRTY_RATE_MIB_S_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    GUEST_CPU_ACTUAL_FIELD_NUMBER: _ClassVar[int]
    GUEST_DIRTY_MIB_S_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    BOOT_TO_WORKLOAD_S_FIELD_NUMBER: _ClassVar[int]
    spec: VmSpec
    state: VmState
    state_reason: str
    host: str
    cpu_used_cores: float
    rss_mib: float
    dirty_rate_mib_s: float
    heartbeat: int
    boot_id: str
    guest_cpu_actual: float
    guest_dirty_mib_s: float
    created_unix_s: float
    boot_to_workload_s: float
    def __init__(self, spec: _Optional[_Union[VmSpec, _Mapping]] = ..., state: _Optional[_Union[VmState, str]] = ..., state_reason: _Optional[str] = ..., host: _Optional[str] = ..., cpu_used_cores: _Optional[float] = ..., rss_mib: _Optional[float] = ..., dirty_rate_mib_s: _Optional[float] = ..., heartbeat: _Optional[int] = ..., boot_id: _Optional[str] = ..., guest_cpu_actual: _Optional[float] = ..., guest_dirty_mib_s: _Optional[float] = ..., created_unix_s: _Optional[float] = ..., boot_to_workload_s: _Optional[float] = ...) -> None: ...

class HostCapacity(_message.Message):
    __slots__ = ("cpu_cores", "mem_mib", "cpu_norm", "mem_norm")
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    CPU_NORM_FIELD_NUMBER: _ClassVar[int]
    MEM_NORM_FIELD_NUMBER: _ClassVar[int]
    cpu_cores: float
    mem_mib: int
    cpu_norm: float
    mem_norm: float
    def __init__(self, cpu_cores: _Optional[float] = ..., mem_mib: _Optional[int] = ..., cpu_norm: _Optional[float] = ..., mem_norm: _Optional[float] = ...) -> None: ...

class HostState(_message.Message):
    __slots__ = ("host", "address", "capacity", "cpu_used_cores", "mem_alloc_mib", "cpu_req_cores", "vm_count", "migrations_out", "migrations_in", "cgroup_cpu_cores", "cgroup_mem_mib", "daemon_rss_mib", "daemon_cpu", "accel", "sampled_unix_s", "qemu_version", "libvirt_version", "mem_used_mib", "attributes", "asr_class", "leases", "unresolved")
    HOST_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_CORES_FIELD_NUMBER: _ClassVar[int]
    MEM_ALLOC_MIB_FIELD_NUMBER: _ClassVar[int]
    CPU_REQ_CORES_FIELD_NUMBER: _ClassVar[int]
    VM_COUNT_FIELD_NUMBER: _ClassVar[int]
    MIGRATIONS_OUT_FIELD_NUMBER: _ClassVar[int]
    MIGRATIONS_IN_FIELD_NUMBER: _ClassVar[int]
    CGROUP_CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    CGROUP_MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    DAEMON_RSS_MIB_FIELD_NUMBER: _ClassVar[int]
    DAEMON_CPU_FIELD_NUMBER: _ClassVar[int]
    ACCEL_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    QEMU_VERSION_FIELD_NUMBER: _ClassVar[int]
    LIBVIRT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MEM_USED_MIB_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    ASR_CLASS_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    UNRESOLVED_FIELD_NUMBER: _ClassVar[int]
    host: str
    address: str
    capacity: HostCapacity
    cpu_used_cores: float
    mem_alloc_mib: int
    cpu_req_cores: float
    vm_count: int
    migrations_out: int
    migrations_in: int
    cgroup_cpu_cores: float
    cgroup_mem_mib: float
    daemon_rss_mib: float
    daemon_cpu: float
    accel: str
    sampled_unix_s: float
    qemu_version: str
    libvirt_version: str
    mem_used_mib: float
    attributes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Attribute]
    asr_class: _common_pb2.AsrClass
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    unresolved: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, host: _Optional[str] = ..., address: _Optional[str] = ..., capacity: _Optional[_Union[HostCapacity, _Mapping]] = ..., cpu_used_cores: _Optional[float] = ..., mem_alloc_mib: _Optional[int] = ..., cpu_req_cores: _Optional[float] = ..., vm_count: _Optional[int] = ..., migrations_out: _Optional[int] = ..., migrations_in: _Optional[int] = ..., cgroup_cpu_cores: _Optional[float] = ..., cgroup_mem_mib: _Optional[float] = ..., daemon_rss_mib: _Optional[float] = ..., daemon_cpu: _Optional[float] = ..., accel: _Optional[str] = ..., sampled_unix_s: _Optional[float] = ..., qemu_version: _Optional[str] = ..., libvirt_version: _Optional[str] = ..., mem_used_mib: _Optional[float] = ..., attributes: _Optional[_Iterable[_Union[_common_pb2.Attribute, _Mapping]]] = ..., asr_class: _Optional[_Union[_common_pb2.AsrClass, str]] = ..., leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., unresolved: _Optional[_Iterable[str]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("migration_id", "vm", "owner", "expires_unix_s")
    MIGRATION_ID_FIELD_NUMBER: _ClassVar[int]
    VM_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    migration_id: str
    vm: str
    owner: str
    expires_unix_s: float
    def __init__(self, migration_id: _Optional[str] = ..., vm: _Optional[str] = ..., owner: _Optional[str] = ..., expires_unix_s: _Optional[float] = ...) -> None: ...

class StartVmRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: VmSpec
    def __init__(self, spec: _Optional[_Union[VmSpec, _Mapping]] = ...) -> None: ...

class StartVmResponse(_message.Message):
    __slots__ = ("vm",)
    VM_FIELD_NUMBER: _ClassVar[int]
    vm: VmInfo
    def __init__(self, vm: _Optional[_Union[VmInfo, _Mapping]] = ...) -> None: ...

class StopVmRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class StopVmResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListVmsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListVmsResponse(_message.Message):
    __slots__ = ("vms",)
    VMS_FIELD_NUMBER: _ClassVar[int]
    vms: _containers.RepeatedCompositeFieldContainer[VmInfo]
    def __init__(self, vms: _Optional[_Iterable[_Union[VmInfo, _Mapping]]] = ...) -> None: ...

class GetHostStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetHostStateResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: HostState
    def __init__(self, state: _Optional[_Union[HostState, _Mapping]] = ...) -> None: ...

class SetWorkloadRequest(_message.Message):
    __slots__ = ("name", "workload")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    name: str
    workload: Workload
    def __init__(self, name: _Optional[str] = ..., workload: _Optional[_Union[Workload, _Mapping]] = ...) -> None: ...

class SetWorkloadResponse(_message.Message):
    __slots__ = ("vm",)
    VM_FIELD_NUMBER: _ClassVar[int]
    vm: VmInfo
    def __init__(self, vm: _Optional[_Union[VmInfo, _Mapping]] = ...) -> None: ...

class MigrationOptions(_message.Message):
    __slots__ = ("bandwidth_mib_s", "max_downtime_ms", "auto_converge", "postcopy", "compression", "parallel_connections", "completion_timeout_s", "timeout_policy", "tls")
    BANDWIDTH_MIB_S_FIELD_NUMBER: _ClassVar[int]
    MAX_DOWNTIME_MS_FIELD_NUMBER: _ClassVar[int]
    AUTO_CONVERGE_FIELD_NUMBER: _ClassVar[int]
    POSTCOPY_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_POLICY_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    bandwidth_mib_s: int
    max_downtime_ms: int
    auto_converge: bool
    postcopy: bool
    compression: bool
    parallel_connections: int
    completion_timeout_s: float
    timeout_policy: TimeoutPolicy
    tls: bool
    def __init__(self, bandwidth_mib_s: _Optional[int] = ..., max_downtime_ms: _Optional[int] = ..., auto_converge: _Optional[bool] = ..., postcopy: _Optional[bool] = ..., compression: _Optional[bool] = ..., parallel_connections: _Optional[int] = ..., completion_timeout_s: _Optional[float] = ..., timeout_policy: _Optional[_Union[TimeoutPolicy, str]] = ..., tls: _Optional[bool] = ...) -> None: ...

class MigrationRecord(_message.Message):
    __slots__ = ("id", "vm", "src", "dst", "start_unix_s", "wall_ms", "time_elapsed_ms", "downtime_ms", "setup_time_ms", "data_total_bytes", "memory_processed_bytes", "memory_iteration", "memory_dirty_rate", "memory_bps", "options", "outcome", "detail", "timeout_action", "postcopy_switched", "heartbeat_before", "heartbeat_after", "integrity_pages", "integrity_bad", "mem_mib", "wss_mib", "dirty_mib_s", "forced", "tls", "guest_dirty_mib_s", "sampled_dirty_mib_s", "reconciled", "hint")
    ID_FIELD_NUMBER: _ClassVar[int]
    VM_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    START_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    TIME_ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    DOWNTIME_MS_FIELD_NUMBER: _ClassVar[int]
    SETUP_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DATA_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PROCESSED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ITERATION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_DIRTY_RATE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BPS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_ACTION_FIELD_NUMBER: _ClassVar[int]
    POSTCOPY_SWITCHED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AFTER_FIELD_NUMBER: _ClassVar[int]
    INTEGRITY_PAGES_FIELD_NUMBER: _ClassVar[int]
    INTEGRITY_BAD_FIELD_NUMBER: _ClassVar[int]
    MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    WSS_MIB_FIELD_NUMBER: _ClassVar[int]
    DIRTY_MIB_S_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    GUEST_DIRTY_MIB_S_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_DIRTY_MIB_S_FIELD_NUMBER: _ClassVar[int]
    RECONCILED_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    vm: str
    src: str
    dst: str
    start_unix_s: float
    wall_ms: float
    time_elapsed_ms: float
    downtime_ms: float
    setup_time_ms: float
    data_total_bytes: int
    memory_processed_bytes: int
    memory_iteration: int
    memory_dirty_rate: int
    memory_bps: int
    options: MigrationOptions
    outcome: MigrationOutcome
    detail: str
    timeout_action: str
    postcopy_switched: bool
    heartbeat_before: int
    heartbeat_after: int
    integrity_pages: int
    integrity_bad: int
    mem_mib: int
    wss_mib: int
    dirty_mib_s: float
    forced: bool
    tls: bool
    guest_dirty_mib_s: float
    sampled_dirty_mib_s: float
    reconciled: bool
    hint: str
    def __init__(self, id: _Optional[str] = ..., vm: _Optional[str] = ..., src: _Optional[str] = ..., dst: _Optional[str] = ..., start_unix_s: _Optional[float] = ..., wall_ms: _Optional[float] = ..., time_elapsed_ms: _Optional[float] = ..., downtime_ms: _Optional[float] = ..., setup_time_ms: _Optional[float] = ..., data_total_bytes: _Optional[int] = ..., memory_processed_bytes: _Optional[int] = ..., memory_iteration: _Optional[int] = ..., memory_dirty_rate: _Optional[int] = ..., memory_bps: _Optional[int] = ..., options: _Optional[_Union[MigrationOptions, _Mapping]] = ..., outcome: _Optional[_Union[MigrationOutcome, str]] = ..., detail: _Optional[str] = ..., timeout_action: _Optional[str] = ..., postcopy_switched: _Optional[bool] = ..., heartbeat_before: _Optional[int] = ..., heartbeat_after: _Optional[int] = ..., integrity_pages: _Optional[int] = ..., integrity_bad: _Optional[int] = ..., mem_mib: _Optional[int] = ..., wss_mib: _Optional[int] = ..., dirty_mib_s: _Optional[float] = ..., forced: _Optional[bool] = ..., tls: _Optional[bool] = ..., guest_dirty_mib_s: _Optional[float] = ..., sampled_dirty_mib_s: _Optional[float] = ..., reconciled: _Optional[bool] = ..., hint: _Optional[str] = ...) -> None: ...

class MigrateVmRequest(_message.Message):
    __slots__ = ("name", "dest_host", "options")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEST_HOST_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    dest_host: str
    options: MigrationOptions
    def __init__(self, name: _Optional[str] = ..., dest_host: _Optional[str] = ..., options: _Optional[_Union[MigrationOptions, _Mapping]] = ...) -> None: ...

class MigrateVmResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: MigrationRecord
    def __init__(self, record: _Optional[_Union[MigrationRecord, _Mapping]] = ...) -> None: ...

class AbortMigrationRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class AbortMigrationResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PrepareIncomingRequest(_message.Message):
    __slots__ = ("spec", "src_host", "migration_id", "force", "cpu_used_cores", "mem_used_mib")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_CORES_FIELD_NUMBER: _ClassVar[int]
    MEM_USED_MIB_FIELD_NUMBER: _ClassVar[int]
    spec: VmSpec
    src_host: str
    migration_id: str
    force: bool
    cpu_used_cores: float
    mem_used_mib: float
    def __init__(self, spec: _Optional[_Union[VmSpec, _Mapping]] = ..., src_host: _Optional[str] = ..., migration_id: _Optional[str] = ..., force: _Optional[bool] = ..., cpu_used_cores: _Optional[float] = ..., mem_used_mib: _Optional[float] = ...) -> None: ...

class PrepareIncomingResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: HostState
    def __init__(self, state: _Optional[_Union[HostState, _Mapping]] = ...) -> None: ...

class FinishIncomingRequest(_message.Message):
    __slots__ = ("migration_id", "name", "migrated", "heartbeat_before", "boot_id")
    MIGRATION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIGRATED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    migration_id: str
    name: str
    migrated: bool
    heartbeat_before: int
    boot_id: str
    def __init__(self, migration_id: _Optional[str] = ..., name: _Optional[str] = ..., migrated: _Optional[bool] = ..., heartbeat_before: _Optional[int] = ..., boot_id: _Optional[str] = ...) -> None: ...

class FinishIncomingResponse(_message.Message):
    __slots__ = ("verified", "detail", "heartbeat_after", "integrity_pages", "integrity_bad")
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AFTER_FIELD_NUMBER: _ClassVar[int]
    INTEGRITY_PAGES_FIELD_NUMBER: _ClassVar[int]
    INTEGRITY_BAD_FIELD_NUMBER: _ClassVar[int]
    verified: bool
    detail: str
    heartbeat_after: int
    integrity_pages: int
    integrity_bad: int
    def __init__(self, verified: _Optional[bool] = ..., detail: _Optional[str] = ..., heartbeat_after: _Optional[int] = ..., integrity_pages: _Optional[int] = ..., integrity_bad: _Optional[int] = ...) -> None: ...

class ListMigrationsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListMigrationsResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[MigrationRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[MigrationRecord, _Mapping]]] = ...) -> None: ...

class InjectFaultRequest(_message.Message):
    __slots__ = ("name", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: FaultKind
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[FaultKind, str]] = ...) -> None: ...

class InjectFaultResponse(_message.Message):
    __slots__ = ("detail",)
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    detail: str
    def __init__(self, detail: _Optional[str] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("replay",)
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    replay: int
    def __init__(self, replay: _Optional[int] = ...) -> None: ...

class MigrationProgress(_message.Message):
    __slots__ = ("migration_id", "vm", "elapsed_ms", "data_processed_bytes", "data_remaining_bytes", "data_total_bytes", "memory_iteration", "memory_dirty_rate", "memory_bps", "phase")
    MIGRATION_ID_FIELD_NUMBER: _ClassVar[int]
    VM_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    DATA_PROCESSED_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_REMAINING_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ITERATION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_DIRTY_RATE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BPS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    migration_id: str
    vm: str
    elapsed_ms: float
    data_processed_bytes: int
    data_remaining_bytes: int
    data_total_bytes: int
    memory_iteration: int
    memory_dirty_rate: int
    memory_bps: int
    phase: str
    def __init__(self, migration_id: _Optional[str] = ..., vm: _Optional[str] = ..., elapsed_ms: _Optional[float] = ..., data_processed_bytes: _Optional[int] = ..., data_remaining_bytes: _Optional[int] = ..., data_total_bytes: _Optional[int] = ..., memory_iteration: _Optional[int] = ..., memory_dirty_rate: _Optional[int] = ..., memory_bps: _Optional[int] = ..., phase: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "unix_s", "host", "kind", "vm", "detail", "progress", "record")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    UNIX_S_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    VM_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    seq: int
    unix_s: float
    host: str
    kind: EventKind
    vm: str
    detail: str
    progress: MigrationProgress
    record: MigrationRecord
    def __init__(self, seq: _Optional[int] = ..., unix_s: _Optional[float] = ..., host: _Optional[str] = ..., kind: _Optional[_Union[EventKind, str]] = ..., vm: _Optional[str] = ..., detail: _Optional[str] = ..., progress: _Optional[_Union[MigrationProgress, _Mapping]] = ..., record: _Optional[_Union[MigrationRecord, _Mapping]] = ...) -> None: ...
