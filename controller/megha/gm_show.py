"""What a GM shows cellctl and the metrics exporter: its view of every LM (partitions, staleness)
and its user queues (shares, usage, preemptions)."""
from __future__ import annotations

from collections import Counter

from cellbed.controller.megha.gm_links import LmLinks
from cellbed.domain import wire
from cellbed.policy.megha import fairness
from cellbed.policy.megha.view import View
from cellbed.v1 import megha_pb2 as meghapb


def view_pb(gm: str, view: View, links: LmLinks, counters: Counter, now: float) -> meghapb.GetViewResponse:
    out = meghapb.GetViewResponse(gm=gm, counters=dict(counters))
    for lm in view.order:
        v = view[lm]
        lv = out.lms.add(lm=lm, instance=v.instance or links.target(lm), epoch=v.epoch, version=v.version,
                         staleness_s=now - v.updated_unix_s if v.updated_unix_s else -1.0,
                         full_staleness_s=now - v.full_unix_s if v.full_unix_s else -1.0, hosts=len(v.hosts))
        for gi, g in enumerate(v.gms):
            m = v.owner == gi
            lv.partitions.add(gm=g, internal=g == gm, nodes=int(m.sum()),
                              logical_nodes=int(v.logical.get(g, 0)),
                              free=wire.resources(float(v.free_cpu[m].sum()), float(v.free_mem[m].sum())),
                              capacity=wire.resources(float(v.total_cpu[m].sum()), float(v.total_mem[m].sum())))
    return out


def queues_pb(gm: str, view: View, queue_cfg: dict[str, fairness.QueueConfig], lengths: dict[str, int],
              per_user: dict[str, Counter]) -> meghapb.ListQueuesResponse:
    """*lengths*: the queue length of every user this GM serves."""
    cap_c, cap_m = view.capacity()
    usage = view.usage()
    out = meghapb.ListQueuesResponse(gm=gm, capacity=wire.resources(cap_c, cap_m))
    for u in sorted(queue_cfg):
        q = queue_cfg[u]
        c, m, n = usage.get(u, (0.0, 0.0, 0))
        pu = per_user.get(u, Counter())
        out.queues.add(user=u, share=q.share, gm=q.gm, length=lengths.get(u, 0),
                       running=n, usage=wire.resources(c, m),
                       usage_share=fairness.dominant_share(c, m, cap_c, cap_m), preempted=pu["preempted"],
                       preemption_attempts=pu["preemption_attempts"], preemptions=pu["preemptions"],
                       repartitions=pu["repartitions"], placed=pu["placed"])
    return out
