"""Waiting for an event with a time limit, without losing a cancellation.

Python 3.11's ``asyncio.wait_for`` runs the awaited thing in a task of its own, and when the caller
is cancelled in the loop turn in which that task has just finished, it returns the task's result
instead of raising CancelledError (CPython gh-86296, fixed in 3.12 by building wait_for on
``asyncio.timeout``). A loop such as ``while True: wait_for(wake.wait(), period); refresh()`` then
goes on after its stop() cancelled it, and stop() waits for it for ever: `cellctl ui` would not exit
on Ctrl-C if an event woke its refresher in that turn (unit/test_ui_live_stop.py). ``asyncio.timeout``
awaits in the caller's own task, where a cancellation is never turned into a result."""
from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """True once *event* is set, False if *timeout_s* passes first; a cancellation always propagates."""
    try:
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def get_within(queue: asyncio.Queue, timeout_s: float):
    """The next item of *queue*, or TimeoutError if none comes within *timeout_s*; a cancellation
    always propagates (see the module's note)."""
    async with asyncio.timeout(max(0.0, timeout_s)):
        return await queue.get()


__all__ = ["wait_event", "get_within"]
