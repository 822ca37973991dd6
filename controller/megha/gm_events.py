"""What a GM does with its LMs' task events: a start completes the allocation record, an end or
eviction retires or requeues the task, and waiters are woken. Also the watch for launches an
LM lost in a restart (issue 12), which no event ever reports."""
from __future__ import annotations

import collections
import logging
from collections import Counter

from cellbed.controller.megha.alloc import AllocClock, record
from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.gm_task import FINISHED, QUEUED, REJECTED, RUNNING, STARTING, GmTask
from cellbed.controller.megha.params import GmParams
from cellbed.domain import errors
from cellbed.metrics.rows import AllocationRow
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class TaskEvents:
    """Applies task events to the table; writes an allocation record (to *records* and every
    function in *listeners*) for each start."""

    def __init__(self, name: str, table: TaskTable, links: LmLinks, clock, params: GmParams, counters: Counter,
                 per_user: dict[str, Counter], my_users: list[str], frontend: str,
                 records: collections.deque[AllocationRow], listeners: list) -> None:
        self.name = name
        self._table = table
        self._links = links
        self._clock = clock
        self._params = params
        self._counters = counters
        self._per_user = per_user
        self._my_users = my_users
        self._frontend = frontend
        self._records = records
        self._listeners = listeners

    # --- task events from the LMs ------------------------------------------------------------------------
    def report(self, req: meghapb.ReportTaskEventsRequest) -> int:
        for ev in req.events:
            k = ev.kind
            gt = self._table.get(ev.name)
            if k == meghapb.TASK_EVENT_KIND_STARTED:
                if gt is None and ev.task.name == ev.name and ev.task.user in self._my_users:
                    gt = self._table.new_task(ev.task, ev.task.arrival_unix_s or ev.unix_s, ev.unix_s)  # placed before
                    gt.state, gt.placement, gt.recovered = STARTING, ev.placement, True               # a restart
                    self._counters["started_unknown_rebuilt"] += 1
                if gt is None:
                    self._counters["events_unknown"] += 1
                elif gt.state == QUEUED and gt.inflight:
                    gt.early = ev          # the LM's reply has not been processed yet
                elif gt.state == QUEUED:   # placed after all (an LM answered UNAVAILABLE, then its standby
                    self._table.dequeue(gt)                 # found the task running): not queued any more
                    self._table.unpersist(gt.name)
                    gt.placement = ev.placement
                    self.started(gt, ev)
                    self._counters["started_while_queued"] += 1
                elif gt.state == STARTING:
                    self.started(gt, ev)
                elif gt.state == RUNNING and gt.allocation is None and ev.placement.lm == gt.placement.lm:
                    self.started(gt, ev)   # found running by this GM after its restart: the start time
            elif k == meghapb.TASK_EVENT_KIND_FINISHED:
                if gt is not None and gt.state in (STARTING, RUNNING):
                    gt.state = FINISHED
                    gt.detail = ev.detail
                    self._table.retire(gt)
                self._counters["finished"] += 1
            elif k in (meghapb.TASK_EVENT_KIND_PREEMPTED, meghapb.TASK_EVENT_KIND_FAILED):
                self._requeue(gt, ev)
            elif k == meghapb.TASK_EVENT_KIND_REJECTED:
                if gt is not None:
                    gt.state, gt.detail = REJECTED, ev.detail
                    self._table.unpersist(gt.name)
                    gt.wake()
                    self._table.retire(gt)
                self._counters["rejected"] += 1
        self._table.signal()
        return len(req.events)

    def started(self, gt: GmTask, ev: meghapb.TaskEvent) -> None:
        """*gt* started (*ev*): RUNNING, with its allocation time (eq. 1 = eq. 2) recorded."""
        tm = ev.timing
        comm = (tm.comm_in_ms + tm.comm_node_ms) / 1000
        clk = gt.clk
        # a start stamped before the arrival (the LM's clock behind this GM's) started at the arrival
        start = max(tm.start_unix_s or ev.unix_s, clk.arrival)
        measured = clk.fq + clk.proc + clk.comm + clk.wq + (tm.queue_ms + tm.processing_ms + tm.worker_queue_ms) / 1000 + comm
        # Time no interval measured (a GM restart; event-loop delays on a real cell) was spent
        # waiting in the framework: it counts as framework queueing, so eq. 1 = eq. 2 exactly.
        unaccounted = (start - clk.arrival) - measured
        if unaccounted > 0:
            clk.fq += unaccounted
        self._counters["unaccounted_ms"] += int(max(0.0, unaccounted) * 1000)
        rec = record(gt.name, gt.user, self._frontend, clk, start, ev.placement.host or gt.placement.host,
                     lm_queue=tm.queue_ms / 1000, lm_proc=tm.processing_ms / 1000, comm=comm,
                     wq=tm.worker_queue_ms / 1000, boot=tm.boot_ms / 1000, lm=ev.placement.lm,
                     repartitioned=ev.placement.repartitioned, preempted_others=len(ev.placement.preempted),
                     requeues=gt.requeues)
        gt.state = RUNNING
        gt.placement = ev.placement
        gt.allocation = meghapb.AllocationTime(
            framework_queue_ms=rec.framework_queue_ms, processing_ms=rec.processing_ms,
            worker_queue_ms=rec.worker_queue_ms, communication_ms=rec.communication_ms, total_ms=rec.total_ms,
            boot_ms=rec.boot_ms, attempts=rec.attempts, arrival_unix_s=clk.arrival, start_unix_s=start)
        self._records.append(rec)
        for fn in self._listeners:
            fn(rec)
        gt.wake()

    def _requeue(self, gt: GmTask | None, ev: meghapb.TaskEvent) -> None:
        preempted = ev.kind == meghapb.TASK_EVENT_KIND_PREEMPTED
        if gt is None:
            if not ev.task.name or ev.task.user not in self._my_users:
                self._counters["events_unknown"] += 1
                return
            gt = self._table.new_task(ev.task, self._clock.now(), self._clock.now())
        elif gt.state == QUEUED:
            return                                  # a resent event: already requeued
        now = self._clock.now()
        gt.task.arrival_unix_s = now                # a new allocation starts now
        gt.clk = AllocClock(arrival=now, queued_at=now)
        gt.state, gt.placement, gt.allocation = QUEUED, None, None
        gt.detail = ev.detail
        if preempted:
            gt.preemptions += 1
            self._per_user.setdefault(gt.user, Counter())["preempted"] += 1
            self._counters["preempted"] += 1
        else:
            self._counters["launch_failures"] += 1
        self._table.readmit(gt)

    # --- launches an LM lost (issue 12) ---------------------------------------------------------------
    async def lost_launch_watch(self) -> None:
        """An LM killed between accepting a task and its StartVm (or while the node was booting it,
        which undoes the start when its caller goes away) comes back without it, and no event ever
        comes. Every period, STARTING tasks are looked up at their LM; one it does not hold at two
        looks in a row is requeued, as a failed launch. An LM that does not answer is left alone."""
        misses: dict[str, int] = {}
        while True:
            await self._clock.sleep(self._params.lost_launch_check_s)
            try:
                await self.look_up_starting(misses)
            except Exception:          # noqa: BLE001 - the watch must outlive any one look
                log.exception("GM %s: looking up STARTING tasks failed", self.name)

    async def look_up_starting(self, misses: dict[str, int]) -> None:
        """One look (*misses*: how many looks in a row each task was not found)."""
        by_lm: dict[str, list[GmTask]] = {}
        for gt in self._table.tasks.values():
            if gt.state == STARTING and gt.placement is not None and gt.placement.lm and not gt.inflight:
                by_lm.setdefault(gt.placement.lm, []).append(gt)
        for name in [n for n in misses if n not in {g.name for gs in by_lm.values() for g in gs}]:
            del misses[name]
        for lm, gts in by_lm.items():
            try:
                r = await self._links.ask(lm, "LocalMaster/FindTasks", meghapb.FindTasksRequest(names=[g.name for g in gts]))
            except errors.CellbedError:
                continue
            held = {x.task.name: x for x in r.found}
            for gt in gts:
                x = held.get(gt.name)
                if x is not None and x.state == meghapb.TASK_STATE_RUNNING and gt.state == STARTING:
                    gt.state, gt.detail = RUNNING, "running; its restarted LM adopted it"   # no STARTED event came
                    self._counters["launches_adopted_by_lm"] += 1
                    gt.wake()
                misses[gt.name] = 0 if gt.name in held else misses.get(gt.name, 0) + 1
                if misses[gt.name] >= 2 and gt.state == STARTING:
                    del misses[gt.name]
                    self._counters["launches_lost_by_lm"] += 1
                    log.warning("GM %s: LM %s no longer holds STARTING task %s: requeued", self.name, lm, gt.name)
                    self._requeue(gt, meghapb.TaskEvent(name=gt.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                        task=gt.task, detail=f"LM {lm} no longer holds it "
                                                        "(restarted during its launch): placed again"))
        self._table.signal()
