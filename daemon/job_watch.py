"""Polling a running migration job (the libvirt backend's loop, without libvirt): progress to the
caller, and the completion-timeout policy's decisions (cellbed/policy/migration/timeout.py)
applied through the backend's callables."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

from cellbed.domain.vm import JobProgress, MigrationOptions, ProgressCallback
from cellbed.policy.migration.timeout import JobWatch


async def watch_job(job: asyncio.Future, opts: MigrationOptions, w: JobWatch, t0: float,
                    on_progress: ProgressCallback | None, *, period_s: float,
                    stats: Callable[[], Awaitable[dict | None]], set_downtime: Callable[[], Awaitable[bool]],
                    apply: Callable[[object], Awaitable[None]]) -> None:
    """Until *job* ends: poll *stats()* (None: no job right now), set the downtime limit once
    the job exists, report progress, and *apply* the timeout policy's decision."""
    while True:
        # Poll faster while a post-copy switch is pending: a short pre-copy pass is easy to miss.
        period = 0.1 if (opts.postcopy and not w.switched) else period_s
        done, _ = await asyncio.wait({job}, timeout=period)
        if done:
            return
        st = await stats()
        if st is None:
            continue
        if opts.max_downtime_ms and not w.downtime_set:
            w.downtime_set = await set_downtime()
        prog = JobProgress.from_job_stats(st, w.switched)
        if on_progress is not None:
            res = on_progress(prog)
            if asyncio.iscoroutine(res):
                await res
        await apply(w.decide(opts, prog, time.monotonic() - t0))
