"""Why this host (DESIGN §17): the explanation of one sampled SAN round, built from what the
source saw as the round ran: the broker's candidates with their scores and the age of each
report the broker scored (the view's staleness), each target's answer with its numbers, the
order step 4 gave, what step 5 tried and where the task went, and the messages it cost (each RPC
is a request and a reply)."""
from __future__ import annotations

from cellbed.policy.masb.choose import Acceptor
from cellbed.runtime.explain import ExplainLog
from cellbed.v1 import masb_pb2 as masbpb


class RoundExplanation:
    def __init__(self, neg: masbpb.Negotiation, now: float, task: masbpb.TaskInfo) -> None:
        trigger = neg.steps[0].detail if len(neg.steps) else ""
        self.d: dict = {"id": neg.san_id, "kind": "san", "agent": neg.src_host, "t_unix_s": now, "vm": neg.vm,
                        "trigger": trigger,
                        "task": {"used": [task.used.cpu_cores, task.used.mem_mib],
                                 "requested": [task.requested.cpu_cores, task.requested.mem_mib]},
                        "broker": "", "scanned": 0, "matched": 0, "candidates": [], "answers": [], "order": [],
                        "tried": [], "chosen": "", "outcome": "", "rpcs": 0, "messages": 0,
                        "view_age_s": None, "view_oldest_s": None}

    def rpc(self, n: int = 1) -> None:
        self.d["rpcs"] += n

    def candidates(self, resp: masbpb.GetCandidateNodesResponse, recs: list, now: float) -> None:
        d = self.d
        d.update(broker=resp.broker, scanned=resp.scanned, matched=resp.matched)
        ages = [now - r.timestamp_unix_s for r in recs]
        d["candidates"] = [{"host": r.host, "score": r.fitness, "forced": r.force_migration,
                            "report_age_s": age, "available": [r.available.cpu_cores, r.available.mem_mib]}
                           for r, age in zip(recs, ages)]
        if ages:
            d["view_age_s"], d["view_oldest_s"] = min(ages), max(ages)

    def accepted(self, host: str, a: masbpb.TaskMigrationAcceptanceResponse, forced: bool) -> None:
        self.d["answers"].append({"host": host, "accepted": True, "forced": forced,
                                  "used": [a.used.cpu_cores, a.used.mem_mib],
                                  "capacity": [a.capacity.cpu_cores, a.capacity.mem_mib]})

    def refused(self, host: str, reason: str, detail: str, forced: bool) -> None:
        self.d["answers"].append({"host": host, "accepted": False, "forced": forced, "reason": reason,
                                  "detail": detail})

    def order(self, order: list[tuple[Acceptor, float]]) -> None:
        self.d["order"] = [{"host": a.host, "score": s, "forced": a.forced} for a, s in order]

    def tried(self, host: str, result: str, detail: str = "") -> None:
        self.d["tried"].append({"host": host, "result": result, "detail": detail})

    def done(self, log: ExplainLog, state: str, chosen: str) -> None:
        self.d.update(outcome=state, chosen=chosen, messages=2 * self.d["rpcs"])
        log.write(self.d)
