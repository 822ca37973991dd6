"""Server-sent events: every page that watches the live cell holds one stream; each change is
published once and written to every stream. The first event of a stream is the whole state
(``snapshot``); a page that reads too slowly to keep up is sent a fresh snapshot instead of the
updates it missed."""
from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Callable

from aiohttp import web

from cellbed.runtime.waits import get_within

KEEPALIVE_S = 15.0
QUEUE = 256


def dumps(data: Any) -> str:
    """JSON for the page: NaN and infinities (which JSON lacks) become null."""
    return json.dumps(_finite(data), separators=(",", ":"), allow_nan=False)


def _finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def frame(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {dumps(data)}\n\n".encode()


class Hub:
    def __init__(self, snapshot: Callable[[], dict]) -> None:
        self.snapshot = snapshot
        self._subs: set[asyncio.Queue] = set()
        self.published = 0

    @property
    def watchers(self) -> int:
        return len(self._subs)

    def publish(self, kind: str, data: Any) -> None:
        self.published += 1
        msg = frame(kind, data)
        for q in list(self._subs):
            if q.full():                       # too slow: drop what it has, resend the whole state
                while not q.empty():
                    q.get_nowait()
                q.put_nowait(None)
            else:
                q.put_nowait(msg)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                           "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        q: asyncio.Queue = asyncio.Queue(maxsize=QUEUE)
        self._subs.add(q)
        try:
            await resp.write(frame("snapshot", self.snapshot()))
            while True:
                try:
                    msg = await get_within(q, KEEPALIVE_S)
                except TimeoutError:
                    await resp.write(b": keep-alive\n\n")
                    continue
                await resp.write(frame("snapshot", self.snapshot()) if msg is None else msg)
        except ConnectionResetError:            # the page went away
            pass
        finally:
            self._subs.discard(q)
        return resp
