"""What a GM does with its LMs' task events: a start completes the allocation record, an end or eviction retires or requeues the task, and waiters are woken."""
from __future__ import annotations

import logging
from collections import Counter
from cellbed.domain import errors
from cellbed.controller.megha.alloc import AllocClock, record
from cellbed.v1 import megha_pb2 as meghapb
from cellbed.controller.megha.gm_task import FINISHED, QUEUED, REJECTED, RUNNING, STARTING, GmTask

log = logging.getLogger(__name__)


class EventsMixin:
    """Part of GlobalMaster (which owns the state these methods use)."""

    # --- task events from the LMs ------------------------------------------------------------------------
    def report_events(self, req: meghapb.ReportTaskEventsRequest) -> int:
        if not self.ready.is_set():
            raise errors.Unavailable(f"GM {self.name} is recovering its queues; resend the events")
        for ev in req.events:
            k = ev.kind
            gt = self.tasks.get(ev.name)
            if k == meghapb.TASK_EVENT_KIND_STARTED:
                if gt is None and ev.task.name == ev.name and ev.task.user in self.my_users:
                    gt = self._new_task(ev.task, ev.task.arrival_unix_s or ev.unix_s, ev.unix_s)  # placed before
                    gt.state, gt.placement, gt.recovered = STARTING, ev.placement, True         # a restart
                    self.counters["started_unknown_rebuilt"] += 1
                if gt is None:
                    self.counters["events_unknown"] += 1
                elif gt.state == QUEUED and gt.inflight:
                    gt.early = ev          # the LM's reply has not been processed yet
                elif gt.state == QUEUED:   # placed after all (an LM answered UNAVAILABLE, then its standby
                    self.queues.remove(gt.user, gt.name)     # found the task running): not queued any more
                    self.store.remove(self.name, gt.name)
                    gt.placement = ev.placement
                    self._started(gt, ev)
                    self.counters["started_while_queued"] += 1
                elif gt.state == STARTING:
                    self._started(gt, ev)
            elif k == meghapb.TASK_EVENT_KIND_FINISHED:
                if gt is not None and gt.state in (STARTING, RUNNING):
                    gt.state = FINISHED
                    gt.detail = ev.detail
                    self._retire(gt)
                self.counters["finished"] += 1
            elif k in (meghapb.TASK_EVENT_KIND_PREEMPTED, meghapb.TASK_EVENT_KIND_FAILED):
                self._requeue(gt, ev)
            elif k == meghapb.TASK_EVENT_KIND_REJECTED:
                if gt is not None:
                    gt.state, gt.detail = REJECTED, ev.detail
                    self.store.remove(self.name, gt.name)
                    self._wake(gt)
                    self._retire(gt)
                self.counters["rejected"] += 1
        self._work.set()
        return len(req.events)

    # --- launches an LM lost (issue 12) ---------------------------------------------------------------
    async def _lost_launch_watch(self) -> None:
        """An LM killed between accepting a task and its StartVm (or while the node was booting it,
        which undoes the start when its caller goes away) comes back without it, and no event ever
        comes. Every period, STARTING tasks are looked up at their LM; one it does not hold at two
        looks in a row is requeued, as a failed launch. An LM that does not answer is left alone."""
        misses: dict[str, int] = {}
        while True:
            await self.clock.sleep(self.params.lost_launch_check_s)
            try:
                await self._look_up_starting(misses)
            except Exception:          # noqa: BLE001 - the watch must outlive any one look
                log.exception("GM %s: looking up STARTING tasks failed", self.name)

    async def _look_up_starting(self, misses: dict[str, int]) -> None:
        by_lm: dict[str, list[GmTask]] = {}
        for gt in self.tasks.values():
            if gt.state == STARTING and gt.placement is not None and gt.placement.lm and not gt.inflight:
                by_lm.setdefault(gt.placement.lm, []).append(gt)
        for name in [n for n in misses if n not in {g.name for gs in by_lm.values() for g in gs}]:
            del misses[name]
        for lm, gts in by_lm.items():
            try:
                r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                 meghapb.FindTasksRequest(names=[g.name for g in gts]),
                                                 timeout=self.params.request_timeout_s)
            except errors.CellbedError:
                continue
            held = {x.task.name: x for x in r.found}
            for gt in gts:
                x = held.get(gt.name)
                if x is not None and x.state == meghapb.TASK_STATE_RUNNING and gt.state == STARTING:
                    gt.state, gt.detail = RUNNING, "running; its restarted LM adopted it"   # no STARTED event came
                    self.counters["launches_adopted_by_lm"] += 1
                    self._wake(gt)
                misses[gt.name] = 0 if gt.name in held else misses.get(gt.name, 0) + 1
                if misses[gt.name] >= 2 and gt.state == STARTING:
                    del misses[gt.name]
                    self.counters["launches_lost_by_lm"] += 1
                    log.warning("GM %s: LM %s no longer holds STARTING task %s: requeued", self.name, lm, gt.name)
                    self._requeue(gt, meghapb.TaskEvent(name=gt.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                        task=gt.task, detail=f"LM {lm} no longer holds it "
                                                        "(restarted during its launch): placed again"))
        self._work.set()

    def _retire(self, gt: GmTask) -> None:
        self.tasks.pop(gt.name, None)
        self.done[gt.name] = gt
        while len(self.done) > 10_000:
            self.done.popitem(last=False)

    def _wake(self, gt: GmTask) -> None:
        for f in gt.waiters:
            if not f.done():
                f.set_result(None)

    def _started(self, gt: GmTask, ev: meghapb.TaskEvent) -> None:
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
        self.counters["unaccounted_ms"] += int(max(0.0, unaccounted) * 1000)
        rec = record(gt.name, gt.user, self.frontend, clk, start, ev.placement.host or gt.placement.host,
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
        self.records.append(rec)
        for fn in self.record_listeners:
            fn(rec)
        self._wake(gt)

    def _requeue(self, gt: GmTask | None, ev: meghapb.TaskEvent) -> None:
        preempted = ev.kind == meghapb.TASK_EVENT_KIND_PREEMPTED
        if gt is None:
            if not ev.task.name or ev.task.user not in self.my_users:
                self.counters["events_unknown"] += 1
                return
            gt = self._new_task(ev.task, self.clock.now(), self.clock.now())
        elif gt.state == QUEUED:
            return                                  # a resent event: already requeued
        now = self.clock.now()
        gt.task.arrival_unix_s = now                # a new allocation starts now
        gt.clk = AllocClock(arrival=now, queued_at=now)
        gt.state, gt.placement, gt.allocation = QUEUED, None, None
        gt.detail = ev.detail
        if preempted:
            gt.preemptions += 1
            self.per_user.setdefault(gt.user, Counter())["preempted"] += 1
            self.counters["preempted"] += 1
        else:
            self.counters["launch_failures"] += 1
        self.tasks[gt.name] = gt
        self.done.pop(gt.name, None)
        self.store.put(self.name, gt.name, gt.task.SerializeToString())
        self.queues.push(gt.user, gt.name)
