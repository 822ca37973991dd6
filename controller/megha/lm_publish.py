"""An LM's periodic state update (seed 001 §IV-A): the full state of every partition, published to
the GMs every update_period_s by the active instance (the instances start at different offsets
of the period, so the LMs do not publish all at once)."""
from __future__ import annotations

import zlib
from collections import Counter

from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_wire import ACTIVE, state_topic
from cellbed.controller.megha.params import LmParams


class Publisher:
    def __init__(self, core: LmCore, transport, clock, params: LmParams, counters: Counter, cell: str) -> None:
        self._core = core
        self._transport = transport
        self._clock = clock
        self._params = params
        self._counters = counters
        self._topic = state_topic(cell, core.lm)

    def publish_state(self) -> None:
        """Send the full state of every partition to the GMs now, if this instance is active (the
        periodic update, also used after a change of the cluster outside the GMs)."""
        if self._core.role == ACTIVE:
            self._transport.publish(self._topic, self._core.full_state())
            self._counters["updates_published"] += 1

    def announce(self) -> None:
        """Send the full state now, uncounted (a standby that just took over)."""
        self._transport.publish(self._topic, self._core.full_state())

    async def loop(self) -> None:
        await self._clock.sleep(self._params.update_period_s * (zlib.crc32(self._core.instance.encode()) % 1000) / 1000.0)
        while True:
            self.publish_state()
            await self._clock.sleep(self._params.update_period_s)
