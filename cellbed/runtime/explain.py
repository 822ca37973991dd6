"""Decision explanations (DESIGN §17, "why this host"): for a sampled share of decisions, each
candidate's inputs and outputs, the age of the view the decision was taken on, and the messages
it cost, one JSON object per decision (``decisions.jsonl``).

Which decisions are explained is decided by the decision's id alone (a hash, compared with the
share), so that every agent of a cell, and a model cell and a real one, agree without talking,
and a run's explanations are reproducible. A log keeps its last records in memory too (what a
live agent answers ``cellctl san explain ID`` from) and writes them to its file as they come.
"""
from __future__ import annotations

import collections
import json
import math
import os
import zlib
from typing import Any

DEFAULT_SHARE = 0.01
KEPT = 2000


def sampled(decision_id: str, share: float) -> bool:
    """Whether *decision_id* is explained at *share* (0..1): the same answer everywhere."""
    if share >= 1.0:
        return True
    if share <= 0.0:
        return False
    return (zlib.crc32(decision_id.encode()) % 1_000_000) < share * 1_000_000


def _plain(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if hasattr(o, "item"):                 # a numpy scalar
        return _plain(o.item())
    return o


class ExplainLog:
    """Where an agent (or a whole model cell) writes its explanations."""

    def __init__(self, share: float = DEFAULT_SHARE, path: str = "") -> None:
        if not 0.0 <= share <= 1.0 or math.isnan(share):
            raise ValueError(f"explain share={share!r}: allowed 0..1")
        self.share = share
        self.path = path
        self.recent: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self.written = 0
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._f = open(path, "a", buffering=1, encoding="utf-8") if path else None

    def wants(self, decision_id: str) -> bool:
        return sampled(decision_id, self.share)

    def write(self, record: dict) -> None:
        rec = _plain(record)
        self.recent[rec["id"]] = rec
        while len(self.recent) > KEPT:
            self.recent.popitem(last=False)
        if self._f is not None:
            self._f.write(json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n")
        self.written += 1

    def get(self, decision_id: str) -> dict | None:
        return self.recent.get(decision_id)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


OFF = ExplainLog(0.0)
"""Explains nothing (agents built without an explanation log)."""
