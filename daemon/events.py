"""A node agent's outward feed: the events it emits (numbered, kept in a ring buffer for a
replay, sent to every WatchEvents subscriber) and the telemetry publisher (MQTT, set by the
daemon's entry point) that gets each event and each host state sample."""
from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator

from cellbed.runtime.clock import Clock
from cellbed.v1 import node_pb2 as npb

EVENT_BUFFER = 512


class EventHub:
    def __init__(self, host: str, clock: Clock) -> None:
        self._host = host
        self._clock = clock
        self._events: deque[npb.Event] = deque(maxlen=EVENT_BUFFER)
        self._subscribers: set[asyncio.Queue] = set()
        self._seq = 0
        self.telemetry = None                              # set by main (MQTT publisher)

    def emit(self, kind: int, vm: str = "", detail: str = "", progress=None, record=None) -> None:
        self._seq += 1
        ev = npb.Event(seq=self._seq, unix_s=self._clock.now(), host=self._host, kind=kind, vm=vm,
                      detail=detail, progress=progress, record=record)
        self._events.append(ev)
        for q in list(self._subscribers):
            if q.full():
                continue  # a slow watcher loses events rather than stalling the daemon
            q.put_nowait(ev)
        if self.telemetry is not None:
            self.telemetry.publish_event(ev)

    def publish_state(self, state: npb.HostState) -> None:
        if self.telemetry is not None:
            self.telemetry.publish_state(state)

    def recent(self) -> list[npb.Event]:
        """The events still in the buffer, oldest first."""
        return list(self._events)

    async def watch(self, replay: int) -> AsyncIterator[npb.Event]:
        q: asyncio.Queue = asyncio.Queue(maxsize=1024)
        for ev in list(self._events)[-replay:] if replay else []:
            q.put_nowait(ev)
        self._subscribers.add(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._subscribers.discard(q)
