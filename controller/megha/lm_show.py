"""What an LM shows cellctl and its GMs: its partitions (nodes, logical nodes, use) and its hosts
(capacity and attributes, fetched by a GM once per hosts digest)."""
from __future__ import annotations

from collections import Counter

from cellbed.controller.megha.lm_core import LmCore
from cellbed.domain import wire
from cellbed.v1 import megha_pb2 as meghapb


def partitions_pb(core: LmCore, counters: Counter) -> meghapb.ListPartitionsResponse:
    c = core.cluster
    out = meghapb.ListPartitionsResponse(lm=core.lm, instance=core.instance, role=core.role, epoch=core.epoch,
                                         counters=dict(counters))
    if c is None:
        return out
    for g, gm in enumerate(c.gms):
        p = out.partitions.add(gm=gm)
        cc = cm = uc = um = 0.0
        for h in range(len(c.hosts)):
            if c.owner[h] != g:
                continue
            n = sum(1 for t in c.on_host[h].values() if not t.logical)
            p.slices.add(host=c.hosts[h], capacity=wire.resources(c.cap_cpu[h], c.cap_mem[h]),
                         used=wire.resources(c.used_cpu[h], c.used_mem[h]), tasks=n)
            cc, cm, uc, um = cc + c.cap_cpu[h], cm + c.cap_mem[h], uc + c.used_cpu[h], um + c.used_mem[h]
        for t in sorted(c.tasks.values(), key=lambda t: t.name):
            if t.logical and t.partition == g:
                p.slices.add(host=c.hosts[t.host], logical=True, task=t.name,
                             capacity=wire.resources(t.cpu, t.mem), used=wire.resources(t.cpu, t.mem), tasks=1)
                cc, cm, uc, um = cc + t.cpu, cm + t.mem, uc + t.cpu, um + t.mem
        p.capacity.CopyFrom(wire.resources(cc, cm))
        p.used.CopyFrom(wire.resources(uc, um))
    return out


def hosts_pb(core: LmCore) -> meghapb.GetHostsResponse:
    c = core.cluster
    return meghapb.GetHostsResponse(lm=core.lm, digest=c.digest, hosts=[
        meghapb.LmHost(name=n, capacity=wire.resources(float(c.total_cpu[i]), float(c.total_mem[i])),
                       attributes=wire.attributes_pb(c.attributes[i])) for i, n in enumerate(c.hosts)])
