"""The LM's launch path: a validated task started on its node in the background (after the victims
of a preemption are stopped), its end after its duration, stops on request, and the task
events each of these owes the task's GM."""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha.background import Background
from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_outbox import EventOutbox
from cellbed.controller.megha.lm_replicate import Replicator
from cellbed.controller.megha.lm_wire import vm_spec
from cellbed.controller.megha.params import LmParams
from cellbed.domain import errors
from cellbed.policy.megha.validation import LmTask
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb

log = logging.getLogger(__name__)


class Launcher:
    def __init__(self, core: LmCore, outbox: EventOutbox, repl: Replicator, bg: Background, transport, clock,
                 params: LmParams, counters: Counter) -> None:
        self._core = core
        self._outbox = outbox
        self._repl = repl
        self._bg = bg
        self._transport = transport
        self._clock = clock
        self._params = params
        self._counters = counters
        self._boot_slots: dict[int, asyncio.Semaphore] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._stop_requested: set[str] = set()

    # --- the node side ---------------------------------------------------------------------------
    async def start_task(self, t: LmTask, resp: meghapb.PlacementResponse, victims: list[LmTask],
                         acquired: float) -> None:
        """Stop the victims (preemption), then StartVm; report the outcome to the task's GM.
        *resp* is the reply whose timing the validation fills in before this coroutine first runs;
        *acquired* is when validation began (the LM's processing runs from there to StartVm)."""
        core = self._core
        host = core.cluster.hosts[t.host]
        for v in victims:
            try:
                await self._transport.request(host, "NodeAgent/StopVm", npb.StopVmRequest(name=v.name),
                                              timeout=self._params.stop_timeout_s)
            except errors.NotFound:
                pass
            except errors.CellbedError as e:
                # the victim still runs: give its resources back to it and requeue this task instead
                log.warning("LM %s: stopping preempted %s on %s failed: %s; preemption for %s abandoned",
                            core.lm, v.name, host, e, t.name)
                self._counters["preemptions_abandoned"] += 1
                if core.cluster.tasks.get(t.name) is t:
                    core.cluster.release(t.name)
                    self._repl.removed(t.name)
                for w in victims[victims.index(v):]:
                    if w.name not in core.cluster.tasks:
                        core.cluster.allocate(w)
                        self._repl.restored(w.name)
                        self.schedule_finish(w)
                self._outbox.event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                                  task=t.payload,
                                                                  detail=f"preemption on {host} failed: {e}"))
                return
            self._outbox.event(v.submit_gm, meghapb.TaskEvent(name=v.name, kind=meghapb.TASK_EVENT_KIND_PREEMPTED,
                                                              placement=core.placement(v), task=v.payload,
                                                              detail=f"preempted on {host} for {t.name} ({t.user})"))
        ready = self._clock.now()
        slots = None
        if self._params.max_starting_per_host:
            slots = self._boot_slots.setdefault(t.host, asyncio.Semaphore(self._params.max_starting_per_host))
            await slots.acquire()
        t.start_sent = True
        self._repl.changed(t.name)
        await self._repl.before_start()         # the standby must know a StartVm may be in flight
        sent = self._clock.now()
        try:
            rep = await self._transport.request(host, "NodeAgent/StartVm", npb.StartVmRequest(spec=vm_spec(t.payload)),
                                                timeout=self._params.start_timeout_s)
            vm = rep.vm
            start = vm.created_unix_s if vm.created_unix_s >= sent else sent
            boot = vm.boot_to_workload_s
        except errors.AlreadyExists:
            start, boot = self._clock.now(), 0.0       # e.g. resent after a takeover: it runs already
        except errors.CellbedError as e:
            self._counters["node_failures" if not isinstance(e, errors.InvalidArgument) else "node_rejections"] += 1
            log.warning("LM %s: StartVm %s on %s failed: %s", core.lm, t.name, host, e)
            if core.cluster.tasks.get(t.name) is t:
                core.cluster.release(t.name)
                self._repl.released(t.name)
            kind = meghapb.TASK_EVENT_KIND_REJECTED if isinstance(e, errors.InvalidArgument) else meghapb.TASK_EVENT_KIND_FAILED
            self._outbox.event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=kind, task=t.payload,
                                                              detail=f"StartVm on {host}: {e}"))
            return
        finally:
            if slots is not None:
                slots.release()
        t.state, t.start_unix_s = "running", start
        self._repl.changed(t.name)
        lt = resp.timing
        # LM processing runs up to StartVm: validation, plus stopping the victims of a preemption
        timing = meghapb.LmTiming(comm_in_ms=lt.comm_in_ms, queue_ms=lt.queue_ms,
                                  processing_ms=max(lt.processing_ms / 1000, ready - acquired) * 1000,
                                  comm_node_ms=max(0.0, start - sent) * 1000, worker_queue_ms=(sent - ready) * 1000,
                                  boot_ms=boot * 1000, start_unix_s=start)
        self._outbox.event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=meghapb.TASK_EVENT_KIND_STARTED,
                                                          task=t.payload, placement=resp.placement, timing=timing,
                                                          unix_s=start))
        if core.cluster.tasks.get(t.name) is not t or t.name in self._stop_requested:
            self._stop_requested.discard(t.name)
            await self._finish(t.name, "stopped while starting")
            return
        self.schedule_finish(t)

    # --- the end of a task --------------------------------------------------------------------------
    def schedule_finish(self, t: LmTask) -> None:
        """Stop the task when its duration (from its start) has passed."""
        if t.payload is None or t.payload.duration_s <= 0 or t.name in self._timers:
            return
        left = t.payload.duration_s
        if t.start_unix_s:
            left = max(0.0, t.start_unix_s + t.payload.duration_s - self._clock.now())
        self._timers[t.name] = self._clock.call_later(
            left, lambda n=t.name: self._bg.spawn(self._finish(n), f"finish-{n}"))

    def cancel_finish(self, name: str) -> None:
        """Task *name* ends otherwise (it was preempted): no stop at the end of its duration."""
        tm = self._timers.pop(name, None)
        if tm is not None:
            tm.cancel()

    def cancel_all(self) -> None:
        """The LM stops: no task's end is scheduled any more."""
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()

    async def _finish(self, name: str, why: str = "ran for its duration") -> str:
        core = self._core
        self._timers.pop(name, None)
        t = core.cluster.tasks.get(name) if core.cluster else None
        if t is None:
            return ""
        host = core.cluster.hosts[t.host]
        try:
            await self._transport.request(host, "NodeAgent/StopVm", npb.StopVmRequest(name=name),
                                          timeout=self._params.stop_timeout_s)
        except errors.NotFound:
            pass
        except errors.CellbedError as e:
            log.warning("LM %s: StopVm %s on %s failed: %s (its resources stay reserved)", core.lm, name, host, e)
            raise
        if core.cluster.tasks.get(name) is t:
            core.cluster.release(name)
            self._repl.released(name)
            self._counters["finished"] += 1
            self._outbox.event(t.submit_gm, meghapb.TaskEvent(name=name, kind=meghapb.TASK_EVENT_KIND_FINISHED,
                                                              placement=core.placement(t), detail=why,
                                                              unix_s=self._clock.now()))
        return host

    async def stop_task(self, name: str) -> str:
        core = self._core
        core.require_active()
        t = core.cluster.tasks.get(name)
        if t is None:
            raise errors.NotFound(f"task {name!r} is not on LM {core.lm}")
        if t.state != "running":
            self._stop_requested.add(name)
            return core.cluster.hosts[t.host]
        self.cancel_finish(name)
        return await self._finish(name, "stopped on request")
