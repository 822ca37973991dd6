"""Conversions between the domain types and their protobuf forms that several services share
(constraints, attributes, resources, VM specs). One place, so every service encodes them alike."""
from __future__ import annotations

from typing import Iterable, Mapping

import math

from cellbed.domain.constraints import AttrValue, Constraint, ConstraintOp
from cellbed.domain.vm import VmSpec
from cellbed.domain.validate import integer_text, shown
from cellbed.v1 import common_pb2 as cpb, node_pb2 as npb
from cellbed.domain.errors import InvalidArgument


def _value_pb(v: AttrValue) -> tuple[str, bool]:
    if isinstance(v, bool):
        return ("1" if v else "0"), True
    if isinstance(v, int):
        return str(v), True
    return ("" if v is None else str(v)), False


def _value_from_pb(text: str, integer: bool, field: str = "value") -> AttrValue:
    if integer:
        return integer_text(field, text)      # InvalidArgument unless a 64-bit integer
    return text if text else None


def constraint_pb(c: Constraint) -> cpb.Constraint:
    text, integer = _value_pb(c.value)
    return cpb.Constraint(attribute=c.attribute, op=int(c.op) + 1, value=text, integer=integer)


def constraint_from_pb(p: cpb.Constraint) -> Constraint:
    if not p.attribute:
        raise InvalidArgument("constraint.attribute must be set", reason="missing")
    if p.op == cpb.CONSTRAINT_OP_UNSPECIFIED or p.op - 1 not in ConstraintOp._value2member_map_:
        raise InvalidArgument(f"constraint {shown(p.attribute)}: op={p.op} is out of range: allowed 1..4 "
                              "(EQUAL, NOT_EQUAL, LESS_THAN, GREATER_THAN)", reason="unknown_enum")
    value = _value_from_pb(p.value, p.integer, f"constraint {shown(p.attribute)}: value")
    return Constraint(p.attribute, ConstraintOp(p.op - 1), value)


def constraints_pb(cs: Iterable[Constraint]) -> list[cpb.Constraint]:
    return [constraint_pb(c) for c in cs]


def constraints_from_pb(ps: Iterable[cpb.Constraint]) -> tuple[Constraint, ...]:
    return tuple(constraint_from_pb(p) for p in ps)


def attributes_pb(attrs: Mapping[str, AttrValue]) -> list[cpb.Attribute]:
    out = []
    for k in sorted(attrs):
        text, integer = _value_pb(attrs[k])
        out.append(cpb.Attribute(name=k, value=text, integer=integer))
    return out


def attributes_from_pb(ps: Iterable[cpb.Attribute]) -> dict[str, AttrValue]:
    """InvalidArgument for a value marked integer that is not a 64-bit integer."""
    return {p.name: _value_from_pb(p.value, p.integer, f"attribute {shown(p.name)}: value") for p in ps}


def resources(cpu_cores: float, mem_mib: float) -> cpb.Resources:
    return cpb.Resources(cpu_cores=cpu_cores, mem_mib=mem_mib)


def spec_pb(s: VmSpec) -> npb.VmSpec:
    inf = math.isinf(s.dirty_mib_s)
    return npb.VmSpec(name=s.name, mem_mib=s.mem_mib, vcpus=s.vcpus, production=s.production,
                     priority=s.priority, req_cpu_cores=s.req_cpu_cores, user=s.user,
                     constraints=constraints_pb(s.constraints),
                     workload=npb.Workload(cpu_load=s.cpu_load, wss_mib=s.wss_mib,
                                          dirty_mib_s=0 if inf else s.dirty_mib_s, dirty_max=inf))


def spec_from_pb(p: npb.VmSpec) -> VmSpec:
    w = p.workload
    return VmSpec(name=p.name, mem_mib=p.mem_mib or 128, vcpus=p.vcpus or 1, cpu_load=w.cpu_load,
                  wss_mib=w.wss_mib, dirty_mib_s=math.inf if w.dirty_max else w.dirty_mib_s,
                  production=p.production, priority=p.priority, req_cpu_cores=p.req_cpu_cores,
                  constraints=constraints_from_pb(p.constraints), user=p.user)
