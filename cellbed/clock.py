"""Clocks are injected: agents call clock.now()/monotonic()/sleep(), never time or asyncio
directly, so the same code runs on a real cell (RealClock) and in virtual time."""
from __future__ import annotations

import asyncio
import time


class RealClock:
    def now(self) -> float:
        """Unix time, seconds."""
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
