"""The active LM's side of replication (seed 001 §IV-D): what changed in its task table since the
standby last heard, sent with the undelivered task events every replicate_period_s (also the
heartbeat), and before any task's StartVm, so the standby knows every start that may be in
flight. An active that learns its peer took over steps down."""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_outbox import EventOutbox
from cellbed.controller.megha.lm_wire import ACTIVE, STANDBY
from cellbed.controller.megha.params import LmParams
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class Replicator:
    """The change log (tasks changed, tasks removed) the other parts keep up to date, and its
    sending. With no *peer*, changes are logged and never sent."""

    def __init__(self, core: LmCore, outbox: EventOutbox, transport, peer: str, clock, params: LmParams,
                 counters: Counter) -> None:
        self._core = core
        self._outbox = outbox
        self._transport = transport
        self._peer = peer
        self._clock = clock
        self._params = params
        self._counters = counters
        self._lock = asyncio.Lock()
        self._ok = True                    # the standby answered the last time
        self._dirty: set[str] = set()
        self._removed: set[str] = set()
        self._need_full = True

    # --- the change log ------------------------------------------------------------------------------
    def changed(self, name: str) -> None:
        """Task *name* was added or changed."""
        self._dirty.add(name)

    def removed(self, name: str) -> None:
        """Task *name* left the table."""
        self._removed.add(name)

    def released(self, name: str) -> None:
        """Task *name* left the table: it has no change left to send."""
        self._removed.add(name)
        self._dirty.discard(name)

    def restored(self, name: str) -> None:
        """Task *name* is back in the table (a preemption abandoned)."""
        self._dirty.add(name)
        self._removed.discard(name)

    def resync(self) -> None:
        """The next replication sends the whole table (a takeover, a standby that did not answer)."""
        self._need_full = True

    # --- sending -------------------------------------------------------------------------------------
    async def loop(self) -> None:
        while True:
            await self._clock.sleep(self._params.replicate_period_s)
            if self._core.role == ACTIVE:
                await self.once(timeout=5.0)

    async def before_start(self) -> None:
        """Replicate now, if there is a standby that answers (a start the standby must know of)."""
        if self._peer and self._ok:
            await self.once(timeout=self._params.replicate_timeout_s)

    async def once(self, timeout: float) -> bool:
        """Send the standby what changed (all of it after a failure). Also the heartbeat."""
        core = self._core
        async with self._lock:
            full = self._need_full
            tasks = core.cluster.tasks
            names = list(tasks) if full else [n for n in self._dirty if n in tasks]
            removed = [] if full else list(self._removed)
            out, gms = self._outbox.snapshot()
            req = meghapb.ReplicateRequest(instance=core.instance, epoch=core.epoch, full=full,
                                           upserts=[core.record_of(tasks[n]) for n in names],
                                           removed=removed, outbox=out, outbox_gm=gms)
            self._dirty.clear()
            self._removed.clear()
            try:
                r = await self._transport.request(self._peer, "LocalMaster/Replicate", req, timeout=timeout)
            except errors.CellbedError as e:
                self._need_full = True
                if self._ok:
                    log.warning("LM %s: standby %s unreachable (%s): replicating in the background until it answers",
                                core.lm, self._peer, e)
                self._ok = False
                self._counters["replicate_failures"] += 1
                return False
            self._need_full = False
            self._ok = True
            if r.role == ACTIVE and r.epoch > core.epoch:
                log.warning("LM %s: %s took over (epoch %d > %d): stepping down to standby", core.lm,
                            r.instance, r.epoch, core.epoch)
                core.role, core.epoch = STANDBY, r.epoch
                core.last_heartbeat = self._clock.monotonic()
            return True
