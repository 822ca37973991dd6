"""Coroutines an agent started on the side (a task's start, its end, a watch) and must cancel
when it stops."""
from __future__ import annotations

import asyncio


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, coro, name: str) -> asyncio.Task:
        t = asyncio.create_task(coro, name=name)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    def pending(self) -> list[asyncio.Task]:
        return list(self._tasks)

    def clear(self) -> None:
        self._tasks.clear()
