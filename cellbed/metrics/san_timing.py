"""How long a SAN round takes from the overload it answers to the migration it starts: one row
per finished negotiation (``san.csv`` of a real run), from its steps' Unix times (pure).

Columns (seconds after the negotiation started, i.e. after the overload was detected; empty when
the step did not happen): ``candidates_s`` (the broker answered), ``request_s`` (requests sent),
``first_acceptance_s``, ``process_s`` (a target reserved: the migration starts), ``end_s``.
"""
from __future__ import annotations

import math

SAN_COLUMNS = ("san_id", "vm", "src", "state", "target", "started_unix_s", "candidates_s", "request_s",
               "first_acceptance_s", "process_s", "end_s", "acceptances", "rejections")


def san_row(neg) -> dict:
    """The san.csv row of a finished ``masb_pb2.Negotiation``."""
    t0 = neg.started_unix_s
    first: dict[str, float] = {}
    count = {"acceptance": 0, "rejection": 0}
    for s in neg.steps:
        first.setdefault(s.kind, s.unix_s)
        if s.kind in count:
            count[s.kind] += 1

    def at(kind: str) -> float:
        return round(first[kind] - t0, 6) if kind in first and t0 else math.nan

    return {"san_id": neg.san_id, "vm": neg.vm, "src": neg.src_host, "state": neg.state, "target": neg.target,
            "started_unix_s": round(t0, 6), "candidates_s": at("candidates"), "request_s": at("request"),
            "first_acceptance_s": at("acceptance"), "process_s": at("process"),
            "end_s": round(neg.ended_unix_s - t0, 6) if neg.ended_unix_s and t0 else math.nan,
            "acceptances": count["acceptance"], "rejections": count["rejection"]}
