"""What an LM's requests and messages carry: a task's reservation, its VM spec, the checks every request passes, and the LM's state topic."""
from __future__ import annotations

import math
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb

ACTIVE, STANDBY = meghapb.LM_ROLE_ACTIVE, meghapb.LM_ROLE_STANDBY


def state_topic(cell: str, lm: str = "+") -> str:
    return f"cellbed/{cell}/megha/lm/{lm}/state"


def task_request(t: meghapb.MeghaTask) -> tuple[float, float]:
    """(cores, MiB) a task reserves; memory is whole MiB, as the node admits it."""
    return float(t.request.cpu_cores), float(math.ceil(t.request.mem_mib - 1e-9))


def vm_spec(t: meghapb.MeghaTask) -> npb.VmSpec:
    cpu, mem = task_request(t)
    return npb.VmSpec(name=t.name, mem_mib=int(mem), vcpus=t.vcpus or max(1, math.ceil(cpu - 1e-9)),
                      workload=t.workload, production=t.production, priority=t.priority, req_cpu_cores=cpu,
                      constraints=t.constraints, user=t.user)


def check_task(t: meghapb.MeghaTask) -> None:
    """What every LM request must carry; the GM has validated the rest against the cell."""
    if not t.name:
        raise errors.InvalidArgument("task.name must be set")
    cpu, mem = t.request.cpu_cores, t.request.mem_mib
    if not (math.isfinite(cpu) and cpu > 0):
        raise errors.InvalidArgument(f"task.request.cpu_cores={cpu!r} is out of range: allowed > 0 cores")
    if not (math.isfinite(mem) and mem > 0):
        raise errors.InvalidArgument(f"task.request.mem_mib={mem!r} is out of range: allowed > 0 MiB")
