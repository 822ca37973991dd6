"""The live view's MASB and Megha panels (cellbed/ui/live_agents.py) from canned agent answers: what
each panel publishes, Megha's active LM instance chosen over its standby, queues merged across GMs as
`cellctl queues` merges them, a SAN step pushed at once, and an unreachable agent reported, not raised."""
from __future__ import annotations

import asyncio

from cellbed.domain import errors
from cellbed.ui.live_agents import Agents
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb, megha_pb2 as meghapb, node_pb2 as npb


class Transport:
    def __init__(self, answers: dict) -> None:
        self.answers, self.calls = answers, []

    async def request(self, target, method, msg, timeout=10.0):
        self.calls.append((target, method))
        a = self.answers[(target, method)]
        if isinstance(a, Exception):
            raise a
        return a


class Hub:
    def __init__(self) -> None:
        self.out = []

    def publish(self, kind, data) -> None:
        self.out.append((kind, data))


MEGHA = {"gms": {"gm1": "g1:1", "gm2": "g2:1"}, "lms": {"lm1a": "l1a:1", "lm1b": "l1b:1"},
         "instances": {"lm1": ["lm1a", "lm1b"]}}


def test_megha_panel_shows_views_queues_and_the_active_lm():
    res = cpb.Resources(cpu_cores=2.0, mem_mib=1024)
    view = meghapb.GetViewResponse(gm="gm1", lms=[meghapb.LmView(lm="lm1", instance="lm1a", epoch=3, staleness_s=0.4,
                                                                 partitions=[meghapb.PartitionView(gm="gm1", nodes=2, free=res)])])
    q1 = meghapb.ListQueuesResponse(gm="gm1", queues=[meghapb.QueueInfo(user="alice", gm="gm1", length=4, share=0.5),
                                                      meghapb.QueueInfo(user="bob", gm="gm2", length=0, share=0.5)])
    q2 = meghapb.ListQueuesResponse(gm="gm2", queues=[meghapb.QueueInfo(user="bob", gm="gm2", length=7, share=0.5)])
    active = meghapb.ListPartitionsResponse(lm="lm1", instance="lm1a", role=meghapb.LM_ROLE_ACTIVE, partitions=[
        meghapb.PartitionInfo(gm="gm1", slices=[meghapb.SliceInfo(host="h1", tasks=2)])])
    standby = meghapb.ListPartitionsResponse(lm="lm1", instance="lm1b", role=meghapb.LM_ROLE_STANDBY)
    t = Transport({("g1:1", "GlobalMaster/GetView"): view, ("g1:1", "GlobalMaster/ListQueues"): q1,
                   ("g2:1", "GlobalMaster/GetView"): errors.Unavailable("gm2 is down"),
                   ("l1a:1", "LocalMaster/ListPartitions"): active, ("l1b:1", "LocalMaster/ListPartitions"): standby})
    hub = Hub()
    asyncio.run(Agents(t, hub, {}, megha=MEGHA).poll_megha())
    kind, m = hub.out[-1]
    assert kind == "megha"
    assert [v["gm"] for v in m["gms"]] == ["gm1"] and m["gms"][0]["lms"][0]["staleness_s"] == 0.4
    assert m["errors"] == ["gm2: gm2 is down"]
    assert [(q["user"], q["length"]) for q in m["queues"]] == [("alice", 4), ("bob", 0)]
    assert [(p["instance"], p["role"]) for p in m["lms"]] == [("lm1a", "LM_ROLE_ACTIVE")]
    assert m["lms"][0]["partitions"][0]["slices"][0]["host"] == "h1"
    # with gm2 back, bob's queue length is the one its own GM (gm2) reports
    t.answers[("g2:1", "GlobalMaster/GetView")] = meghapb.GetViewResponse(gm="gm2")
    t.answers[("g2:1", "GlobalMaster/ListQueues")] = q2
    asyncio.run(Agents(t, hub, {}, megha=MEGHA).poll_megha())
    assert {q["user"]: q["length"] for q in hub.out[-1][1]["queues"]} == {"alice": 4, "bob": 7}
    assert hub.out[-1][1]["errors"] == []


def test_broker_panel_and_an_unreachable_broker():
    e = masbpb.CacheEntry(report=masbpb.NodeReport(host="h1", asr_class=cpb.ASR_CLASS_PA, task_count=2,
                                                   capacity=cpb.Resources(cpu_cores=1.0, mem_mib=1024)), age_s=1.5)
    t = Transport({("b:1", "BrokerAgent/ListCache"): masbpb.ListCacheResponse(broker="ba1", entries=[e], node_expiry_s=300,
                                                                             counters={"candidate_requests": 3})})
    hub = Hub()
    ag = Agents(t, hub, {}, broker="b:1")
    asyncio.run(ag.poll_broker())
    b = hub.out[-1][1]
    assert b["entries"] == [{"host": "h1", "age_s": 1.5, "asr": "PA", "cap_cpu": 1.0, "cap_mem": 1024.0, "used_cpu": 0.0,
                             "used_mem": 0.0, "req_cpu": 0.0, "tasks": 2}]
    assert b["counters"] == {"candidate_requests": 3} and b["error"] == ""
    t.answers[("b:1", "BrokerAgent/ListCache")] = errors.DeadlineExceeded("ba1 ListCache: deadline")
    asyncio.run(ag.poll_broker())
    assert hub.out[-1][1]["error"] == "ba1 ListCache: deadline" and hub.out[-1][1]["entries"][0]["host"] == "h1"


def test_a_san_step_is_pushed_at_once_and_the_negotiations_read_again():
    neg = masbpb.Negotiation(san_id="h1-1-ab", vm="v1", src_host="h1", state="migrated", target="h2",
                             steps=[masbpb.SanStep(kind="candidates", host="ba1"), masbpb.SanStep(kind="migrated", host="h2")])
    t = Transport({("h1:1", "San/ListNegotiations"): masbpb.ListNegotiationsResponse(host="h1", negotiations=[neg],
                                                                                     counters={"sans_started": 1})})
    hub = Hub()
    ag = Agents(t, hub, {"h1": "h1:1"}, san=True)
    ag.san_step(npb.Event(host="h1", vm="v1", unix_s=12.5, kind=npb.EVENT_KIND_SAN_STEP,
                          detail="h1-1-ab candidates ba1 3 candidates, 0 forced"))
    assert hub.out[-1] == ("san_step", {"host": "h1", "san_id": "h1-1-ab", "vm": "v1", "kind": "candidates", "peer": "ba1",
                                        "detail": "3 candidates, 0 forced", "unix_s": 12.5, "ev_unix_s": 12.5})
    asyncio.run(ag.poll_san("h1", 12.5))
    kind, s = hub.out[-1]
    assert kind == "san" and s["ev_unix_s"] == 12.5 and s["counters"] == {"sans_started": 1}
    assert [x["kind"] for x in s["negotiations"][0]["steps"]] == ["candidates", "migrated"]
    n = len(hub.out)
    asyncio.run(ag.poll_san("h1"))                 # nothing changed: nothing published
    assert len(hub.out) == n
    assert ag.snapshot()["san"]["h1"]["negotiations"][0]["target"] == "h2"
