"""A task as its GM holds it: the submitted task, its parsed constraints and request, its state and its allocation clock."""
from __future__ import annotations

import dataclasses
from cellbed.domain import errors
from cellbed.controller.megha.alloc import AllocClock
from cellbed.v1 import megha_pb2 as meghapb
from cellbed.domain.constraints import Constraint

QUEUED, STARTING, RUNNING = meghapb.TASK_STATE_QUEUED, meghapb.TASK_STATE_STARTING, meghapb.TASK_STATE_RUNNING
FINISHED, REJECTED = meghapb.TASK_STATE_FINISHED, meghapb.TASK_STATE_REJECTED


LM_DOWN = (errors.Unavailable, errors.FailedPrecondition, errors.DeadlineExceeded)


@dataclasses.dataclass
class GmTask:
    task: meghapb.MeghaTask
    constraints: tuple[Constraint, ...]
    cpu: float
    mem: float
    clk: AllocClock
    state: int = QUEUED
    detail: str = ""
    placement: meghapb.Placement | None = None
    allocation: meghapb.AllocationTime | None = None
    preemptions: int = 0
    requeues: int = 0
    recovered: bool = False
    inflight: bool = False             # a request for it is out at an LM
    unsure: set = dataclasses.field(default_factory=set)   # LMs that may hold it (a request timed out)
    early: meghapb.TaskEvent | None = None
    waiters: list = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def user(self) -> str:
        return self.task.user

    def wake(self) -> None:
        """Answer everyone waiting for this task's state to change (GetTask, Submit with wait_s)."""
        for f in self.waiters:
            if not f.done():
                f.set_result(None)
