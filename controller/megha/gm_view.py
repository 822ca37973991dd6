"""How a GM keeps its eventually consistent view: bootstrap from every LM, failover to a standby, recovery of its queue after a restart, and the LMs' state updates (with fairness's users under their share)."""
from __future__ import annotations

import asyncio
import logging
from cellbed.domain import errors, wire
from cellbed.domain.wire_checks_megha import lm_state
from cellbed.policy.megha import fairness
from cellbed.v1 import megha_pb2 as meghapb
from cellbed.controller.megha.gm_task import RUNNING, STARTING

log = logging.getLogger(__name__)


class ViewMixin:
    """Part of GlobalMaster (which owns the state these methods use)."""

    def _target(self, lm: str) -> str:
        inst = self.lm_instances[lm]
        return inst[self._active[lm] % len(inst)]

    def _failover(self, lm: str) -> None:
        if len(self.lm_instances[lm]) > 1:
            self._active[lm] = (self._active[lm] + 1) % len(self.lm_instances[lm])
            self.counters["lm_failovers"] += 1

    async def _bootstrap(self, lm: str) -> None:
        """Ask an LM for its hosts and state once (best effort; updates will follow anyway)."""
        for _ in range(len(self.lm_instances[lm])):
            try:
                st = (await self.transport.request(self._target(lm), "LocalMaster/GetState", meghapb.GetStateRequest(),
                                                   timeout=self.params.request_timeout_s)).state
            except errors.CellbedError as e:
                log.info("GM %s: no state from %s yet: %s", self.name, self._target(lm), e)
                self._failover(lm)
                continue
            if self._state_ok(st) and self.view[lm].apply(st) == "need_hosts":
                await self._fetch_hosts(lm, st.instance)
            return

    async def _fetch_hosts(self, lm: str, instance: str = "") -> None:
        target = instance if instance in self.lm_instances[lm] else self._target(lm)
        try:
            h = await self.transport.request(target, "LocalMaster/GetHosts", meghapb.GetHostsRequest(),
                                             timeout=self.params.request_timeout_s)
        except errors.CellbedError as e:
            log.info("GM %s: GetHosts from %s failed: %s", self.name, target, e)
            return
        v = self.view[lm]
        v.set_hosts(h.digest, [x.name for x in h.hosts], [x.capacity.cpu_cores for x in h.hosts],
                    [x.capacity.mem_mib for x in h.hosts], [wire.attributes_from_pb(x.attributes) for x in h.hosts])
        pend, v.pending_full = v.pending_full, None
        if pend is not None and pend.hosts_digest == h.digest:
            self._apply(lm, pend)
        self.counters["hosts_fetched"] += 1

    async def _recover(self) -> None:
        """Reload accepted tasks from the store; those an LM already holds are not queued again."""
        items = self.store.load(self.name)
        if not items:
            return
        tasks = [meghapb.MeghaTask.FromString(b) for _, b in items]
        held: dict[str, tuple[str, meghapb.LmTaskRecord]] = {}
        names = [t.name for t in tasks]
        for lm in self.view.order:
            for _ in range(len(self.lm_instances[lm])):
                try:
                    r = await self.transport.request(self._target(lm), "LocalMaster/FindTasks",
                                                     meghapb.FindTasksRequest(names=names),
                                                     timeout=self.params.request_timeout_s)
                    for rec in r.found:
                        held[rec.task.name] = (lm, rec)
                    break
                except errors.CellbedError as e:
                    log.warning("GM %s: recovery: FindTasks on %s failed: %s", self.name, self._target(lm), e)
                    self._failover(lm)
        now = self.clock.now()
        for t in tasks:
            gt = self._new_task(t, t.arrival_unix_s or now, now)
            gt.recovered = True
            found = held.get(t.name)
            if found is not None:
                lm, rec = found
                gt.state = RUNNING if rec.state == meghapb.TASK_STATE_RUNNING else STARTING
                gt.placement = meghapb.Placement(lm=lm, host=rec.host, partition=rec.partition,
                                             repartitioned=rec.logical)
                self.store.remove(self.name, t.name)
                self.counters["recovered_placed"] += 1
            else:
                self.queues.push(t.user, t.name)
                self.counters["recovered_queued"] += 1
        self._work.set()

    # --- view ---------------------------------------------------------------------------------
    def on_state(self, topic: str, st: meghapb.LmState) -> None:
        """An LM's periodic state (the MQTT handler). One that fails the checks is dropped, and
        counted under ``states_dropped_<reason>`` (by _apply)."""
        if st.lm not in self.view.lms:
            self.counters["states_dropped_unknown_lm"] += 1
            return
        self.counters["states_received"] += 1
        self._apply(st.lm, st)

    def _state_ok(self, st: meghapb.LmState) -> bool:
        """Whether *st* may enter the view (wire_checks_megha.lm_state at this GM's clock)."""
        try:
            lm_state(st, self.clock.now(), self.params.max_clock_skew_s)
        except errors.InvalidArgument as e:
            self.counters[f"states_dropped_{e.reason}"] += 1
            log.info("GM %s: dropped a state of LM %s: %s", self.name, st.lm[:64], e)
            return False
        return True

    def _apply(self, lm: str, st: meghapb.LmState) -> None:
        """Apply an LM's state (MQTT, piggy-backed on a reply, or held until its hosts were known)."""
        if not self._state_ok(st):
            return
        v = self.view[lm]
        before_c = v.free_cpu.copy() if st.full and v.ready else None
        before_m = v.free_mem.copy() if before_c is not None else None
        usage_before = v.usage
        r = v.apply(st)
        if r == "applied":
            self._gen += 1
        if r == "need_hosts":
            if lm not in self._fetching or self._fetching[lm].done():
                self._fetching[lm] = asyncio.create_task(self._fetch_hosts(lm, st.instance))
            return
        if r != "applied":
            return
        if st.instance in self.lm_instances[lm]:
            self._active[lm] = self.lm_instances[lm].index(st.instance)
        if before_c is not None:
            freed = bool((v.free_cpu > before_c + 1e-9).any() or (v.free_mem > before_m + 1e-9).any())
        else:
            freed = bool(st.full)       # the first full state of this LM
        if freed:
            if self.queues.unpark():
                self._work.set()
        elif v.usage != usage_before and self.shares and self.params.fairness:
            under = self._users_under_share()
            if under and self.queues.unpark(under):
                self._work.set()

    def _users_under_share(self) -> list[str]:
        cap_c, cap_m = self.view.capacity()
        cons = fairness.consumption(self.view.usage(), cap_c, cap_m)
        return [u for u in self.my_users if cons.get(u, 0.0) < self.shares.get(u, 0.0)]
