"""Why this host, for Megha (DESIGN §17): the explanation of one sampled placement attempt of a
task at its GM: each partition the match looked at, with the hosts it offered on the GM's view
(constraints met, room on the view: R3, R4), their free resources there and the one the
allocation chose (R5); the age of each LM's view when it was used; each LM's verdict on its true
state (the launch accepted, or the inconsistency it found, with the numbers); and the messages it
cost (each LM request is a request and a reply)."""
from __future__ import annotations

import numpy as np

from cellbed.runtime.explain import ExplainLog

SHOWN = 32
"""Offered hosts listed per partition (the first ones in host order); the count is always given."""


class PlacementExplanation:
    def __init__(self, decision_id: str, gm: str, task: str, user: str, cpu: float, mem: float, now: float) -> None:
        self.now = now
        self.d: dict = {"id": decision_id, "kind": "megha", "agent": gm, "t_unix_s": now, "task": task, "user": user,
                        "request": [cpu, mem], "matches": [], "verdicts": [], "chosen": "", "lm": "", "outcome": "",
                        "rpcs": 0, "messages": 0, "view_age_s": None}

    def observe(self, v, hosts: np.ndarray, offered: np.ndarray, free_cpu: np.ndarray, free_mem: np.ndarray,
                chosen: int) -> None:
        """One partition's decision (the hook of View.match)."""
        idx = np.flatnonzero(offered)
        age = self.now - v.updated_unix_s if v.updated_unix_s else None
        self.d["matches"].append({
            "lm": v.name, "view_age_s": age, "offered": int(idx.size),
            "hosts": [{"host": v.hosts[int(hosts[i])], "free": [float(free_cpu[i]), float(free_mem[i])]}
                      for i in idx[:SHOWN]],
            "chosen": v.hosts[int(hosts[chosen])] if chosen >= 0 else ""})
        if chosen >= 0 and age is not None:
            self.d["view_age_s"] = age

    def verdict(self, lm: str, host: str, kind: str, result: str, detail: str) -> None:
        self.d["rpcs"] += 1
        self.d["verdicts"].append({"lm": lm, "host": host, "kind": kind, "result": result, "detail": detail})

    def done(self, log: ExplainLog, outcome: str, lm: str = "", host: str = "") -> None:
        self.d.update(outcome=outcome, lm=lm, chosen=host, messages=2 * self.d["rpcs"])
        log.write(self.d)
