"""The negotiation ledger: the SAN's books. It holds the negotiations under way (one per task) and
the last ones finished, the tasks SCS leaves out for a while (their SAN found no target), the
sequence number of SAN ids and the counters every part of the SAN adds to. Each step of a
negotiation is written here (and emitted as a node event)."""
from __future__ import annotations

import collections
from typing import Callable, Container, Iterable

from cellbed.daemon.san.config import Negotiation
from cellbed.runtime.clock import Clock
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb

EmitFn = Callable[..., None]
"""The NodeAgent's event stream: ``emit(kind, vm, detail)``."""


class NegotiationLedger:
    def __init__(self, host: str, clock: Clock, emit: EmitFn, *, keep_recent: int, unmovable_s: float) -> None:
        self.host = host
        self.clock = clock
        self.emit = emit
        self.unmovable_s = unmovable_s
        self.counters: collections.Counter = collections.Counter()
        self.active: dict[str, Negotiation] = {}        # vm -> negotiation under way
        self.recent: collections.deque = collections.deque(maxlen=keep_recent)
        self._unmovable: dict[str, float] = {}          # task -> monotonic time until which SCS skips it
        self._seq = 0

    # --- opening and recording ------------------------------------------------------------------------
    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def open(self, name: str, san_id: str, started_unix_s: float) -> masbpb.Negotiation:
        neg = masbpb.Negotiation(san_id=san_id, vm=name, src_host=self.host, state="active",
                                 started_unix_s=started_unix_s)
        self.active[name] = Negotiation(neg)
        self.counters["sans_started"] += 1
        return neg

    def step(self, neg: masbpb.Negotiation, kind: str, host: str = "", detail: str = "", forced: bool = False) -> None:
        neg.steps.add(unix_s=self.clock.now(), kind=kind, host=host, detail=detail, forced=forced)
        self.emit(npb.EVENT_KIND_SAN_STEP, neg.vm, f"{neg.san_id} {kind} {host} {detail}".strip())

    def finish(self, neg: masbpb.Negotiation, state: str, detail: str = "") -> None:
        neg.state, neg.ended_unix_s = state, self.clock.now()
        if state == "gave-up" and self.unmovable_s:
            self._unmovable[neg.vm] = self.clock.monotonic() + self.unmovable_s
        self.step(neg, "done", neg.target, f"{state}{': ' + detail if detail else ''}")
        self.counters[f"sans_{state}"] += 1
        self.active.pop(neg.vm, None)
        self.recent.append(neg)

    # --- reading ---------------------------------------------------------------------------------------
    def is_active(self, name: str) -> bool:
        return name in self.active

    def any_active(self) -> bool:
        return bool(self.active)

    def san_id_of(self, name: str) -> str:
        return self.active[name].pb.san_id

    def forget_unmovable(self, now: float, present: Container[str]) -> None:
        """Let SCS consider again the tasks whose time out is over, and forget those gone."""
        for n in [n for n, t in self._unmovable.items() if t <= now or n not in present]:
            del self._unmovable[n]

    def is_unmovable(self, name: str) -> bool:
        return name in self._unmovable

    def any_unmovable(self, names: Iterable[str]) -> bool:
        return any(n in self._unmovable for n in names)

    def last_of(self, name: str) -> masbpb.Negotiation | None:
        for n in reversed(self.recent):
            if n.vm == name:
                return n
        return None

    def listing(self, limit: int = 0) -> masbpb.ListNegotiationsResponse:
        """ListNegotiations: those under way, then the finished ones, newest first."""
        recent = list(self.recent)[::-1]
        if limit:
            recent = recent[:limit]
        return masbpb.ListNegotiationsResponse(host=self.host, negotiations=[n.pb for n in self.active.values()] + recent,
                                               counters=dict(self.counters))
