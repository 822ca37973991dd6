"""How a GM keeps its eventually consistent view (seed 001 §IV-A, IV-D): bootstrap from every
LM, the hosts of an LM fetched once per hosts digest, and the LMs' states (periodic over MQTT,
or piggy-backed on a reply) checked and applied. A state that frees room or changes who uses
how much (fairness) sends parked tasks back to their queue."""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.params import GmParams
from cellbed.domain import errors, wire
from cellbed.domain.wire_checks_megha import lm_state
from cellbed.policy.megha import fairness
from cellbed.policy.megha.view import View
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class ViewKeeper:
    """Feeds the GM's View. ``gen`` counts the states applied (a task that failed on one
    generation fails again on it: see Placer)."""

    def __init__(self, name: str, view: View, links: LmLinks, table: TaskTable, clock, params: GmParams,
                 counters: Counter, shares: dict[str, float], my_users: list[str]) -> None:
        self.name = name
        self.view = view
        self.gen = 0                       # bumped by every view change
        self._links = links
        self._table = table
        self._clock = clock
        self._params = params
        self._counters = counters
        self._shares = shares
        self._my_users = my_users
        self._fetching: dict[str, asyncio.Task] = {}

    def fetches(self) -> list[asyncio.Task]:
        """GetHosts requests under way (the GM cancels them when it stops)."""
        return list(self._fetching.values())

    async def bootstrap(self, lm: str) -> None:
        """Ask an LM for its hosts and state once (best effort; updates will follow anyway)."""
        for _ in range(self._links.tries(lm)):
            try:
                st = (await self._links.ask(lm, "LocalMaster/GetState", meghapb.GetStateRequest())).state
            except errors.CellbedError as e:
                log.info("GM %s: no state from %s yet: %s", self.name, self._links.target(lm), e)
                self._links.failover(lm)
                continue
            if self._state_ok(st) and self.view[lm].apply(st) == "need_hosts":
                await self._fetch_hosts(lm, st.instance)
            return

    async def _fetch_hosts(self, lm: str, instance: str = "") -> None:
        target = self._links.resolve(lm, instance)
        try:
            h = await self._links.request(target, "LocalMaster/GetHosts", meghapb.GetHostsRequest())
        except errors.CellbedError as e:
            log.info("GM %s: GetHosts from %s failed: %s", self.name, target, e)
            return
        v = self.view[lm]
        v.set_hosts(h.digest, [x.name for x in h.hosts], [x.capacity.cpu_cores for x in h.hosts],
                    [x.capacity.mem_mib for x in h.hosts], [wire.attributes_from_pb(x.attributes) for x in h.hosts])
        pend, v.pending_full = v.pending_full, None
        if pend is not None and pend.hosts_digest == h.digest:
            self.apply(lm, pend)
        self._counters["hosts_fetched"] += 1

    def on_state(self, topic: str, st: meghapb.LmState) -> None:
        """An LM's periodic state (the MQTT handler). One that fails the checks is dropped, and
        counted under ``states_dropped_<reason>`` (by apply)."""
        if st.lm not in self.view.lms:
            self._counters["states_dropped_unknown_lm"] += 1
            return
        self._counters["states_received"] += 1
        self.apply(st.lm, st)

    def _state_ok(self, st: meghapb.LmState) -> bool:
        """Whether *st* may enter the view (wire_checks_megha.lm_state at this GM's clock)."""
        try:
            lm_state(st, self._clock.now(), self._params.max_clock_skew_s)
        except errors.InvalidArgument as e:
            self._counters[f"states_dropped_{e.reason}"] += 1
            log.info("GM %s: dropped a state of LM %s: %s", self.name, st.lm[:64], e)
            return False
        return True

    def apply(self, lm: str, st: meghapb.LmState) -> None:
        """Apply an LM's state (MQTT, piggy-backed on a reply, or held until its hosts were known)."""
        if not self._state_ok(st):
            return
        v = self.view[lm]
        before_c = v.free_cpu.copy() if st.full and v.ready else None
        before_m = v.free_mem.copy() if before_c is not None else None
        usage_before = v.usage
        r = v.apply(st)
        if r == "applied":
            self.gen += 1
        if r == "need_hosts":
            if lm not in self._fetching or self._fetching[lm].done():
                self._fetching[lm] = asyncio.create_task(self._fetch_hosts(lm, st.instance))
            return
        if r != "applied":
            return
        self._links.note_active(lm, st.instance)
        if before_c is not None:
            freed = bool((v.free_cpu > before_c + 1e-9).any() or (v.free_mem > before_m + 1e-9).any())
        else:
            freed = bool(st.full)       # the first full state of this LM
        if freed:
            self._table.unpark()
        elif v.usage != usage_before and self._shares and self._params.fairness:
            under = self._users_under_share()
            if under:
                self._table.unpark(under)

    def _users_under_share(self) -> list[str]:
        cap_c, cap_m = self.view.capacity()
        cons = fairness.consumption(self.view.usage(), cap_c, cap_m)
        return [u for u in self._my_users if cons.get(u, 0.0) < self._shares.get(u, 0.0)]
