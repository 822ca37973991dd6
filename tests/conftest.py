import asyncio
import time

import pytest


async def wait_until(fn, timeout_s: float, what: str, period_s: float = 0.2):
    """Poll the coroutine function *fn* until it returns a truthy value; fail after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        last = await fn()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}; last value {last!r}")
        await asyncio.sleep(period_s)  # polling interval between condition checks, not a synchronisation sleep

