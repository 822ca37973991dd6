from cellbed.v1 import common_pb2 as _common_pb2
from cellbed.v1 import node_pb2 as _node_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_UNSPECIFIED: _ClassVar[TaskState]
    TASK_STATE_QUEUED: _ClassVar[TaskState]
    TASK_STATE_STARTING: _ClassVar[TaskState]
    TASK_STATE_RUNNING: _ClassVar[TaskState]
    TASK_STATE_FINISHED: _ClassVar[TaskState]
    TASK_STATE_REJECTED: _ClassVar[TaskState]

class Inconsistency(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INCONSISTENCY_UNSPECIFIED: _ClassVar[Inconsistency]
    INCONSISTENCY_INTERNAL: _ClassVar[Inconsistency]
    INCONSISTENCY_EXTERNAL: _ClassVar[Inconsistency]
    INCONSISTENCY_PREEMPTION: _ClassVar[Inconsistency]

class TaskEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_EVENT_KIND_UNSPECIFIED: _ClassVar[TaskEventKind]
    TASK_EVENT_KIND_STARTED: _ClassVar[TaskEventKind]
    TASK_EVENT_KIND_FINISHED: _ClassVar[TaskEventKind]
    TASK_EVENT_KIND_PREEMPTED: _ClassVar[TaskEventKind]
    TASK_EVENT_KIND_FAILED: _ClassVar[TaskEventKind]
    TASK_EVENT_KIND_REJECTED: _ClassVar[TaskEventKind]

class LmRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LM_ROLE_UNSPECIFIED: _ClassVar[LmRole]
    LM_ROLE_ACTIVE: _ClassVar[LmRole]
    LM_ROLE_STANDBY: _ClassVar[LmRole]
TASK_STATE_UNSPECIFIED: TaskState
TASK_STATE_QUEUED: TaskState
TASK_STATE_STARTING: TaskState
TASK_STATE_RUNNING: TaskState
TASK_STATE_FINISHED: TaskState
TASK_STATE_REJECTED: TaskState
INCONSISTENCY_UNSPECIFIED: Inconsistency
INCONSISTENCY_INTERNAL: Inconsistency
INCONSISTENCY_EXTERNAL: Inconsistency
INCONSISTENCY_PREEMPTION: Inconsistency
TASK_EVENT_KIND_UNSPECIFIED: TaskEventKind
TASK_EVENT_KIND_STARTED: TaskEventKind
TASK_EVENT_KIND_FINISHED: TaskEventKind
TASK_EVENT_KIND_PREEMPTED: TaskEventKind
TASK_EVENT_KIND_FAILED: TaskEventKind
TASK_EVENT_KIND_REJECTED: TaskEventKind
LM_ROLE_UNSPECIFIED: LmRole
LM_ROLE_ACTIVE: LmRole
LM_ROLE_STANDBY: LmRole

class MeghaTask(_message.Message):
    __slots__ = ("name", "user", "request", "constraints", "production", "priority", "duration_s", "vcpus", "workload", "arrival_unix_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    PRODUCTION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    VCPUS_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    user: str
    request: _common_pb2.Resources
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    production: bool
    priority: int
    duration_s: float
    vcpus: int
    workload: _node_pb2.Workload
    arrival_unix_s: float
    def __init__(self, name: _Optional[str] = ..., user: _Optional[str] = ..., request: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., production: _Optional[bool] = ..., priority: _Optional[int] = ..., duration_s: _Optional[float] = ..., vcpus: _Optional[int] = ..., workload: _Optional[_Union[_node_pb2.Workload, _Mapping]] = ..., arrival_unix_s: _Optional[float] = ...) -> None: ...

class AllocationTime(_message.Message):
    __slots__ = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms", "total_ms", "boot_ms", "attempts", "arrival_unix_s", "start_unix_s")
    FRAMEWORK_QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    PROCESSING_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    BOOT_MS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    START_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    framework_queue_ms: float
    processing_ms: float
    worker_queue_ms: float
    communication_ms: float
    total_ms: float
    boot_ms: float
    attempts: int
    arrival_unix_s: float
    start_unix_s: float
    def __init__(self, framework_queue_ms: _Optional[float] = ..., processing_ms: _Optional[float] = ..., worker_queue_ms: _Optional[float] = ..., communication_ms: _Optional[float] = ..., total_ms: _Optional[float] = ..., boot_ms: _Optional[float] = ..., attempts: _Optional[int] = ..., arrival_unix_s: _Optional[float] = ..., start_unix_s: _Optional[float] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("lm", "lm_instance", "host", "partition", "repartitioned", "preempted")
    LM_FIELD_NUMBER: _ClassVar[int]
    LM_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPARTITIONED_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_FIELD_NUMBER: _ClassVar[int]
    lm: str
    lm_instance: str
    host: str
    partition: str
    repartitioned: bool
    preempted: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lm: _Optional[str] = ..., lm_instance: _Optional[str] = ..., host: _Optional[str] = ..., partition: _Optional[str] = ..., repartitioned: _Optional[bool] = ..., preempted: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskStatus(_message.Message):
    __slots__ = ("name", "user", "state", "placement", "allocation", "gm", "detail", "queue_position", "preemptions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    GM_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    user: str
    state: TaskState
    placement: Placement
    allocation: AllocationTime
    gm: str
    detail: str
    queue_position: int
    preemptions: int
    def __init__(self, name: _Optional[str] = ..., user: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., placement: _Optional[_Union[Placement, _Mapping]] = ..., allocation: _Optional[_Union[AllocationTime, _Mapping]] = ..., gm: _Optional[str] = ..., detail: _Optional[str] = ..., queue_position: _Optional[int] = ..., preemptions: _Optional[int] = ...) -> None: ...

class UserUsage(_message.Message):
    __slots__ = ("user", "used", "tasks")
    USER_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    user: str
    used: _common_pb2.Resources
    tasks: int
    def __init__(self, user: _Optional[str] = ..., used: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., tasks: _Optional[int] = ...) -> None: ...

class LmState(_message.Message):
    __slots__ = ("lm", "instance", "epoch", "version", "sent_unix_s", "hosts_digest", "gms", "full", "host_index", "owner", "free_cpu_cores", "free_mem_mib", "usage", "logical_nodes", "capacity")
    LM_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    HOSTS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    GMS_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    HOST_INDEX_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    FREE_CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    FREE_MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_NODES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    lm: str
    instance: str
    epoch: int
    version: int
    sent_unix_s: float
    hosts_digest: str
    gms: _containers.RepeatedScalarFieldContainer[str]
    full: bool
    host_index: _containers.RepeatedScalarFieldContainer[int]
    owner: _containers.RepeatedScalarFieldContainer[int]
    free_cpu_cores: _containers.RepeatedScalarFieldContainer[float]
    free_mem_mib: _containers.RepeatedScalarFieldContainer[float]
    usage: _containers.RepeatedCompositeFieldContainer[UserUsage]
    logical_nodes: _containers.RepeatedScalarFieldContainer[int]
    capacity: _common_pb2.Resources
    def __init__(self, lm: _Optional[str] = ..., instance: _Optional[str] = ..., epoch: _Optional[int] = ..., version: _Optional[int] = ..., sent_unix_s: _Optional[float] = ..., hosts_digest: _Optional[str] = ..., gms: _Optional[_Iterable[str]] = ..., full: _Optional[bool] = ..., host_index: _Optional[_Iterable[int]] = ..., owner: _Optional[_Iterable[int]] = ..., free_cpu_cores: _Optional[_Iterable[float]] = ..., free_mem_mib: _Optional[_Iterable[float]] = ..., usage: _Optional[_Iterable[_Union[UserUsage, _Mapping]]] = ..., logical_nodes: _Optional[_Iterable[int]] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ...) -> None: ...

class LmHost(_message.Message):
    __slots__ = ("name", "capacity", "attributes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    capacity: _common_pb2.Resources
    attributes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Attribute]
    def __init__(self, name: _Optional[str] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., attributes: _Optional[_Iterable[_Union[_common_pb2.Attribute, _Mapping]]] = ...) -> None: ...

class LmTiming(_message.Message):
    __slots__ = ("comm_in_ms", "queue_ms", "processing_ms", "comm_node_ms", "worker_queue_ms", "boot_ms", "start_unix_s")
    COMM_IN_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    PROCESSING_MS_FIELD_NUMBER: _ClassVar[int]
    COMM_NODE_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    BOOT_MS_FIELD_NUMBER: _ClassVar[int]
    START_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    comm_in_ms: float
    queue_ms: float
    processing_ms: float
    comm_node_ms: float
    worker_queue_ms: float
    boot_ms: float
    start_unix_s: float
    def __init__(self, comm_in_ms: _Optional[float] = ..., queue_ms: _Optional[float] = ..., processing_ms: _Optional[float] = ..., comm_node_ms: _Optional[float] = ..., worker_queue_ms: _Optional[float] = ..., boot_ms: _Optional[float] = ..., start_unix_s: _Optional[float] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ("task", "wait_s")
    TASK_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    task: MeghaTask
    wait_s: float
    def __init__(self, task: _Optional[_Union[MeghaTask, _Mapping]] = ..., wait_s: _Optional[float] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: TaskStatus
    def __init__(self, status: _Optional[_Union[TaskStatus, _Mapping]] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("name", "wait_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    wait_s: float
    def __init__(self, name: _Optional[str] = ..., wait_s: _Optional[float] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: TaskStatus
    def __init__(self, status: _Optional[_Union[TaskStatus, _Mapping]] = ...) -> None: ...

class GetViewRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PartitionView(_message.Message):
    __slots__ = ("gm", "internal", "nodes", "logical_nodes", "free", "capacity")
    GM_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_NODES_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    gm: str
    internal: bool
    nodes: int
    logical_nodes: int
    free: _common_pb2.Resources
    capacity: _common_pb2.Resources
    def __init__(self, gm: _Optional[str] = ..., internal: _Optional[bool] = ..., nodes: _Optional[int] = ..., logical_nodes: _Optional[int] = ..., free: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ...) -> None: ...

class LmView(_message.Message):
    __slots__ = ("lm", "instance", "epoch", "version", "staleness_s", "full_staleness_s", "hosts", "partitions")
    LM_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STALENESS_S_FIELD_NUMBER: _ClassVar[int]
    FULL_STALENESS_S_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    lm: str
    instance: str
    epoch: int
    version: int
    staleness_s: float
    full_staleness_s: float
    hosts: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionView]
    def __init__(self, lm: _Optional[str] = ..., instance: _Optional[str] = ..., epoch: _Optional[int] = ..., version: _Optional[int] = ..., staleness_s: _Optional[float] = ..., full_staleness_s: _Optional[float] = ..., hosts: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionView, _Mapping]]] = ...) -> None: ...

class GetViewResponse(_message.Message):
    __slots__ = ("gm", "lms", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    GM_FIELD_NUMBER: _ClassVar[int]
    LMS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    gm: str
    lms: _containers.RepeatedCompositeFieldContainer[LmView]
    counters: _containers.ScalarMap[str, int]
    def __init__(self, gm: _Optional[str] = ..., lms: _Optional[_Iterable[_Union[LmView, _Mapping]]] = ..., counters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("user", "share", "gm", "length", "running", "usage", "usage_share", "preempted", "preemption_attempts", "preemptions", "repartitions", "placed")
    USER_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    GM_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_SHARE_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    REPARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PLACED_FIELD_NUMBER: _ClassVar[int]
    user: str
    share: float
    gm: str
    length: int
    running: int
    usage: _common_pb2.Resources
    usage_share: float
    preempted: int
    preemption_attempts: int
    preemptions: int
    repartitions: int
    placed: int
    def __init__(self, user: _Optional[str] = ..., share: _Optional[float] = ..., gm: _Optional[str] = ..., length: _Optional[int] = ..., running: _Optional[int] = ..., usage: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., usage_share: _Optional[float] = ..., preempted: _Optional[int] = ..., preemption_attempts: _Optional[int] = ..., preemptions: _Optional[int] = ..., repartitions: _Optional[int] = ..., placed: _Optional[int] = ...) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("queues", "capacity", "gm")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    GM_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    capacity: _common_pb2.Resources
    gm: str
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., gm: _Optional[str] = ...) -> None: ...

class TaskEvent(_message.Message):
    __slots__ = ("name", "kind", "placement", "timing", "detail", "unix_s", "task")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    UNIX_S_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: TaskEventKind
    placement: Placement
    timing: LmTiming
    detail: str
    unix_s: float
    task: MeghaTask
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[TaskEventKind, str]] = ..., placement: _Optional[_Union[Placement, _Mapping]] = ..., timing: _Optional[_Union[LmTiming, _Mapping]] = ..., detail: _Optional[str] = ..., unix_s: _Optional[float] = ..., task: _Optional[_Union[MeghaTask, _Mapping]] = ...) -> None: ...

class ReportTaskEventsRequest(_message.Message):
    __slots__ = ("lm", "instance", "events")
    LM_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    lm: str
    instance: str
    events: _containers.RepeatedCompositeFieldContainer[TaskEvent]
    def __init__(self, lm: _Optional[str] = ..., instance: _Optional[str] = ..., events: _Optional[_Iterable[_Union[TaskEvent, _Mapping]]] = ...) -> None: ...

class ReportTaskEventsResponse(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    def __init__(self, accepted: _Optional[int] = ...) -> None: ...

class LaunchRequest(_message.Message):
    __slots__ = ("task", "gm", "host", "sent_unix_s")
    TASK_FIELD_NUMBER: _ClassVar[int]
    GM_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    task: MeghaTask
    gm: str
    host: str
    sent_unix_s: float
    def __init__(self, task: _Optional[_Union[MeghaTask, _Mapping]] = ..., gm: _Optional[str] = ..., host: _Optional[str] = ..., sent_unix_s: _Optional[float] = ...) -> None: ...

class PlacementResponse(_message.Message):
    __slots__ = ("ok", "detail", "inconsistency", "state", "timing", "placement")
    OK_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    INCONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    detail: str
    inconsistency: Inconsistency
    state: LmState
    timing: LmTiming
    placement: Placement
    def __init__(self, ok: _Optional[bool] = ..., detail: _Optional[str] = ..., inconsistency: _Optional[_Union[Inconsistency, str]] = ..., state: _Optional[_Union[LmState, _Mapping]] = ..., timing: _Optional[_Union[LmTiming, _Mapping]] = ..., placement: _Optional[_Union[Placement, _Mapping]] = ...) -> None: ...

class RepartitionRequest(_message.Message):
    __slots__ = ("task", "gm", "host", "sent_unix_s")
    TASK_FIELD_NUMBER: _ClassVar[int]
    GM_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    task: MeghaTask
    gm: str
    host: str
    sent_unix_s: float
    def __init__(self, task: _Optional[_Union[MeghaTask, _Mapping]] = ..., gm: _Optional[str] = ..., host: _Optional[str] = ..., sent_unix_s: _Optional[float] = ...) -> None: ...

class PreemptRequest(_message.Message):
    __slots__ = ("task", "gm", "victim_user", "sent_unix_s")
    TASK_FIELD_NUMBER: _ClassVar[int]
    GM_FIELD_NUMBER: _ClassVar[int]
    VICTIM_USER_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    task: MeghaTask
    gm: str
    victim_user: str
    sent_unix_s: float
    def __init__(self, task: _Optional[_Union[MeghaTask, _Mapping]] = ..., gm: _Optional[str] = ..., victim_user: _Optional[str] = ..., sent_unix_s: _Optional[float] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStateResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: LmState
    def __init__(self, state: _Optional[_Union[LmState, _Mapping]] = ...) -> None: ...

class GetHostsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetHostsResponse(_message.Message):
    __slots__ = ("lm", "hosts", "digest")
    LM_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    lm: str
    hosts: _containers.RepeatedCompositeFieldContainer[LmHost]
    digest: str
    def __init__(self, lm: _Optional[str] = ..., hosts: _Optional[_Iterable[_Union[LmHost, _Mapping]]] = ..., digest: _Optional[str] = ...) -> None: ...

class ListPartitionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SliceInfo(_message.Message):
    __slots__ = ("host", "logical", "task", "capacity", "used", "tasks")
    HOST_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    host: str
    logical: bool
    task: str
    capacity: _common_pb2.Resources
    used: _common_pb2.Resources
    tasks: int
    def __init__(self, host: _Optional[str] = ..., logical: _Optional[bool] = ..., task: _Optional[str] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., used: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., tasks: _Optional[int] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("gm", "slices", "capacity", "used")
    GM_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    gm: str
    slices: _containers.RepeatedCompositeFieldContainer[SliceInfo]
    capacity: _common_pb2.Resources
    used: _common_pb2.Resources
    def __init__(self, gm: _Optional[str] = ..., slices: _Optional[_Iterable[_Union[SliceInfo, _Mapping]]] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., used: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ...) -> None: ...

class ListPartitionsResponse(_message.Message):
    __slots__ = ("lm", "instance", "role", "epoch", "partitions", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    LM_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    lm: str
    instance: str
    role: LmRole
    epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    counters: _containers.ScalarMap[str, int]
    def __init__(self, lm: _Optional[str] = ..., instance: _Optional[str] = ..., role: _Optional[_Union[LmRole, str]] = ..., epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ..., counters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class LmTaskRecord(_message.Message):
    __slots__ = ("task", "host", "partition", "logical", "submit_gm", "state", "start_unix_s", "start_sent")
    TASK_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_GM_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    START_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    START_SENT_FIELD_NUMBER: _ClassVar[int]
    task: MeghaTask
    host: str
    partition: str
    logical: bool
    submit_gm: str
    state: TaskState
    start_unix_s: float
    start_sent: bool
    def __init__(self, task: _Optional[_Union[MeghaTask, _Mapping]] = ..., host: _Optional[str] = ..., partition: _Optional[str] = ..., logical: _Optional[bool] = ..., submit_gm: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., start_unix_s: _Optional[float] = ..., start_sent: _Optional[bool] = ...) -> None: ...

class ReplicateRequest(_message.Message):
    __slots__ = ("instance", "epoch", "upserts", "removed", "full", "outbox", "outbox_gm")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    UPSERTS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_GM_FIELD_NUMBER: _ClassVar[int]
    instance: str
    epoch: int
    upserts: _containers.RepeatedCompositeFieldContainer[LmTaskRecord]
    removed: _containers.RepeatedScalarFieldContainer[str]
    full: bool
    outbox: _containers.RepeatedCompositeFieldContainer[TaskEvent]
    outbox_gm: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, instance: _Optional[str] = ..., epoch: _Optional[int] = ..., upserts: _Optional[_Iterable[_Union[LmTaskRecord, _Mapping]]] = ..., removed: _Optional[_Iterable[str]] = ..., full: _Optional[bool] = ..., outbox: _Optional[_Iterable[_Union[TaskEvent, _Mapping]]] = ..., outbox_gm: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplicateResponse(_message.Message):
    __slots__ = ("instance", "role", "epoch")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    instance: str
    role: LmRole
    epoch: int
    def __init__(self, instance: _Optional[str] = ..., role: _Optional[_Union[LmRole, str]] = ..., epoch: _Optional[int] = ...) -> None: ...

class GetRoleRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetRoleResponse(_message.Message):
    __slots__ = ("instance", "role", "epoch")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    instance: str
    role: LmRole
    epoch: int
    def __init__(self, instance: _Optional[str] = ..., role: _Optional[_Union[LmRole, str]] = ..., epoch: _Optional[int] = ...) -> None: ...

class FindTasksRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class FindTasksResponse(_message.Message):
    __slots__ = ("found",)
    FOUND_FIELD_NUMBER: _ClassVar[int]
    found: _containers.RepeatedCompositeFieldContainer[LmTaskRecord]
    def __init__(self, found: _Optional[_Iterable[_Union[LmTaskRecord, _Mapping]]] = ...) -> None: ...

class StopTaskRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class StopTaskResponse(_message.Message):
    __slots__ = ("host",)
    HOST_FIELD_NUMBER: _ClassVar[int]
    host: str
    def __init__(self, host: _Optional[str] = ...) -> None: ...

class ProbeRequest(_message.Message):
    __slots__ = ("scheduler", "task", "request", "sent_unix_s")
    SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    scheduler: str
    task: str
    request: _common_pb2.Resources
    sent_unix_s: float
    def __init__(self, scheduler: _Optional[str] = ..., task: _Optional[str] = ..., request: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., sent_unix_s: _Optional[float] = ...) -> None: ...

class ProbeResponse(_message.Message):
    __slots__ = ("queue_length",)
    QUEUE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    queue_length: int
    def __init__(self, queue_length: _Optional[int] = ...) -> None: ...

class ClaimTaskRequest(_message.Message):
    __slots__ = ("worker", "task", "sent_unix_s", "worker_queue_ms", "probe_comm_ms")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    WORKER_QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    PROBE_COMM_MS_FIELD_NUMBER: _ClassVar[int]
    worker: str
    task: str
    sent_unix_s: float
    worker_queue_ms: float
    probe_comm_ms: float
    def __init__(self, worker: _Optional[str] = ..., task: _Optional[str] = ..., sent_unix_s: _Optional[float] = ..., worker_queue_ms: _Optional[float] = ..., probe_comm_ms: _Optional[float] = ...) -> None: ...

class ClaimTaskResponse(_message.Message):
    __slots__ = ("granted", "task")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    task: MeghaTask
    def __init__(self, granted: _Optional[bool] = ..., task: _Optional[_Union[MeghaTask, _Mapping]] = ...) -> None: ...

class ReportStartRequest(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: TaskEvent
    def __init__(self, event: _Optional[_Union[TaskEvent, _Mapping]] = ...) -> None: ...

class ReportStartResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
