"""The LM's launch path: a validated task started on its node in the background, its end after its duration, stops, and the task events to its GM (batched, resent until acknowledged)."""
from __future__ import annotations

from cellbed.controller.megha.lm_wire import ACTIVE

import asyncio
import logging
from cellbed.domain import errors
from cellbed.policy.megha.validation import LmTask
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.controller.megha.lm_wire import vm_spec

log = logging.getLogger(__name__)


class LaunchMixin:
    """Part of LocalMaster (which owns the state these methods use)."""

    # --- the node side ---------------------------------------------------------------------------
    async def _start_task(self, t: LmTask, resp: meghapb.PlacementResponse, victims: list[LmTask],
                          acquired: float) -> None:
        """Stop the victims (preemption), then StartVm; report the outcome to the task's GM.
        *resp* is the reply whose timing _serial fills in before this coroutine first runs;
        *acquired* is when validation began (the LM's processing runs from there to StartVm)."""
        host = self.cluster.hosts[t.host]
        for v in victims:
            try:
                await self.transport.request(host, "NodeAgent/StopVm", npb.StopVmRequest(name=v.name),
                                             timeout=self.params.stop_timeout_s)
            except errors.NotFound:
                pass
            except errors.CellbedError as e:
                # the victim still runs: give its resources back to it and requeue this task instead
                log.warning("LM %s: stopping preempted %s on %s failed: %s; preemption for %s abandoned",
                            self.lm, v.name, host, e, t.name)
                self.counters["preemptions_abandoned"] += 1
                if self.cluster.tasks.get(t.name) is t:
                    self.cluster.release(t.name)
                    self._removed.add(t.name)
                for w in victims[victims.index(v):]:
                    if w.name not in self.cluster.tasks:
                        self.cluster.allocate(w)
                        self._dirty.add(w.name)
                        self._removed.discard(w.name)
                        self._schedule_finish(w)
                self._event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=meghapb.TASK_EVENT_KIND_FAILED, task=t.payload,
                                                       detail=f"preemption on {host} failed: {e}"))
                return
            self._event(v.submit_gm, meghapb.TaskEvent(name=v.name, kind=meghapb.TASK_EVENT_KIND_PREEMPTED,
                                                   placement=self._placement(v), task=v.payload,
                                                   detail=f"preempted on {host} for {t.name} ({t.user})"))
        ready = self.clock.now()
        slots = None
        if self.params.max_starting_per_host:
            slots = self._boot_slots.setdefault(t.host, asyncio.Semaphore(self.params.max_starting_per_host))
            await slots.acquire()
        t.start_sent = True
        self._dirty.add(t.name)
        if self.peer and self._standby_ok:      # the standby must know a StartVm may be in flight
            await self._replicate_once(timeout=self.params.replicate_timeout_s)
        sent = self.clock.now()
        try:
            rep = await self.transport.request(host, "NodeAgent/StartVm", npb.StartVmRequest(spec=vm_spec(t.payload)),
                                               timeout=self.params.start_timeout_s)
            vm = rep.vm
            start = vm.created_unix_s if vm.created_unix_s >= sent else sent
            boot = vm.boot_to_workload_s
        except errors.AlreadyExists:
            start, boot = self.clock.now(), 0.0       # e.g. resent after a takeover: it runs already
        except errors.CellbedError as e:
            self.counters["node_failures" if not isinstance(e, errors.InvalidArgument) else "node_rejections"] += 1
            log.warning("LM %s: StartVm %s on %s failed: %s", self.lm, t.name, host, e)
            if self.cluster.tasks.get(t.name) is t:
                self.cluster.release(t.name)
                self._removed.add(t.name)
                self._dirty.discard(t.name)
            kind = meghapb.TASK_EVENT_KIND_REJECTED if isinstance(e, errors.InvalidArgument) else meghapb.TASK_EVENT_KIND_FAILED
            self._event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=kind, task=t.payload,
                                                   detail=f"StartVm on {host}: {e}"))
            return
        finally:
            if slots is not None:
                slots.release()
        t.state, t.start_unix_s = "running", start
        self._dirty.add(t.name)
        lt = resp.timing
        # LM processing runs up to StartVm: validation, plus stopping the victims of a preemption
        timing = meghapb.LmTiming(comm_in_ms=lt.comm_in_ms, queue_ms=lt.queue_ms,
                              processing_ms=max(lt.processing_ms / 1000, ready - acquired) * 1000,
                              comm_node_ms=max(0.0, start - sent) * 1000, worker_queue_ms=(sent - ready) * 1000,
                              boot_ms=boot * 1000, start_unix_s=start)
        self._event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=meghapb.TASK_EVENT_KIND_STARTED, task=t.payload,
                                               placement=resp.placement, timing=timing, unix_s=start))
        if self.cluster.tasks.get(t.name) is not t or t.name in self._stop_requested:
            self._stop_requested.discard(t.name)
            await self._finish(t.name, "stopped while starting")
            return
        self._schedule_finish(t)

    def _schedule_finish(self, t: LmTask) -> None:
        """Stop the task when its duration (from its start) has passed."""
        if t.payload is None or t.payload.duration_s <= 0 or t.name in self._timers:
            return
        left = t.payload.duration_s
        if t.start_unix_s:
            left = max(0.0, t.start_unix_s + t.payload.duration_s - self.clock.now())
        self._timers[t.name] = self.clock.call_later(left, lambda n=t.name: self._spawn(self._finish(n), f"finish-{n}"))

    async def _finish(self, name: str, why: str = "ran for its duration") -> str:
        self._timers.pop(name, None)
        t = self.cluster.tasks.get(name) if self.cluster else None
        if t is None:
            return ""
        host = self.cluster.hosts[t.host]
        try:
            await self.transport.request(host, "NodeAgent/StopVm", npb.StopVmRequest(name=name),
                                         timeout=self.params.stop_timeout_s)
        except errors.NotFound:
            pass
        except errors.CellbedError as e:
            log.warning("LM %s: StopVm %s on %s failed: %s (its resources stay reserved)", self.lm, name, host, e)
            raise
        if self.cluster.tasks.get(name) is t:
            self.cluster.release(name)
            self._removed.add(name)
            self._dirty.discard(name)
            self.counters["finished"] += 1
            self._event(t.submit_gm, meghapb.TaskEvent(name=name, kind=meghapb.TASK_EVENT_KIND_FINISHED,
                                                   placement=self._placement(t), detail=why,
                                                   unix_s=self.clock.now()))
        return host

    async def stop_task(self, name: str) -> str:
        self.require_active()
        t = self.cluster.tasks.get(name)
        if t is None:
            raise errors.NotFound(f"task {name!r} is not on LM {self.lm}")
        if t.state != "running":
            self._stop_requested.add(name)
            return self.cluster.hosts[t.host]
        tm = self._timers.pop(name, None)
        if tm is not None:
            tm.cancel()
        return await self._finish(name, "stopped on request")

    # --- events to GMs ------------------------------------------------------------------------------
    def _event(self, gm: str, ev: meghapb.TaskEvent) -> None:
        if not gm:
            return
        if not ev.unix_s:
            ev.unix_s = self.clock.now()
        self.outbox.setdefault(gm, []).append(ev)
        self._flush.set()

    async def _flusher(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            if self.params.event_flush_s:
                await self.clock.sleep(self.params.event_flush_s)
            if self.role != ACTIVE:
                continue
            results = await asyncio.gather(*(self._send_events(gm) for gm in list(self.outbox)))
            if not all(results):
                await self.clock.sleep(self.params.event_retry_s)
                self._flush.set()

    async def _send_events(self, gm: str) -> bool:
        evs = self.outbox.get(gm)
        if not evs:
            return True
        batch = list(evs)
        try:
            await self.transport.request(gm, "GlobalMaster/ReportTaskEvents", meghapb.ReportTaskEventsRequest(
                lm=self.lm, instance=self.instance, events=batch), timeout=10.0)
        except errors.CellbedError as e:
            self.counters["event_send_failures"] += 1
            log.debug("LM %s: events to %s not delivered (%d pending): %s", self.lm, gm, len(evs), e)
            return False
        del evs[:len(batch)]
        self.counters["events_sent"] += len(batch)
        return True
