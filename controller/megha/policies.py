"""A Global Master's stages (DESIGN §17): the allocation that picks a host within a partition
(R5, Megha's match), the task order within a user's queue (T2) and fair-share preemption (T10).
Built by the assembly from the policy book; empty fields mean the paper's own rules (tests that
build a master directly)."""
from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class GmPolicies:
    allocation: Callable | None = None
    task_order: Callable | None = None
    preemption: Callable | None = None

    SLOTS = ("allocation", "task_order", "preemption")
