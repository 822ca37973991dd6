"""The live view's MASB and Megha panels: each host's SAN negotiations (San/ListNegotiations, read
again when the host's event stream reports a SAN step, which is also pushed at once as it is), the
broker's cache (BrokerAgent/ListCache), and Megha's GM views (GlobalMaster/GetView), queues
(GlobalMaster/ListQueues) and LM partitions (LocalMaster/ListPartitions, from the active
instance of each LM). All read-only calls as the cell's admin."""
from __future__ import annotations

import asyncio
import time

from cellbed.domain import errors
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.waits import wait_event
from cellbed.ui import convert
from cellbed.ui.hub import Hub
from cellbed.v1 import masb_pb2 as masbpb, megha_pb2 as meghapb, node_pb2 as npb

NEGOTIATIONS = 10
CALL_S = 5.0


class Agents:
    def __init__(self, transport: GrpcTransport, hub: Hub, hosts: dict[str, str], *, broker: str = "",
                 megha: dict | None = None, san: bool = False, period_s: float = 2.0) -> None:
        self.t = transport
        self.hub = hub
        self.hosts = hosts
        self.broker = broker
        self.megha = megha
        self.san = san
        self.period_s = period_s
        self.negotiations: dict[str, dict] = {}
        self.cache: dict | None = None
        self.megha_view: dict | None = None
        self._san_wake = asyncio.Event()
        self._san_due: dict[str, float] = {}

    def snapshot(self) -> dict:
        return {"san": self.negotiations if self.san else None, "broker": self.cache,
                "megha": self.megha_view}

    async def run(self) -> None:
        jobs = []
        if self.san:
            jobs.append(self._san_loop())
        if self.broker:
            jobs.append(self._every(self.poll_broker))
        if self.megha:
            jobs.append(self._every(self.poll_megha))
        await asyncio.gather(*jobs)

    async def _every(self, fn) -> None:
        while True:
            await fn()
            await asyncio.sleep(self.period_s)          # the agents' own period, not a synchronisation

    # --- SAN ------------------------------------------------------------------------------
    def san_step(self, ev: npb.Event) -> None:
        """A SAN_STEP event ("<san id> <kind> <host> <detail>"): pushed now, and the host's
        negotiations read again."""
        san_id, _, rest = ev.detail.partition(" ")
        kind, _, rest = rest.partition(" ")
        host, _, detail = rest.partition(" ")
        self.hub.publish("san_step", {"host": ev.host, "san_id": san_id, "vm": ev.vm, "kind": kind, "peer": host,
                                      "detail": detail, "unix_s": ev.unix_s, "ev_unix_s": ev.unix_s})
        self._san_due.setdefault(ev.host, ev.unix_s)
        self._san_wake.set()

    async def _san_loop(self) -> None:
        self._san_due = {h: 0.0 for h in self.hosts}
        while True:
            due, self._san_due = self._san_due, {}
            self._san_wake.clear()
            await asyncio.gather(*(self.poll_san(h, t) for h, t in due.items()))
            if not await wait_event(self._san_wake, self.period_s * 3):
                self._san_due = {h: 0.0 for h in self.hosts}

    async def poll_san(self, host: str, ev_unix_s: float = 0.0) -> None:
        try:
            r = await self.t.request(self.hosts[host], "San/ListNegotiations",
                                     masbpb.ListNegotiationsRequest(limit=NEGOTIATIONS), timeout=CALL_S)
            view = {"host": host, "negotiations": [convert.message(n) for n in r.negotiations],
                    "counters": {k: int(v) for k, v in r.counters.items()}, "error": ""}
        except errors.CellbedError as e:
            view = {**self.negotiations.get(host, {"host": host, "negotiations": [], "counters": {}}), "error": str(e)}
        if view != self.negotiations.get(host):
            self.negotiations[host] = view
            self.hub.publish("san", {**view, "ev_unix_s": ev_unix_s})

    # --- broker ---------------------------------------------------------------------------
    async def poll_broker(self) -> None:
        try:
            r = await self.t.request(self.broker, "BrokerAgent/ListCache", masbpb.ListCacheRequest(), timeout=CALL_S)
            view = {"broker": r.broker, "expiry_s": r.node_expiry_s, "error": "",
                    "entries": [{"host": e.report.host, "age_s": e.age_s, "asr": convert.ASR.get(e.report.asr_class, "?"),
                                 "cap_cpu": e.report.capacity.cpu_cores, "cap_mem": e.report.capacity.mem_mib,
                                 "used_cpu": e.report.used.cpu_cores, "used_mem": e.report.used.mem_mib,
                                 "req_cpu": e.report.requested.cpu_cores, "tasks": e.report.task_count}
                                for e in r.entries],
                    "counters": {k: int(v) for k, v in r.counters.items()}}
        except errors.CellbedError as e:
            view = {**(self.cache or {"entries": [], "counters": {}}), "error": str(e)}
        self.cache = view
        self.hub.publish("broker", {**view, "ev_unix_s": 0.0})

    # --- Megha ----------------------------------------------------------------------------
    async def poll_megha(self) -> None:
        m = self.megha or {}
        gms, lms = m.get("gms", {}), m.get("lms", {})
        views, queues, parts, errs = [], {}, [], []
        for g, addr in gms.items():
            try:
                v = await self.t.request(addr, "GlobalMaster/GetView", meghapb.GetViewRequest(), timeout=CALL_S)
                q = await self.t.request(addr, "GlobalMaster/ListQueues", meghapb.ListQueuesRequest(), timeout=CALL_S)
            except errors.CellbedError as e:
                errs.append(f"{g}: {e}")
                continue
            views.append(convert.message(v))
            for qi in q.queues:
                if qi.gm == q.gm or qi.user not in queues:         # the serving GM knows the queue's length
                    queues[qi.user] = convert.message(qi)
        for lm, insts in m.get("instances", {}).items():
            best = None
            for i in insts:
                try:
                    r = await self.t.request(lms[i], "LocalMaster/ListPartitions", meghapb.ListPartitionsRequest(),
                                             timeout=CALL_S)
                except (errors.CellbedError, KeyError) as e:
                    errs.append(f"{i}: {e}")
                    continue
                if best is None or r.role == meghapb.LM_ROLE_ACTIVE:
                    best = r
            if best is not None:
                parts.append(convert.message(best))
        self.megha_view = {"gms": views, "queues": list(queues.values()), "lms": parts, "errors": errs,
                           "unix_s": time.time()}
        self.hub.publish("megha", {**self.megha_view, "ev_unix_s": 0.0})
