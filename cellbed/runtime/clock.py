"""Clocks. Agents call ``clock.now()``, ``clock.monotonic()``, ``await clock.sleep(s)`` and
``clock.call_later(s, fn)``; never ``time`` or ``asyncio.sleep`` directly.

On a model cell everything runs in a :class:`VirtualTimeLoop`: an asyncio loop whose
``time()`` is a virtual counter that jumps straight to the next timer when nothing is
ready. asyncio.sleep, wait_for, timeouts, locks and queues then all run in virtual time,
so unchanged agent code simulates an hour in however long its callbacks take.
"""
from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any, Callable, Coroutine, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float:
        """Unix time, seconds (virtual on a model cell)."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes back."""

    async def sleep(self, seconds: float) -> None: ...

    def call_later(self, seconds: float, fn: Callable[[], Any]) -> asyncio.TimerHandle: ...

    async def charge(self, op: str, n: int = 0) -> None:
        """The processing time of decision *op* over *n* items. A real clock charges nothing (the
        work took its real time); a model cell's clock advances by what its cost model says,
        as a single-threaded server is busy while it computes. Agents call this where they
        compute, and never ask which clock they have."""


CostFn = Callable[[str, int], float]
"""(op, n) -> seconds: a model cell's processing-cost model (see VirtualClock)."""


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def call_later(self, seconds: float, fn: Callable[[], Any]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(seconds, fn)

    async def charge(self, op: str, n: int = 0) -> None:
        return None


class VirtualTimeDeadlock(RuntimeError):
    """Nothing is ready, no timer is pending and no real I/O can arrive: the model is stuck."""


POLL_EVERY = 64
"""The virtual selector polls the real descriptors at least once in this many loop turns."""


class _VirtualSelector(selectors.DefaultSelector):
    """Polls the real file descriptors (the loop's self-pipe) without blocking; if none is
    ready, advances the loop's virtual time by the timeout asyncio asked to wait."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: "VirtualTimeLoop | None" = None

    def select(self, timeout: float | None = None):
        loop = self.loop
        assert loop is not None
        # In a model nothing but a worker thread or a signal writes to the loop's self-pipe, so
        # with no thread pending the real poll (a system call) is made every POLL_EVERY turns
        # only: a signal waits at most that many turns of the loop, and nothing else changes.
        loop.turns += 1
        if loop.pending_threads or timeout is None or loop.turns >= POLL_EVERY:
            loop.turns = 0
            ready = super().select(0)
            if ready:
                return ready
        if timeout == 0:
            return []
        if timeout is None:
            if loop.pending_threads:      # a worker thread will wake us through the self-pipe
                return super().select(None)
            raise VirtualTimeDeadlock(
                f"virtual time {loop.time():.3f} s: no callback ready and no timer pending")
        loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 0.0) -> None:
        sel = _VirtualSelector()
        self._vt = start
        self.pending_threads = 0
        self.turns = 0
        super().__init__(sel)
        sel.loop = self

    def time(self) -> float:
        return self._vt

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._vt += seconds

    def run_in_executor(self, executor, func, *args):  # counted, so the selector may block on it
        self.pending_threads += 1
        fut = super().run_in_executor(executor, func, *args)

        def done(_):
            self.pending_threads -= 1
        fut.add_done_callback(done)
        return fut


class VirtualClock:
    """The clock of a model cell: reads the running VirtualTimeLoop. *cost* (op, n) -> seconds is
    the cell's processing-cost model, charged by :meth:`charge`; None charges nothing."""

    def __init__(self, epoch_unix_s: float = 1_700_000_000.0, cost: CostFn | None = None) -> None:
        self.epoch = epoch_unix_s
        self.cost = cost

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def now(self) -> float:
        return self.epoch + self._loop().time()

    def monotonic(self) -> float:
        return self._loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def call_later(self, seconds: float, fn: Callable[[], Any]) -> asyncio.TimerHandle:
        return self._loop().call_later(seconds, fn)

    async def charge(self, op: str, n: int = 0) -> None:
        seconds = self.cost(op, n) if self.cost is not None else 0.0
        if seconds > 0:
            await asyncio.sleep(seconds)


def run_virtual(main: Coroutine[Any, Any, T], start: float = 0.0) -> T:
    """Run *main* to completion on a fresh VirtualTimeLoop; cancel what it left behind."""
    loop = VirtualTimeLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
