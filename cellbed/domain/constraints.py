"""Placement constraints on host attributes (GCD-2011 semantics): the one definition that the
workload, the policies, the agents and the wire format share."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Mapping, Union

__all__ = ["AttrValue", "ConstraintOp", "Constraint", "constraints_match"]

#: Attribute and constraint values are hashed strings or integers in GCD-2011
#: (``STRING_HASH_OR_INTEGER``); ``None`` means the value field was empty.
AttrValue = Union[str, int, None]



class ConstraintOp(enum.IntEnum):
    """GCD-2011 comparison operator codes (digest §E.2, task_constraints column 4)."""

    EQUAL = 0
    NOT_EQUAL = 1
    LESS_THAN = 2
    GREATER_THAN = 3



@dataclass(frozen=True, slots=True)
class Constraint:
    """One placement constraint: ``node[attribute] <op> value``.

    Matching semantics ([RECON]; the GCD schema does not spell them out):

    - EQUAL: the node has the attribute and its value equals ``value``.
    - NOT_EQUAL: the node lacks the attribute, or its value differs.
    - LESS_THAN / GREATER_THAN: the node has the attribute, both values are
      integers, and the comparison holds.  Anything else does not match.
    """

    attribute: str
    op: ConstraintOp
    value: AttrValue = None

    def matches(self, attributes: Mapping[str, AttrValue]) -> bool:
        op = self.op
        present = self.attribute in attributes
        if op == ConstraintOp.EQUAL:
            return present and attributes[self.attribute] == self.value
        if op == ConstraintOp.NOT_EQUAL:
            return (not present) or attributes[self.attribute] != self.value
        if not present:
            return False
        have = attributes[self.attribute]
        want = self.value
        if not isinstance(have, int) or not isinstance(want, int):
            return False
        return have < want if op == ConstraintOp.LESS_THAN else have > want


def constraints_match(constraints: Iterable[Constraint], attributes: Mapping[str, AttrValue]) -> bool:
    """True if a node with ``attributes`` satisfies every constraint (AND)."""
    return all(c.matches(attributes) for c in constraints)
