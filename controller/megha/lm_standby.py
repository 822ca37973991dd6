"""The LM's active-standby pair: the active replicates its task table and undelivered events (also its heartbeat); the standby takes over when the heartbeat stops, reconciles with what the nodes run and requeues what vanished."""
from __future__ import annotations

from cellbed.controller.megha.lm_wire import ACTIVE, STANDBY

import logging
from cellbed.domain import errors
from cellbed.policy.megha.validation import ClusterState, LmTask
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.controller.megha.lm_wire import state_topic, task_request

log = logging.getLogger(__name__)


class StandbyMixin:
    """Part of LocalMaster (which owns the state these methods use)."""

    # --- active-standby -------------------------------------------------------------------------------
    def record_of(self, t: LmTask) -> meghapb.LmTaskRecord:
        return meghapb.LmTaskRecord(task=t.payload, host=self.cluster.hosts[t.host], partition=self.cluster.gms[t.partition],
                                logical=t.logical, submit_gm=t.submit_gm,
                                state=meghapb.TASK_STATE_RUNNING if t.state == "running" else meghapb.TASK_STATE_STARTING,
                                start_unix_s=t.start_unix_s, start_sent=t.start_sent)

    async def _replicator(self) -> None:
        while True:
            await self.clock.sleep(self.params.replicate_period_s)
            if self.role == ACTIVE:
                await self._replicate_once(timeout=5.0)

    async def _replicate_once(self, timeout: float) -> bool:
        """Send the standby what changed (all of it after a failure). Also the heartbeat."""
        async with self._repl_lock:
            full = self._need_full
            names = list(self.cluster.tasks) if full else [n for n in self._dirty if n in self.cluster.tasks]
            removed = [] if full else list(self._removed)
            out, gms = [], []
            for gm, evs in self.outbox.items():
                out += evs
                gms += [gm] * len(evs)
            req = meghapb.ReplicateRequest(instance=self.instance, epoch=self.epoch, full=full,
                                       upserts=[self.record_of(self.cluster.tasks[n]) for n in names],
                                       removed=removed, outbox=out, outbox_gm=gms)
            self._dirty.clear()
            self._removed.clear()
            try:
                r = await self.transport.request(self.peer, "LocalMaster/Replicate", req, timeout=timeout)
            except errors.CellbedError as e:
                self._need_full = True
                if self._standby_ok:
                    log.warning("LM %s: standby %s unreachable (%s): replicating in the background until it answers",
                                self.lm, self.peer, e)
                self._standby_ok = False
                self.counters["replicate_failures"] += 1
                return False
            self._need_full = False
            self._standby_ok = True
            if r.role == ACTIVE and r.epoch > self.epoch:
                log.warning("LM %s: %s took over (epoch %d > %d): stepping down to standby", self.lm,
                            r.instance, r.epoch, self.epoch)
                self.role, self.epoch = STANDBY, r.epoch
                self.last_heartbeat = self.clock.monotonic()
            return True

    def replicate(self, req: meghapb.ReplicateRequest) -> meghapb.ReplicateResponse:
        if self.role == ACTIVE:
            if req.epoch > self.epoch:   # the other side took over while we were away
                log.warning("LM %s: %s is active with epoch %d > %d: stepping down", self.lm, req.instance,
                            req.epoch, self.epoch)
                self.role = STANDBY
            else:
                return meghapb.ReplicateResponse(instance=self.instance, role=self.role, epoch=self.epoch)
        self.epoch = max(self.epoch, req.epoch)
        self.last_heartbeat = self.clock.monotonic()
        if req.full:
            self.replica = {}
        for r in req.upserts:
            self.replica[r.task.name] = r
        for n in req.removed:
            self.replica.pop(n, None)
        self.replica_outbox = list(zip(req.outbox_gm, req.outbox))
        self.counters["replicated"] += 1
        return meghapb.ReplicateResponse(instance=self.instance, role=self.role, epoch=self.epoch)

    async def _watchdog(self) -> None:
        period = self.params.takeover_after_s / 4
        while True:
            await self.clock.sleep(period)
            if self.role == STANDBY and self.clock.monotonic() - self.last_heartbeat > self.params.takeover_after_s:
                try:
                    await self.takeover()
                except errors.CellbedError as e:
                    log.error("LM %s: takeover by %s failed: %s", self.lm, self.instance, e)

    async def takeover(self) -> None:
        """Become active: rebuild the true state from the replica and what the nodes run (ListVms).

        A replicated task the nodes do not run is lost (its GM requeues it) only if the dead
        active never sent its StartVm; if it did, or the VM is still booting, the task is
        watched until the node has decided (orphan_wait_s), so it can never run twice."""
        silent = self.clock.monotonic() - self.last_heartbeat
        watch: list[LmTask] = []
        async with self._lock:
            self.epoch += 1
            old = self.cluster
            self.cluster = ClusterState(old.hosts, old.total_cpu, old.total_mem, old.attributes, old.gms,
                                        old.owner.tolist())
            self.cluster.version = self.epoch << 32
            vms = await self._list_vms()
            on_node = {h: {v.spec.name: v for v in lst} for h, lst in vms.items() if lst is not None}
            lost, unreported = [], []
            for r in self.replica.values():
                h = self.cluster.index.get(r.host)
                if h is None:
                    continue
                vm = on_node.get(h, {}).get(r.task.name)
                if h in on_node and vm is None and not r.start_sent:
                    lost.append(r)
                    continue
                cpu, mem = task_request(r.task)
                t = LmTask(r.task.name, r.task.user, cpu, mem, h, self.cluster.gm_index.get(r.partition, 0),
                           r.logical, r.submit_gm, "starting", r.start_unix_s, r.task, start_sent=r.start_sent)
                booted = vm is not None and vm.state == npb.VM_STATE_RUNNING and vm.state_reason != "starting"
                if booted or (h not in on_node and r.state == meghapb.TASK_STATE_RUNNING):
                    t.state = "running"
                    t.start_unix_s = r.start_unix_s or (vm.created_unix_s if vm is not None else self.clock.now())
                    if r.state == meghapb.TASK_STATE_STARTING:      # the active died before reporting the start
                        unreported.append((t, vm))
                else:
                    watch.append(t)
                self.cluster.allocate(t)
                if t.state == "running":
                    self._schedule_finish(t)
            for h, by_name in on_node.items():
                for name, vm in by_name.items():
                    if name not in self.cluster.tasks:
                        self._adopt(h, vm)
            for gm, ev in self.replica_outbox:
                self.outbox.setdefault(gm, []).append(ev)
            for r in lost:
                self._event(r.submit_gm, meghapb.TaskEvent(name=r.task.name, kind=meghapb.TASK_EVENT_KIND_FAILED,
                                                       task=r.task, detail=f"never started on {r.host} (takeover)"))
            for t, vm in unreported:
                self._report_start(t, vm, "start reported by the standby after the takeover")
            self.role = ACTIVE
            self.takeovers += 1
            self.counters["takeovers"] += 1
            self._need_full = True
        for t in watch:
            self._spawn(self._watch_orphan(t), f"watch-{t.name}")
        log.warning("LM %s: %s took over after %.1f s of silence: epoch %d, %d tasks (%d still starting), "
                    "%d never started (requeued), %d adopted", self.lm, self.instance, silent, self.epoch,
                    len(self.cluster.tasks), len(watch), len(lost), self.counters["adopted"])
        self.transport.publish(state_topic(self.cell, self.lm), self.full_state())

    def _report_start(self, t: LmTask, vm, detail: str) -> None:
        boot = vm.boot_to_workload_s * 1000 if vm is not None else 0.0
        self._event(t.submit_gm, meghapb.TaskEvent(
            name=t.name, kind=meghapb.TASK_EVENT_KIND_STARTED, placement=self._placement(t), task=t.payload,
            timing=meghapb.LmTiming(start_unix_s=t.start_unix_s, boot_ms=boot), unix_s=t.start_unix_s, detail=detail))

    async def _watch_orphan(self, t: LmTask) -> None:
        """A task the dead active was starting: wait until its node has it running (report the start)
        or, past orphan_wait_s, still does not have it (release it; its GM requeues it)."""
        host = self.cluster.hosts[t.host]
        deadline = self.clock.monotonic() + self.params.orphan_wait_s
        while self.cluster.tasks.get(t.name) is t:
            try:
                vms = (await self.transport.request(host, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=10.0)).vms
            except errors.CellbedError:
                vms = None
            if vms is not None:
                vm = next((v for v in vms if v.spec.name == t.name), None)
                if vm is not None and vm.state == npb.VM_STATE_RUNNING and vm.state_reason != "starting":
                    t.state, t.start_unix_s = "running", vm.created_unix_s or self.clock.now()
                    self._dirty.add(t.name)
                    self._report_start(t, vm, "started by the previous active; reported after the takeover")
                    self._schedule_finish(t)
                    return
                if vm is None and self.clock.monotonic() > deadline:
                    self.cluster.release(t.name)
                    self._removed.add(t.name)
                    self.counters["orphans_lost"] += 1
                    self._event(t.submit_gm, meghapb.TaskEvent(name=t.name, kind=meghapb.TASK_EVENT_KIND_FAILED, task=t.payload,
                                                           detail=f"not started on {host} by the previous active"))
                    return
            await self.clock.sleep(2.0)
