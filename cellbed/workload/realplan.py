"""Which tasks of a scenario's stream become VMs on a real cell, and what each VM is: the one
decision the real-cell runner (:mod:`cellbed.experiment.real.run`) and its model twin
(:mod:`cellbed.experiment.twin.driver`) share, so that ``cellctl compare`` runs the *same* VMs on both.

Both read the run's stream the same way (:func:`read_stream`, the generator's events up to the
run's end); the plan is pure: the stream in, a plan out. Per ``AddTask`` (in stream order) a
decision:

* ``short``: the run lives less than ``workload.real.min_task_s`` (its end is the first
  ``RemoveTask`` of the task after it; none in the run: it lives on);
* ``fraction``: the seeded draw keeps only ``task_fraction`` of the rest;
* ``box_full``: ``max_vms_per_host × hosts`` planned VMs are already live (arrived, not ended);
* ``vm``: it becomes a VM (:class:`PlannedVm`).

Every number of a VM comes from :class:`ScaleDown` (the normalised GCD units → cores and MiB).
"""
from __future__ import annotations

import dataclasses
import heapq
import math
import random
from typing import Iterable

from cellbed.domain.names import task_name
from cellbed.domain.vm import max_wss_mib
from cellbed.workload import events as ev
from cellbed.workload.generator import WorkloadGenerator
from cellbed.workload.generator_config import GeneratorConfig

USE_OF_REQUEST = 0.45
"""A VM's CPU use until its first usage record: the GCD mean use/request ratio (digest §E)."""
PRODUCTION_PRIORITY = 9
DECISIONS = ("vm", "short", "fraction", "box_full")


@dataclasses.dataclass(frozen=True)
class ScaleDown:
    """How normalised GCD tasks become small VMs on this box (every field goes to the manifest)."""

    cpu_cores_per_unit: float       # host cores per normalised CPU unit (host capacity / mean node CPU)
    mem_mib_per_unit: float         # MiB per normalised memory unit
    tasks_per_vm: float             # GCD tasks' CPU one VM stands for
    min_vm_mem_mib: int
    max_vm_mem_mib: int
    dirty_mib_s_per_core: float

    def vm(self, cpu_norm: float, mem_norm: float) -> tuple[float, int]:
        """(cores, MiB) of a VM for a task using/requesting *cpu_norm*, *mem_norm*."""
        cores = min(1.0, max(0.0, cpu_norm) * self.cpu_cores_per_unit * self.tasks_per_vm)
        mem = int(round(mem_norm * self.mem_mib_per_unit))
        return cores, max(self.min_vm_mem_mib, min(self.max_vm_mem_mib, mem))

    def cores(self, cpu_rate: float) -> float:
        """A usage record's CPU rate as the VM's cores."""
        return self.vm(cpu_rate, 0.0)[0]

    def wss(self, mem_mib: int) -> int:
        """The guest's working set: half its memory, within what the guest can hold."""
        return min(mem_mib // 2, max_wss_mib(mem_mib))

    def dirty(self, cores: float) -> float:
        return self.dirty_mib_s_per_core * cores


@dataclasses.dataclass(frozen=True)
class PlannedVm:
    """A VM the run starts: when, for how long, and its spec's numbers."""

    name: str
    task_key: tuple[int, int]
    arrival_s: float
    end_s: float                   # math.inf: lives past the run
    req_cores: float
    use_cores: float               # until the first usage record
    mem_mib: int
    wss_mib: int
    dirty_mib_s: float
    production: bool
    priority: int
    user: str


@dataclasses.dataclass
class Plan:
    """The decisions, one per AddTask in stream order, and the VMs."""

    decisions: list[str]
    vms: list[PlannedVm]

    def counts(self) -> dict[str, int]:
        return {d: self.decisions.count(d) for d in DECISIONS}


def planned_vm(t: float, end: float, e: ev.AddTask, scale: ScaleDown) -> PlannedVm:
    req, mem = scale.vm(e.cpu_request, e.mem_request)
    use, _ = scale.vm(e.cpu_request * USE_OF_REQUEST, 0.0)
    return PlannedVm(name=task_name(e.job_id, e.task_index), task_key=e.task_key, arrival_s=t, end_s=end,
                     req_cores=max(0.01, req), use_cores=use, mem_mib=mem, wss_mib=scale.wss(mem),
                     dirty_mib_s=scale.dirty(use), production=e.priority >= PRODUCTION_PRIORITY,
                     priority=e.priority, user=e.user)


def read_stream(gen_cfg: GeneratorConfig, duration_s: float) -> list:
    """The generator's events up to *duration_s*, as (simulated s from the first event, event)."""
    out, t0 = [], None
    for e in WorkloadGenerator(gen_cfg):
        if t0 is None:
            t0 = e.time_us
        t = (e.time_us - t0) / 1e6
        if t > duration_s:
            break
        out.append((t, e))
    return out


def run_ends(stream: list[tuple[float, ev.WorkloadEvent]]) -> list[float]:
    """Per event index: for an AddTask, the time of the task's first RemoveTask after it
    (math.inf if none in *stream*); NaN for every other event."""
    out = [math.nan] * len(stream)
    open_at: dict[tuple[int, int], int] = {}
    for i, (t, e) in enumerate(stream):
        if isinstance(e, ev.AddTask):
            out[i] = math.inf
            open_at[e.task_key] = i
        elif isinstance(e, ev.RemoveTask):
            j = open_at.pop(e.task_key, None)
            if j is not None:
                out[j] = t
    return out


def plan(stream: Iterable[tuple[float, ev.WorkloadEvent]], scale: ScaleDown, *, hosts: int, max_vms_per_host: int,
         min_task_s: float, task_fraction: float, seed: int) -> Plan:
    """The plan of a run whose stream is *stream* ((simulated s, event), in time order)."""
    stream = list(stream)
    ends = run_ends(stream)
    rng = random.Random(seed)
    cap = max_vms_per_host * hosts
    live: list[float] = []          # end times of the planned VMs still live (a heap)
    decisions: list[str] = []
    vms: list[PlannedVm] = []
    for i, (t, e) in enumerate(stream):
        if not isinstance(e, ev.AddTask):
            continue
        while live and live[0] <= t:
            heapq.heappop(live)
        end = ends[i]
        if end - t < min_task_s:
            decisions.append("short")
        elif rng.random() >= task_fraction:
            decisions.append("fraction")
        elif len(live) >= cap:
            decisions.append("box_full")
        else:
            decisions.append("vm")
            vms.append(planned_vm(t, end, e, scale))
            heapq.heappush(live, end)
    return Plan(decisions, vms)
