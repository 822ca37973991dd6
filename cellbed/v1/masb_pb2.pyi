from cellbed.v1 import common_pb2 as _common_pb2
from cellbed.v1 import node_pb2 as _node_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RejectionReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REJECTION_REASON_UNSPECIFIED: _ClassVar[RejectionReason]
    REJECTION_REASON_CAPACITY: _ClassVar[RejectionReason]
    REJECTION_REASON_CONSTRAINTS: _ClassVar[RejectionReason]
    REJECTION_REASON_RUS: _ClassVar[RejectionReason]
    REJECTION_REASON_OVERLOADED: _ClassVar[RejectionReason]
    REJECTION_REASON_SAME_HOST: _ClassVar[RejectionReason]
    REJECTION_REASON_NO_ANSWER: _ClassVar[RejectionReason]
    REJECTION_REASON_GPA: _ClassVar[RejectionReason]
REJECTION_REASON_UNSPECIFIED: RejectionReason
REJECTION_REASON_CAPACITY: RejectionReason
REJECTION_REASON_CONSTRAINTS: RejectionReason
REJECTION_REASON_RUS: RejectionReason
REJECTION_REASON_OVERLOADED: RejectionReason
REJECTION_REASON_SAME_HOST: RejectionReason
REJECTION_REASON_NO_ANSWER: RejectionReason
REJECTION_REASON_GPA: RejectionReason

class TaskInfo(_message.Message):
    __slots__ = ("name", "used", "requested", "constraints", "production", "priority", "mem_mib", "dirty_mib_s", "wss_mib", "cpu_mean", "cpu_var", "cpu_samples")
    NAME_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    PRODUCTION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    DIRTY_MIB_S_FIELD_NUMBER: _ClassVar[int]
    WSS_MIB_FIELD_NUMBER: _ClassVar[int]
    CPU_MEAN_FIELD_NUMBER: _ClassVar[int]
    CPU_VAR_FIELD_NUMBER: _ClassVar[int]
    CPU_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    name: str
    used: _common_pb2.Resources
    requested: _common_pb2.Resources
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    production: bool
    priority: int
    mem_mib: float
    dirty_mib_s: float
    wss_mib: float
    cpu_mean: float
    cpu_var: float
    cpu_samples: int
    def __init__(self, name: _Optional[str] = ..., used: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., requested: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., production: _Optional[bool] = ..., priority: _Optional[int] = ..., mem_mib: _Optional[float] = ..., dirty_mib_s: _Optional[float] = ..., wss_mib: _Optional[float] = ..., cpu_mean: _Optional[float] = ..., cpu_var: _Optional[float] = ..., cpu_samples: _Optional[int] = ...) -> None: ...

class NodeReport(_message.Message):
    __slots__ = ("host", "capacity", "used", "requested", "prod_requested", "task_count", "attributes", "asr_class", "sampled_unix_s", "via_broker")
    HOST_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    PROD_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    ASR_CLASS_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    VIA_BROKER_FIELD_NUMBER: _ClassVar[int]
    host: str
    capacity: _common_pb2.Resources
    used: _common_pb2.Resources
    requested: _common_pb2.Resources
    prod_requested: _common_pb2.Resources
    task_count: int
    attributes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Attribute]
    asr_class: _common_pb2.AsrClass
    sampled_unix_s: float
    via_broker: str
    def __init__(self, host: _Optional[str] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., used: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., requested: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., prod_requested: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., task_count: _Optional[int] = ..., attributes: _Optional[_Iterable[_Union[_common_pb2.Attribute, _Mapping]]] = ..., asr_class: _Optional[_Union[_common_pb2.AsrClass, str]] = ..., sampled_unix_s: _Optional[float] = ..., via_broker: _Optional[str] = ...) -> None: ...

