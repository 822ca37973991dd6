"""The live view stops when told, whatever its loops are doing (cellbed/ui/live.py, live_agents.py).

`cellctl ui` runs LiveCell.stop() on Ctrl-C, which cancels each host's refresher and the agents'
loops and waits for them. A refresher woken by an event in the same loop turn as its cancellation
must end: with asyncio.wait_for (Python 3.11) it took the event, refreshed and waited again, and
stop() waited for it for ever. Nothing here talks to a network: the event streams and the reads are
replaced."""
from __future__ import annotations

import asyncio

from cellbed.runtime.authz import Security
from cellbed.ui import live, live_agents
from cellbed.ui.live import LiveCell


def _cell(**kw) -> tuple[LiveCell, list]:
    cell = LiveCell("c", {"h1": "127.0.0.1:1", "h2": "127.0.0.1:2"}, Security.insecure("c"), refresh_s=60.0, **kw)
    refreshed: list = []

    async def no_stream(host):              # the event stream: silent until cancelled
        await asyncio.Event().wait()

    async def refresh(host, ev_unix_s=0.0):
        refreshed.append(host)

    async def poll(host, ev_unix_s=0.0):
        refreshed.append(f"san:{host}")

    cell._watch = no_stream
    cell.refresh_host = refresh
    cell.agents.poll_san = lambda host, t=0.0: poll(host, t)
    return cell, refreshed


async def _woken_then_stopped(san: bool, monkeypatch) -> list:
    cell, refreshed = _cell(san=san)
    loops = len(cell.targets) + (1 if san else 0)       # each host's refresher, and the SAN loop
    entered: list = []
    all_waiting = asyncio.Event()

    def spy(real):
        async def wait(event, timeout_s):
            entered.append(event)
            if len(entered) == loops:
                all_waiting.set()           # the test wakes once this step has ended, suspended in the wait
            return await real(event, timeout_s)
        return wait

    monkeypatch.setattr(live, "wait_event", spy(live.wait_event))
    monkeypatch.setattr(live_agents, "wait_event", spy(live_agents.wait_event))
    await cell.start()
    await all_waiting.wait()                # every loop is in its wait
    refreshed.clear()
    cell.want_refresh("h1")                 # an event wakes h1's refresher ...
    if san:
        cell.agents._san_wake.set()         # ... and a SAN step the agents' loop
    async with asyncio.timeout(30):         # a bound for a failing run, not a synchronisation
        await cell.stop()
    return refreshed


def test_stop_ends_a_refresher_woken_in_the_same_turn(monkeypatch):
    assert asyncio.run(_woken_then_stopped(False, monkeypatch)) == []


def test_stop_ends_the_san_loop_woken_in_the_same_turn(monkeypatch):
    assert asyncio.run(_woken_then_stopped(True, monkeypatch)) == []
