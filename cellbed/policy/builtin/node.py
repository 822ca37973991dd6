"""The node's built-in admission rules (the node's fit test, R4): may a VM start on this host,
or arrive on it by migration. The constraints (R3) are the node's own check, before this; a
forced migration (MASB) is held against total capacity only."""
from __future__ import annotations

from cellbed.policy import api

EPS = 1e-9


def _forced(node: api.NodeUse, vm: api.VmDemand) -> api.Answer:
    vc, vm_mem = vm.requested
    cap_c, cap_m = node.capacity
    if vm_mem > cap_m or vc > cap_c + EPS:
        return api.Answer(False, "capacity", f"{node.host}: VM {vm.name} ({vm_mem} MiB, {vc:.2f} cores) "
                          f"exceeds total capacity ({cap_m} MiB, {cap_c:.2f} cores)")
    return api.Answer(True)


@api.policy(stage="admission", name="requested", needs=(),
            doc="the VMs' requests, reservations included, stay within capacity (no overcommitment)")
def requested(node: api.NodeUse, vm: api.VmDemand, forced: bool) -> api.Answer:
    if forced:
        return _forced(node, vm)
    cpu, mem = node.requested
    vc, vm_mem = vm.requested
    cap_c, cap_m = node.capacity
    if mem + vm_mem > cap_m:
        return api.Answer(False, "capacity", f"{node.host}: memory {mem} + {vm_mem} MiB > capacity {cap_m} MiB")
    if cpu + vc > cap_c + EPS:
        return api.Answer(False, "capacity", f"{node.host}: requested CPU {cpu:.2f} + {vc:.2f} cores > capacity "
                          f"{cap_c:.2f} cores")
    return api.Answer(True)


@api.policy(stage="admission", name="used", needs=(),
            doc="measured use plus the VM's request within capacity (overcommitted cells, MASB); "
                "production requests are not overcommitted")
def used(node: api.NodeUse, vm: api.VmDemand, forced: bool) -> api.Answer:
    if forced:
        return _forced(node, vm)
    cpu_u, mem_u = node.used
    vc, vm_mem = vm.requested
    cap_c, cap_m = node.capacity
    if mem_u + vm_mem > cap_m or cpu_u + vc > cap_c + EPS:
        return api.Answer(False, "capacity", f"{node.host}: used {cpu_u:.2f} cores / {mem_u:.0f} MiB + requested "
                          f"{vc:.2f} cores / {vm_mem} MiB > capacity {cap_c:.2f} cores / {cap_m} MiB")
    if vm.production:        # production is not overcommitted: its requests must fit
        pc, pm = node.prod_requested
        if pm + vm_mem > cap_m or pc + vc > cap_c + EPS:
            return api.Answer(False, "rus", f"{node.host}: production requests {pc:.2f} cores / {pm} MiB + "
                              f"{vc:.2f} / {vm_mem} MiB > capacity {cap_c:.2f} cores / {cap_m} MiB")
    return api.Answer(True)