class ReportNodeStateRequest(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: NodeReport
    def __init__(self, report: _Optional[_Union[NodeReport, _Mapping]] = ...) -> None: ...

class ReportNodeStateResponse(_message.Message):
    __slots__ = ("cache_size",)
    CACHE_SIZE_FIELD_NUMBER: _ClassVar[int]
    cache_size: int
    def __init__(self, cache_size: _Optional[int] = ...) -> None: ...

class GetCandidateNodesRequest(_message.Message):
    __slots__ = ("task", "src_host", "san_id")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    SAN_ID_FIELD_NUMBER: _ClassVar[int]
    task: TaskInfo
    src_host: str
    san_id: str
    def __init__(self, task: _Optional[_Union[TaskInfo, _Mapping]] = ..., src_host: _Optional[str] = ..., san_id: _Optional[str] = ...) -> None: ...

class Recommendation(_message.Message):
    __slots__ = ("host", "fitness", "timestamp_unix_s", "available", "force_migration")
    HOST_FIELD_NUMBER: _ClassVar[int]
    FITNESS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    FORCE_MIGRATION_FIELD_NUMBER: _ClassVar[int]
    host: str
    fitness: float
    timestamp_unix_s: float
    available: _common_pb2.Resources
    force_migration: bool
    def __init__(self, host: _Optional[str] = ..., fitness: _Optional[float] = ..., timestamp_unix_s: _Optional[float] = ..., available: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., force_migration: _Optional[bool] = ...) -> None: ...

class GetCandidateNodesResponse(_message.Message):
    __slots__ = ("recommendations", "scanned", "matched", "broker")
    RECOMMENDATIONS_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    BROKER_FIELD_NUMBER: _ClassVar[int]
    recommendations: _containers.RepeatedCompositeFieldContainer[Recommendation]
    scanned: int
    matched: int
    broker: str
    def __init__(self, recommendations: _Optional[_Iterable[_Union[Recommendation, _Mapping]]] = ..., scanned: _Optional[int] = ..., matched: _Optional[int] = ..., broker: _Optional[str] = ...) -> None: ...

class AllocateTaskRequest(_message.Message):
    __slots__ = ("task", "spec", "launch")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FIELD_NUMBER: _ClassVar[int]
    task: TaskInfo
    spec: _node_pb2.VmSpec
    launch: bool
    def __init__(self, task: _Optional[_Union[TaskInfo, _Mapping]] = ..., spec: _Optional[_Union[_node_pb2.VmSpec, _Mapping]] = ..., launch: _Optional[bool] = ...) -> None: ...

class AllocateTaskResponse(_message.Message):
    __slots__ = ("host", "score", "scanned", "refused", "broker")
    HOST_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    BROKER_FIELD_NUMBER: _ClassVar[int]
    host: str
    score: float
    scanned: int
    refused: int
    broker: str
    def __init__(self, host: _Optional[str] = ..., score: _Optional[float] = ..., scanned: _Optional[int] = ..., refused: _Optional[int] = ..., broker: _Optional[str] = ...) -> None: ...

class SyncCacheRequest(_message.Message):
    __slots__ = ("broker", "entries", "digest")
    BROKER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    broker: str
    entries: _containers.RepeatedCompositeFieldContainer[NodeReport]
    digest: int
    def __init__(self, broker: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[NodeReport, _Mapping]]] = ..., digest: _Optional[int] = ...) -> None: ...

class SyncCacheResponse(_message.Message):
    __slots__ = ("entries", "accepted", "in_sync")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[NodeReport]
    accepted: int
    in_sync: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[NodeReport, _Mapping]]] = ..., accepted: _Optional[int] = ..., in_sync: _Optional[bool] = ...) -> None: ...

class ListCacheRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CacheEntry(_message.Message):
    __slots__ = ("report", "age_s")
    REPORT_FIELD_NUMBER: _ClassVar[int]
    AGE_S_FIELD_NUMBER: _ClassVar[int]
    report: NodeReport
    age_s: float
    def __init__(self, report: _Optional[_Union[NodeReport, _Mapping]] = ..., age_s: _Optional[float] = ...) -> None: ...

class ListCacheResponse(_message.Message):
    __slots__ = ("broker", "entries", "counters", "node_expiry_s")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    BROKER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    NODE_EXPIRY_S_FIELD_NUMBER: _ClassVar[int]
    broker: str
    entries: _containers.RepeatedCompositeFieldContainer[CacheEntry]
    counters: _containers.ScalarMap[str, int]
    node_expiry_s: float
    def __init__(self, broker: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[CacheEntry, _Mapping]]] = ..., counters: _Optional[_Mapping[str, int]] = ..., node_expiry_s: _Optional[float] = ...) -> None: ...

class TaskMigrationRequest(_message.Message):
    __slots__ = ("san_id", "src_host", "task", "force_migration")
    SAN_ID_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    FORCE_MIGRATION_FIELD_NUMBER: _ClassVar[int]
    san_id: str
    src_host: str
    task: TaskInfo
    force_migration: bool
    def __init__(self, san_id: _Optional[str] = ..., src_host: _Optional[str] = ..., task: _Optional[_Union[TaskInfo, _Mapping]] = ..., force_migration: _Optional[bool] = ...) -> None: ...

