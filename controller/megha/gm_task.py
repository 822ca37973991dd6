"""A task as its GM holds it: the submitted task, its parsed constraints and request, its state and its allocation clock."""
from __future__ import annotations

import dataclasses
from cellbed.domain import errors
from cellbed.controller.megha.alloc import AllocClock
from cellbed.v1 import megha_pb2 as mpb
from cellbed.domain.constraints import Constraint

QUEUED, STARTING, RUNNING = mpb.TASK_STATE_QUEUED, mpb.TASK_STATE_STARTING, mpb.TASK_STATE_RUNNING
FINISHED, REJECTED = mpb.TASK_STATE_FINISHED, mpb.TASK_STATE_REJECTED


LM_DOWN = (errors.Unavailable, errors.FailedPrecondition, errors.DeadlineExceeded)


@dataclasses.dataclass
class GmTask:
    task: mpb.MeghaTask
    constraints: tuple[Constraint, ...]
    cpu: float
    mem: float
    clk: AllocClock
    state: int = QUEUED
    detail: str = ""
    placement: mpb.Placement | None = None
    allocation: mpb.AllocationTime | None = None
    preemptions: int = 0
    requeues: int = 0
    recovered: bool = False
    inflight: bool = False             # a request for it is out at an LM
    unsure: set = dataclasses.field(default_factory=set)   # LMs that may hold it (a request timed out)
    early: mpb.TaskEvent | None = None
    waiters: list = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def user(self) -> str:
        return self.task.user
