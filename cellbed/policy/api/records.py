"""The records that stages take and give. Public (``cellbed.policy.api``). Resources are always
(cpu cores, memory MiB) in that order; arrays of hosts are (N, 2) float arrays in the same order.

Most records are the built-in policies' own types, re-exported here so that a plugin and a
built-in see the same objects: HostLoad and Verdict (overload), Candidate and Selection (task
selection), TargetState, TaskDemand and Answer (the target's fit and the node's admission),
Acceptor (target order), Pick (candidates). The others are defined here.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from cellbed.domain.constraints import AttrValue, Constraint
from cellbed.policy.masb.accept import Answer, TargetState, TaskDemand
from cellbed.policy.masb.broker_select import Pick
from cellbed.policy.masb.choose import Acceptor
from cellbed.policy.masb.overload import HostLoad, Verdict
from cellbed.policy.masb.scs import Candidate, Selection


@dataclasses.dataclass(frozen=True)
class NodeUse:
    """A host as its node daemon's admission sees it (the node's fit test, R4)."""
    host: str
    capacity: tuple[float, float]
    requested: tuple[float, float]         # requests of its VMs and of the reservations for VMs arriving
    used: tuple[float, float]              # measured use (VMs without a sample yet count their request)
    prod_requested: tuple[float, float]    # requests of production VMs, arriving ones included
    attributes: Mapping[str, AttrValue] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class VmDemand:
    """A VM asking to start on a host or to arrive there by migration."""
    name: str
    requested: tuple[float, float]
    production: bool = False
    constraints: tuple[Constraint, ...] = ()


@dataclasses.dataclass(frozen=True)
class QueuedTask:
    """A task waiting in a front-end's queue (T2: task sorting).

    *seq* counts every entry into a ready queue (arrival, and a return after being parked):
    ordering by *seq* alone is the FIFO order of a plain queue. *duration_s* is the task's
    runtime as the workload states it (0 when unknown); nothing else knows the future."""
    name: str
    user: str
    seq: int
    arrival_s: float
    duration_s: float
    requested: tuple[float, float]
    priority: int = 0
    production: bool = False
    attempts: int = 0


@dataclasses.dataclass(frozen=True)
class Hosts:
    """The hosts an allocation chooses among (R5): which were offered (constraints matched and
    room on the scheduler's view: the R3/R4 filters), with their free resources and capacity."""
    offered: "object"        # (N,) bool ndarray
    free: "object"           # (N, 2) float ndarray
    capacity: "object"       # (N, 2) float ndarray

    def __len__(self) -> int:
        return len(self.offered)


__all__ = ["Acceptor", "Answer", "Candidate", "Constraint", "HostLoad", "Hosts", "NodeUse", "Pick", "QueuedTask",
           "Selection", "TargetState", "TaskDemand", "Verdict", "VmDemand"]