class TaskMigrationAcceptanceResponse(_message.Message):
    __slots__ = ("host", "capacity", "used", "sampled_unix_s")
    HOST_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    host: str
    capacity: _common_pb2.Resources
    used: _common_pb2.Resources
    sampled_unix_s: float
    def __init__(self, host: _Optional[str] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., used: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., sampled_unix_s: _Optional[float] = ...) -> None: ...

class TaskMigrationRejectionResponse(_message.Message):
    __slots__ = ("host", "reason", "detail", "projected", "limit")
    HOST_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    PROJECTED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    host: str
    reason: RejectionReason
    detail: str
    projected: _common_pb2.Resources
    limit: _common_pb2.Resources
    def __init__(self, host: _Optional[str] = ..., reason: _Optional[_Union[RejectionReason, str]] = ..., detail: _Optional[str] = ..., projected: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., limit: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ...) -> None: ...

class TaskMigrationResponse(_message.Message):
    __slots__ = ("acceptance", "rejection")
    ACCEPTANCE_FIELD_NUMBER: _ClassVar[int]
    REJECTION_FIELD_NUMBER: _ClassVar[int]
    acceptance: TaskMigrationAcceptanceResponse
    rejection: TaskMigrationRejectionResponse
    def __init__(self, acceptance: _Optional[_Union[TaskMigrationAcceptanceResponse, _Mapping]] = ..., rejection: _Optional[_Union[TaskMigrationRejectionResponse, _Mapping]] = ...) -> None: ...

class TaskMigrationProcessRequest(_message.Message):
    __slots__ = ("san_id", "src_host", "task", "spec", "force_migration", "migration_id")
    SAN_ID_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    FORCE_MIGRATION_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_ID_FIELD_NUMBER: _ClassVar[int]
    san_id: str
    src_host: str
    task: TaskInfo
    spec: _node_pb2.VmSpec
    force_migration: bool
    migration_id: str
    def __init__(self, san_id: _Optional[str] = ..., src_host: _Optional[str] = ..., task: _Optional[_Union[TaskInfo, _Mapping]] = ..., spec: _Optional[_Union[_node_pb2.VmSpec, _Mapping]] = ..., force_migration: _Optional[bool] = ..., migration_id: _Optional[str] = ...) -> None: ...

class TaskMigrationProcessResponse(_message.Message):
    __slots__ = ("accepted", "rejection")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTION_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    rejection: TaskMigrationRejectionResponse
    def __init__(self, accepted: _Optional[bool] = ..., rejection: _Optional[_Union[TaskMigrationRejectionResponse, _Mapping]] = ...) -> None: ...

class ListNegotiationsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class SanStep(_message.Message):
    __slots__ = ("unix_s", "kind", "host", "detail", "forced")
    UNIX_S_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    unix_s: float
    kind: str
    host: str
    detail: str
    forced: bool
    def __init__(self, unix_s: _Optional[float] = ..., kind: _Optional[str] = ..., host: _Optional[str] = ..., detail: _Optional[str] = ..., forced: _Optional[bool] = ...) -> None: ...

class Negotiation(_message.Message):
    __slots__ = ("san_id", "vm", "src_host", "state", "started_unix_s", "ended_unix_s", "target", "steps", "forced")
    SAN_ID_FIELD_NUMBER: _ClassVar[int]
    VM_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    ENDED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    san_id: str
    vm: str
    src_host: str
    state: str
    started_unix_s: float
    ended_unix_s: float
    target: str
    steps: _containers.RepeatedCompositeFieldContainer[SanStep]
    forced: bool
    def __init__(self, san_id: _Optional[str] = ..., vm: _Optional[str] = ..., src_host: _Optional[str] = ..., state: _Optional[str] = ..., started_unix_s: _Optional[float] = ..., ended_unix_s: _Optional[float] = ..., target: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[SanStep, _Mapping]]] = ..., forced: _Optional[bool] = ...) -> None: ...

class ListNegotiationsResponse(_message.Message):
    __slots__ = ("host", "negotiations", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    HOST_FIELD_NUMBER: _ClassVar[int]
    NEGOTIATIONS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    host: str
    negotiations: _containers.RepeatedCompositeFieldContainer[Negotiation]
    counters: _containers.ScalarMap[str, int]
    def __init__(self, host: _Optional[str] = ..., negotiations: _Optional[_Iterable[_Union[Negotiation, _Mapping]]] = ..., counters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class NegotiateTaskRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class NegotiateTaskResponse(_message.Message):
    __slots__ = ("negotiation",)
    NEGOTIATION_FIELD_NUMBER: _ClassVar[int]
    negotiation: Negotiation
    def __init__(self, negotiation: _Optional[_Union[Negotiation, _Mapping]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...
