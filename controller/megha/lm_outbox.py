"""The task events an LM owes its GMs (started, finished, preempted, failed, rejected): held per
GM, sent in batches by the active, and resent until acknowledged. The active replicates the
undelivered ones to its standby, which sends them after a takeover."""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_wire import ACTIVE
from cellbed.controller.megha.params import LmParams
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class EventOutbox:
    def __init__(self, core: LmCore, transport, clock, params: LmParams, counters: Counter) -> None:
        self.pending: dict[str, list[meghapb.TaskEvent]] = {}     # GM -> events not yet acknowledged
        self._core = core
        self._transport = transport
        self._clock = clock
        self._params = params
        self._counters = counters
        self._flush = asyncio.Event()

    def event(self, gm: str, ev: meghapb.TaskEvent) -> None:
        """Owe *ev* to *gm* (nothing if the task has no GM: placed outside the GMs)."""
        if not gm:
            return
        if not ev.unix_s:
            ev.unix_s = self._clock.now()
        self.pending.setdefault(gm, []).append(ev)
        self._flush.set()

    def count(self) -> int:
        return sum(len(v) for v in self.pending.values())

    def snapshot(self) -> tuple[list[meghapb.TaskEvent], list[str]]:
        """Every pending event, and its GM (what the active replicates)."""
        out, gms = [], []
        for gm, evs in self.pending.items():
            out += evs
            gms += [gm] * len(evs)
        return out, gms

    def restore(self, owed: list[tuple[str, meghapb.TaskEvent]]) -> None:
        """The events the dead active still owed, as its replica had them (a takeover); they go
        with the next flush."""
        for gm, ev in owed:
            self.pending.setdefault(gm, []).append(ev)

    async def flusher(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            if self._params.event_flush_s:
                await self._clock.sleep(self._params.event_flush_s)
            if self._core.role != ACTIVE:
                continue
            results = await asyncio.gather(*(self._send_events(gm) for gm in list(self.pending)))
            if not all(results):
                await self._clock.sleep(self._params.event_retry_s)
                self._flush.set()

    async def _send_events(self, gm: str) -> bool:
        evs = self.pending.get(gm)
        if not evs:
            return True
        batch = list(evs)
        try:
            await self._transport.request(gm, "GlobalMaster/ReportTaskEvents", meghapb.ReportTaskEventsRequest(
                lm=self._core.lm, instance=self._core.instance, events=batch), timeout=10.0)
        except errors.CellbedError as e:
            self._counters["event_send_failures"] += 1
            log.debug("LM %s: events to %s not delivered (%d pending): %s", self._core.lm, gm, len(evs), e)
            return False
        del evs[:len(batch)]
        self._counters["events_sent"] += len(batch)
        return True
