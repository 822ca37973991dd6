"""The standby side of an LM's active-standby pair (seed 001 §IV-D): it mirrors the active's task
table and undelivered events (Replicate, also the heartbeat), and takes over when the
heartbeat stops: it bumps the epoch, reconciles the table with what the nodes run (ListVms),
requeues through the GMs what never started, and starts serving."""
from __future__ import annotations

import logging
from collections import Counter

from cellbed.controller.megha.background import Background
from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_launch import Launcher
from cellbed.controller.megha.lm_nodes import Nodes
from cellbed.controller.megha.lm_outbox import EventOutbox
from cellbed.controller.megha.lm_publish import Publisher
from cellbed.controller.megha.lm_replicate import Replicator
from cellbed.controller.megha.lm_wire import ACTIVE, STANDBY, task_request
from cellbed.controller.megha.params import LmParams
from cellbed.domain import errors
from cellbed.policy.megha.validation import LmTask
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb

log = logging.getLogger(__name__)


class Standby:
    def __init__(self, core: LmCore, nodes: Nodes, launcher: Launcher, outbox: EventOutbox, repl: Replicator,
                 publisher: Publisher, bg: Background, transport, peer: str, clock, params: LmParams,
                 counters: Counter) -> None:
        self._core = core
        self._nodes = nodes
        self._launcher = launcher
        self._outbox = outbox
        self._repl = repl
        self._publisher = publisher
        self._bg = bg
        self._transport = transport
        self._peer = peer
        self._clock = clock
        self._params = params
        self._counters = counters
        self.replica: dict[str, meghapb.LmTaskRecord] = {}          # the active's table
        self.replica_outbox: list[tuple[str, meghapb.TaskEvent]] = []
        self.takeovers = 0

    async def yield_to_peer(self) -> None:
        """An active that comes back must not fight the standby that replaced it: if the peer is
        active, start as its standby."""
        core = self._core
        try:
            r = await self._transport.request(self._peer, "LocalMaster/GetRole", meghapb.GetRoleRequest(), timeout=5.0)
            if r.role == ACTIVE:
                log.warning("%s: peer %s is active (epoch %d): starting as standby", core.instance, self._peer,
                            r.epoch)
                core.role, core.epoch = STANDBY, r.epoch
        except errors.CellbedError:
            pass

    def replicate(self, req: meghapb.ReplicateRequest) -> meghapb.ReplicateResponse:
        core = self._core
        if core.role == ACTIVE:
            if req.epoch > core.epoch:   # the other side took over while we were away
                log.warning("LM %s: %s is active with epoch %d > %d: stepping down", core.lm, req.instance,
                            req.epoch, core.epoch)
                core.role = STANDBY
            else:
                return meghapb.ReplicateResponse(instance=core.instance, role=core.role, epoch=core.epoch)
        core.epoch = max(core.epoch, req.epoch)
        core.last_heartbeat = self._clock.monotonic()
        if req.full:
            self.replica = {}
        for r in req.upserts:
            self.replica[r.task.name] = r
        for n in req.removed:
            self.replica.pop(n, None)
        self.replica_outbox = list(zip(req.outbox_gm, req.outbox))
        self._counters["replicated"] += 1
        return meghapb.ReplicateResponse(instance=core.instance, role=core.role, epoch=core.epoch)

    async def watchdog(self) -> None:
        period = self._params.takeover_after_s / 4
        while True:
            await self._clock.sleep(period)
            core = self._core
            if core.role == STANDBY and self._clock.monotonic() - core.last_heartbeat > self._params.takeover_after_s:
                try:
                    await self.takeover()
                except errors.CellbedError as e:
                    log.error("LM %s: takeover by %s failed: %s", core.lm, core.instance, e)

    async def takeover(self) -> None:
        """Become active: rebuild the true state from the replica and what the nodes run (ListVms).

        A replicated task the nodes do not run is lost (its GM requeues it) only if the dead
        active never sent its StartVm; if it did, or the VM is still booting, the task is
        watched until the node has decided (orphan_wait_s), so it can never run twice."""
        core = self._core
        silent = self._clock.monotonic() - core.last_heartbeat
        watch: list[LmTask] = []
        async with core.lock:
            core.epoch += 1
            core.renew_cluster()
            vms = await self._nodes.list_vms()
            on_node = {h: {v.spec.name: v for v in lst} for h, lst in vms.items() if lst is not None}
            lost, unreported = [], []
            for r in self.replica.values():
                h = core.cluster.index.get(r.host)
                if h is None:
                    continue
                vm = on_node.get(h, {}).get(r.task.name)
                if h in on_node and vm is None and not r.start_sent:
                    lost.append(r)
                    continue
                cpu, mem = task_request(r.task)
                t = LmTask(r.task.name, r.task.user, cpu, mem, h, core.cluster.gm_index.get(r.partition, 0),
                           r.logical, r.submit_gm, "starting", r.start_unix_s, r.task, start_sent=r.start_sent)
                booted = vm is not None and vm.state == npb.VM_STATE_RUNNING and vm.state_reason != "starting"
                if booted or (h not in on_node and r.state == meghapb.TASK_STATE_RUNNING):
                    t.state = "running"
                    t.start_unix_s = r.start_unix_s or (vm.created_unix_s if vm is not None else self._clock.now())
                    if r.state == meghapb.TASK_STATE_STARTING:      # the active died before reporting the start
                        unreported.append((t, vm))
                else:
                    watch.append(t)
                core.cluster.allocate(t)
                if t.state == "running":
                    self._launcher.schedule_finish(t)
            for h, by_name in on_node.items():
                for name, vm in by_name.items():
                    if name not in core.cluster.tasks:
                        self._nodes.adopt(h, vm)
            self._outbox.restore(self.replica_outbox)
            for r in lost:
                self._outbox.event(r.submit_gm, meghapb.TaskEvent(name=r.task.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                                  task=r.task, detail=f"never started on {r.host} (takeover)"))
            for t, vm in unreported:
                self._report_start(t, vm, "start reported by the standby after the takeover")
            core.role = ACTIVE
            self.takeovers += 1
            self._counters["takeovers"] += 1
            self._repl.resync()
        for t in watch:
            self._bg.spawn(self._watch_orphan(t), f"watch-{t.name}")
        log.warning("LM %s: %s took over after %.1f s of silence: epoch %d, %d tasks (%d still starting), "
                    "%d never started (requeued), %d adopted", core.lm, core.instance, silent, core.epoch,
                    len(core.cluster.tasks), len(watch), len(lost), self._counters["adopted"])
        self._publisher.announce()

    def _report_start(self, t: LmTask, vm, detail: str) -> None:
        boot = vm.boot_to_workload_s * 1000 if vm is not None else 0.0
        self._outbox.event(t.submit_gm, meghapb.TaskEvent(
            name=t.name, kind=meghapb.TASK_EVENT_KIND_STARTED, placement=self._core.placement(t), task=t.payload,
            timing=meghapb.LmTiming(start_unix_s=t.start_unix_s, boot_ms=boot), unix_s=t.start_unix_s, detail=detail))

    async def _watch_orphan(self, t: LmTask) -> None:
        """A task the dead active was starting: wait until its node has it running (report the start)
        or, past orphan_wait_s, still does not have it (release it; its GM requeues it)."""
        core = self._core
        host = core.cluster.hosts[t.host]
        deadline = self._clock.monotonic() + self._params.orphan_wait_s
        while core.cluster.tasks.get(t.name) is t:
            vms = await self._nodes.vms_on(host)
            if vms is not None:
                vm = next((v for v in vms if v.spec.name == t.name), None)
                if vm is not None and vm.state == npb.VM_STATE_RUNNING and vm.state_reason != "starting":
                    t.state, t.start_unix_s = "running", vm.created_unix_s or self._clock.now()
                    self._repl.changed(t.name)
                    self._report_start(t, vm, "started by the previous active; reported after the takeover")
                    self._launcher.schedule_finish(t)
                    return
                if vm is None and self._clock.monotonic() > deadline:
                    core.cluster.release(t.name)
                    self._repl.removed(t.name)
                    self._counters["orphans_lost"] += 1
                    self._outbox.event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                                      task=t.payload,
                                                                      detail=f"not started on {host} by the previous active"))
                    return
            await self._clock.sleep(2.0)
