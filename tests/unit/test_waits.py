"""cellbed/runtime/waits.py: a wait with a time limit that never loses a cancellation.

The planted case is the one that can keep `cellctl ui` from exiting on Ctrl-C: the event that a
waiter waits for is set, and the waiter is cancelled in the same loop turn. asyncio.wait_for on
Python 3.11 finishes its inner task first and returns True, and the loop goes on; wait_event raises
CancelledError."""
from __future__ import annotations

import asyncio
import sys

import pytest

from cellbed.runtime.waits import get_within, wait_event


async def _cancel_as_the_event_is_set(wait) -> tuple[bool, str]:
    """Await ``wait(ev)`` in a task; set the event and cancel the task in the same loop turn, as a
    refresher woken by an event is stopped. Returns whether the cancellation was requested (the
    task had not ended) and how the task ended."""
    ev, waiting = asyncio.Event(), asyncio.Event()

    async def waiter():
        waiting.set()               # wakes the test only once this step has ended, suspended in wait(ev)
        return await wait(ev)

    task = asyncio.create_task(waiter())
    await waiting.wait()
    ev.set()
    requested = task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return requested, "cancelled"
    return requested, "returned"


def test_wait_event_propagates_a_cancellation_that_meets_the_event():
    assert asyncio.run(_cancel_as_the_event_is_set(lambda ev: wait_event(ev, 60.0))) == (True, "cancelled")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps the cancellation from 3.12 on")
def test_the_planted_case_is_the_one_wait_for_loses():
    """The plant is real: on this Python, asyncio.wait_for returns the event's result instead."""
    assert asyncio.run(_cancel_as_the_event_is_set(lambda ev: asyncio.wait_for(ev.wait(), 60.0))) == (True, "returned")


def test_wait_event_answers_true_when_set_and_false_at_the_limit():
    async def go():
        ev = asyncio.Event()
        ev.set()
        first = await wait_event(ev, 5.0)
        ev.clear()
        second = await wait_event(ev, 0.0)
        return first, second

    assert asyncio.run(go()) == (True, False)


def test_get_within_returns_the_item_or_times_out_and_keeps_a_cancellation():
    async def go():
        q: asyncio.Queue = asyncio.Queue()
        q.put_nowait("a")
        got = await get_within(q, 5.0)
        with pytest.raises(TimeoutError):
            await get_within(q, 0.0)

        reading = asyncio.Event()

        async def reader():
            while True:
                reading.set()       # the test wakes once this step has ended, suspended in get_within
                await get_within(q, 60.0)

        task = asyncio.create_task(reader())
        await reading.wait()
        q.put_nowait("b")
        assert task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return got

    assert asyncio.run(go()) == "a"
