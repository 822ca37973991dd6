"""Stopping a VM at its task's end in a live run, when its node may refuse for a while.

A node refuses StopVm (FAILED_PRECONDITION) while the VM is in a live migration, and until the
migration's outcome is known. Under TCG a migration may take the node's whole
``migration_timeout_s`` (120 s by default) plus its verification (``verify_timeout_s``, 20 s), so
the runner keeps asking for longer than that before it leaves the VM running:

    outcome = await stop_until_done(stop, locate)     # "stopped" | "gone" | "refused"
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Iterable, Iterator

from cellbed.domain import errors

log = logging.getLogger(__name__)

STOP_BUDGET_S = 200.0
"""Seconds of waiting between refused StopVm calls before the runner gives up: a migration's
default timeout (120 s) and verification (20 s), and room for the hand-over after them."""
MOVES_AT_ONCE = 3
"""A VM found on another host is asked for there at once, up to this many times in a row."""


def retry_waits(budget_s: float = STOP_BUDGET_S, step_s: float = 2.0, cap_s: float = 10.0) -> Iterator[float]:
    """The waits before each retry: *step_s*, 2·*step_s*, … up to *cap_s* each, while their sum
    stays within *budget_s*. With the defaults: 2, 4, 6, 8, 10, then 10 s each, 200 s in all."""
    total, k = 0.0, 1
    while True:
        w = min(step_s * k, cap_s)
        if total + w > budget_s:
            return
        total += w
        k += 1
        yield w


TRANSIENT = (errors.FailedPrecondition, errors.Unavailable, errors.DeadlineExceeded)
"""Refusals that end by themselves (a migration in flight, a node restarting, a slow answer);
any other (a bad request, no permission) would be refused again, so it is not asked again."""


async def stop_until_done(stop: Callable[[], Awaitable[object]], locate: Callable[[], Awaitable[str]],
                          waits: Iterable[float] | None = None, name: str = "") -> str:
    """Call *stop* until it succeeds ("stopped"). When the node does not know the VM, *locate* finds
    the host that lists it (and the caller's *stop* asks that host next); if none does: "gone".
    A TRANSIENT refusal waits the next of *waits* (default retry_waits()) and tries again; once
    they are used up, or at once on any other refusal: "refused" (logged, with *name*, the VM's)."""
    pending = iter(retry_waits() if waits is None else waits)
    moves = 0
    while True:
        try:
            await stop()
            return "stopped"
        except errors.NotFound as e:
            if not await locate():
                return "gone"
            moves += 1
            if moves <= MOVES_AT_ONCE:
                continue
            last: errors.CellbedError = e
        except TRANSIENT as e:                 # migrating, or the node is busy: later
            log.debug("StopVm %s refused: %s", name, e)
            last = e
        except errors.CellbedError as e:
            log.warning("StopVm %s refused for good (%s): %s", name, type(e).__name__, e)
            return "refused"
        moves = 0
        w = next(pending, None)
        if w is None:
            log.warning("StopVm %s still refused after every wait (%s): %s", name, type(last).__name__, last)
            return "refused"
        await asyncio.sleep(w)
