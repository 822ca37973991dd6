from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListPoliciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LoadedPolicy(_message.Message):
    __slots__ = ("stage", "key", "ref", "name", "origin", "target", "dist", "dist_version", "version", "api_version", "sha256", "params_json")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DIST_FIELD_NUMBER: _ClassVar[int]
    DIST_VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    stage: str
    key: str
    ref: str
    name: str
    origin: str
    target: str
    dist: str
    dist_version: str
    version: str
    api_version: str
    sha256: str
    params_json: str
    def __init__(self, stage: _Optional[str] = ..., key: _Optional[str] = ..., ref: _Optional[str] = ..., name: _Optional[str] = ..., origin: _Optional[str] = ..., target: _Optional[str] = ..., dist: _Optional[str] = ..., dist_version: _Optional[str] = ..., version: _Optional[str] = ..., api_version: _Optional[str] = ..., sha256: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class StageTiming(_message.Message):
    __slots__ = ("stage", "policy", "calls", "errors", "examined", "total_ns", "max_ns", "buckets")
    class BucketsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    STAGE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_NS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    policy: str
    calls: int
    errors: int
    examined: int
    total_ns: int
    max_ns: int
    buckets: _containers.ScalarMap[int, int]
    def __init__(self, stage: _Optional[str] = ..., policy: _Optional[str] = ..., calls: _Optional[int] = ..., errors: _Optional[int] = ..., examined: _Optional[int] = ..., total_ns: _Optional[int] = ..., max_ns: _Optional[int] = ..., buckets: _Optional[_Mapping[int, int]] = ...) -> None: ...

class ListPoliciesResponse(_message.Message):
    __slots__ = ("agent", "mode", "budget_ms", "policies", "timings")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_MS_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    mode: str
    budget_ms: float
    policies: _containers.RepeatedCompositeFieldContainer[LoadedPolicy]
    timings: _containers.RepeatedCompositeFieldContainer[StageTiming]
    def __init__(self, agent: _Optional[str] = ..., mode: _Optional[str] = ..., budget_ms: _Optional[float] = ..., policies: _Optional[_Iterable[_Union[LoadedPolicy, _Mapping]]] = ..., timings: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ...) -> None: ...
