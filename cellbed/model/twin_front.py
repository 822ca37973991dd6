"""The MASB front-end of a real cell's model twin (``cellctl compare``): the same agents as
:class:`cellbed.model.masb.MasbFront`, driven the way the real-cell runner drives a real cell.

What differs from the MASB model cell, each as on the real cell:

* the VMs are the runner's (:mod:`cellbed.workload.realplan`): one vCPU, the runner's request,
  memory, working set and dirty rate; usage records change a VM's CPU load, working set and dirty
  rate as SetWorkload does (and through the fitted guest overhead, the host's measured use);
* hosts admit as the scenario says (the same admission policy as the real node daemons);
* best fit offers a host at most ``max_vms_per_host`` VMs, as the real runner does (boot capacity);
* at most ``boots_at_once`` placements (each a guest boot) are in flight, as in the runner, and
  deferred placements are retried ``retry_per_tick`` at a time each tick.
"""
from __future__ import annotations

import asyncio

from cellbed.domain.vm import VmSpec
from cellbed.workload.realplan import PlannedVm, ScaleDown
from cellbed.model.masb import MasbFront
from cellbed.workload import events as ev


class TwinFront(MasbFront):
    admission = "requested"

    def __init__(self, cell, *, vms: dict[str, PlannedVm], scale: ScaleDown, boots_at_once: int,
                 max_vms_per_host: int) -> None:
        super().__init__(cell)
        self.max_vms_per_host = max_vms_per_host
        self.planned = vms
        self.scale = scale
        self.boots_at_once = boots_at_once
        self._boot_slots: asyncio.Semaphore | None = None

    def _make_spec(self, name: str, cpu_request: float, mem_request: float, priority: int,
                   constraints: tuple, user: str) -> VmSpec:
        v = self.planned[name]
        return VmSpec(name=name, mem_mib=v.mem_mib, vcpus=1, cpu_load=v.use_cores, wss_mib=v.wss_mib,
                      dirty_mib_s=v.dirty_mib_s, production=v.production, priority=v.priority,
                      req_cpu_cores=v.req_cores, user=v.user)

    def apply(self, e: ev.WorkloadEvent) -> None:
        if isinstance(e, ev.UpdateTaskUsedResources):
            name = self._name(e.task_key)
            spec = self.live.get(name)
            if spec is None:
                return
            cores = self.scale.cores(e.cpu_rate or 0.0)
            if self.cell.fabric.set_workload(name, cores, spec.wss_mib, self.scale.dirty(cores)):
                self.counters["set_workload"] += 1
            else:
                self.counters["set_workload_not_placed"] += 1
            return
        super().apply(e)

    def _may_host(self, view) -> bool:
        return len(view.vms) < self.max_vms_per_host

    async def _place(self, spec: VmSpec) -> bool:
        if self._boot_slots is None:
            self._boot_slots = asyncio.Semaphore(self.boots_at_once)
        async with self._boot_slots:
            return await super()._place(spec)
