"""Names every layer agrees on: a GCD task's VM/task name."""
from __future__ import annotations


def task_name(job_id: int, index: int) -> str:
    """The name of task *index* of job *job_id* (a valid VM name: ``t<job>-<index>``)."""
    return f"t{job_id}-{index}"
