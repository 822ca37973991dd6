"""What a restarted GM learns from its LMs (seed 001 §IV-D): the accepted tasks its queue store
still holds are looked up (FindTasks) and only those no LM holds are queued again; a task it
placed before the restart is answered for from the LM that holds it."""
from __future__ import annotations

import logging
from collections import Counter

from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.gm_task import RUNNING, STARTING
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class Recovery:
    def __init__(self, name: str, links: LmLinks, table: TaskTable, clock, counters: Counter) -> None:
        self.name = name
        self._links = links
        self._table = table
        self._clock = clock
        self._counters = counters

    async def recover(self) -> None:
        """Reload accepted tasks from the store; those an LM already holds are not queued again."""
        items = self._table.load()
        if not items:
            return
        tasks = [meghapb.MeghaTask.FromString(b) for _, b in items]
        held: dict[str, tuple[str, meghapb.LmTaskRecord]] = {}
        names = [t.name for t in tasks]
        for lm in self._links.order:
            try:
                r = await self._find(lm, names)
            except errors.CellbedError as e:
                log.warning("GM %s: recovery: FindTasks on %s failed: %s", self.name, lm, e)
                continue
            for rec in r.found:
                held[rec.task.name] = (lm, rec)
        now = self._clock.now()
        for t in tasks:
            gt = self._table.new_task(t, t.arrival_unix_s or now, now)
            gt.recovered = True
            found = held.get(t.name)
            if found is not None:
                lm, rec = found
                gt.state = RUNNING if rec.state == meghapb.TASK_STATE_RUNNING else STARTING
                gt.placement = meghapb.Placement(lm=lm, host=rec.host, partition=rec.partition,
                                                 repartitioned=rec.logical)
                self._table.unpersist(t.name)
                self._counters["recovered_placed"] += 1
            else:
                self._table.enqueue(gt)
                self._counters["recovered_queued"] += 1
        self._table.signal()

    async def _find(self, lm: str, names: list[str]) -> meghapb.FindTasksResponse:
        """FindTasks on *lm*, on each of its instances in turn until one answers (the active one may
        have died and its standby taken over); the last error if none does."""
        last: errors.CellbedError = errors.Unavailable(f"LM {lm} has no instance to ask")
        for _ in range(self._links.tries(lm)):
            try:
                return await self._links.ask(lm, "LocalMaster/FindTasks", meghapb.FindTasksRequest(names=names))
            except errors.CellbedError as e:
                last = e
                self._links.failover(lm)
        raise last

    async def remote_status(self, name: str) -> meghapb.TaskStatus:
        """A task this GM does not know (it placed it before a restart): ask the LMs. NOT_FOUND only
        when every LM answered; an LM that did not (during its takeover) makes it UNAVAILABLE."""
        silent = []
        for lm in self._links.order:
            try:
                r = await self._find(lm, [name])
            except errors.CellbedError as e:
                silent.append(f"{lm} ({e})")
                continue
            for rec in r.found:
                return meghapb.TaskStatus(name=name, user=rec.task.user, state=rec.state, gm=self.name,
                                          placement=meghapb.Placement(lm=lm, host=rec.host, partition=rec.partition,
                                                                      repartitioned=rec.logical),
                                          detail="placed before this GM restarted; allocation time unknown here")
        if silent:
            raise errors.Unavailable(f"task {name!r} is unknown to GM {self.name} and to the LMs that answered; "
                                     f"not answering: {', '.join(silent)}: ask again")
        raise errors.NotFound(f"task {name!r} is unknown to GM {self.name} and to every LM")
