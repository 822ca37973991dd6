from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConstraintOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSTRAINT_OP_UNSPECIFIED: _ClassVar[ConstraintOp]
    CONSTRAINT_OP_EQUAL: _ClassVar[ConstraintOp]
    CONSTRAINT_OP_NOT_EQUAL: _ClassVar[ConstraintOp]
    CONSTRAINT_OP_LESS_THAN: _ClassVar[ConstraintOp]
    CONSTRAINT_OP_GREATER_THAN: _ClassVar[ConstraintOp]

class AsrClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASR_CLASS_UNSPECIFIED: _ClassVar[AsrClass]
    ASR_CLASS_IDLE: _ClassVar[AsrClass]
    ASR_CLASS_OVERLOADED: _ClassVar[AsrClass]
    ASR_CLASS_STA: _ClassVar[AsrClass]
    ASR_CLASS_TA: _ClassVar[AsrClass]
    ASR_CLASS_PA: _ClassVar[AsrClass]
    ASR_CLASS_DA: _ClassVar[AsrClass]
CONSTRAINT_OP_UNSPECIFIED: ConstraintOp
CONSTRAINT_OP_EQUAL: ConstraintOp
CONSTRAINT_OP_NOT_EQUAL: ConstraintOp
CONSTRAINT_OP_LESS_THAN: ConstraintOp
CONSTRAINT_OP_GREATER_THAN: ConstraintOp
ASR_CLASS_UNSPECIFIED: AsrClass
ASR_CLASS_IDLE: AsrClass
ASR_CLASS_OVERLOADED: AsrClass
ASR_CLASS_STA: AsrClass
ASR_CLASS_TA: AsrClass
ASR_CLASS_PA: AsrClass
ASR_CLASS_DA: AsrClass

class Resources(_message.Message):
    __slots__ = ("cpu_cores", "mem_mib")
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    cpu_cores: float
    mem_mib: float
    def __init__(self, cpu_cores: _Optional[float] = ..., mem_mib: _Optional[float] = ...) -> None: ...

class Constraint(_message.Message):
    __slots__ = ("attribute", "op", "value", "integer")
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    INTEGER_FIELD_NUMBER: _ClassVar[int]
    attribute: str
    op: ConstraintOp
    value: str
    integer: bool
    def __init__(self, attribute: _Optional[str] = ..., op: _Optional[_Union[ConstraintOp, str]] = ..., value: _Optional[str] = ..., integer: _Optional[bool] = ...) -> None: ...

class Attribute(_message.Message):
    __slots__ = ("name", "value", "integer")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    INTEGER_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    integer: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., integer: _Optional[bool] = ...) -> None: ...
