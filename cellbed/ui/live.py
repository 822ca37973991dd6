"""The live cell view's server side: one WatchEvents stream per node daemon, and each host's state
and VMs (GetHostState, ListVms) read again at once when an event says they changed, and every
``refresh_s`` for the usage figures. Every change is published to the pages through the Hub.

Migrations come from the events alone: MIGRATION_STARTED ("<id> -> <destination>"),
MIGRATION_PROGRESS (libvirt's job statistics: bytes sent and remaining, iteration, phase) and
MIGRATION_FINISHED (the final record); ListMigrations fills in the recent ones at (re)connection.
An update caused by an event carries the event's time (``ev_unix_s``), so that the page can tell
how long the event took to show.
"""
from __future__ import annotations

import asyncio
import collections
import time

import grpc

from cellbed.domain import errors
from cellbed.runtime.authz import Security
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.waits import wait_event
from cellbed.ui import convert
from cellbed.ui.hub import Hub
from cellbed.ui.live_agents import Agents
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg

KEEP_FINISHED = 50
HISTORY = 20
ACTIVITY = 100
RETRY_S = (0.5, 1.0, 2.0, 5.0)
CALL_S = 5.0
HOST_EVENTS = {npb.EVENT_KIND_VM_STARTED, npb.EVENT_KIND_VM_STOPPED, npb.EVENT_KIND_VM_CRASHED,
               npb.EVENT_KIND_WORKLOAD_SET, npb.EVENT_KIND_SPIKE_ACTION, npb.EVENT_KIND_MIGRATION_STARTED,
               npb.EVENT_KIND_MIGRATION_FINISHED}


class LiveCell:
    def __init__(self, name: str, hosts: dict[str, str], security: Security, *, broker: str = "",
                 megha: dict | None = None, san: bool = False, refresh_s: float = 2.0) -> None:
        """*hosts*: host name -> "address:port" of its node daemon; *broker*, *megha*: the cell
        state's entries (cellbed/cell/cell.py, cellbed/cell/megha.py); *san*: the hosts run SAN."""
        self.name = name
        self.targets = dict(hosts)
        self.security = security
        self.refresh_s = refresh_s
        self.transport = GrpcTransport(lambda n: n, RealClock(), security=security)
        self.hub = Hub(self.snapshot)
        self.agents = Agents(self.transport, self.hub, self.targets, broker=broker, megha=megha, san=san,
                             period_s=refresh_s)
        self.hosts: dict[str, dict] = {h: {"state": None, "vms": [], "error": "connecting", "connected": False}
                                       for h in self.targets}
        self.migrations: dict[str, dict] = {}
        self.activity: collections.deque = collections.deque(maxlen=ACTIVITY)
        self._wake = {h: asyncio.Event() for h in self.targets}
        self._cause: dict[str, float] = {}
        self._tasks: list[asyncio.Task] = []

    @classmethod
    def from_state(cls, state: dict, security: Security, refresh_s: float = 2.0) -> "LiveCell":
        hosts = {h: f"{d['address']}:{d['grpc_port']}" for h, d in state["hosts"].items()}
        return cls(state.get("name", ""), hosts, security, broker=state.get("broker", ""),
                   megha=state.get("megha"), san=bool(state.get("broker")), refresh_s=refresh_s)

    # --- life -----------------------------------------------------------------------------
    async def start(self) -> None:
        for h in self.targets:
            self._tasks.append(asyncio.create_task(self._watch(h), name=f"ui-watch-{h}"))
            self._tasks.append(asyncio.create_task(self._refresher(h), name=f"ui-refresh-{h}"))
        self._tasks.append(asyncio.create_task(self.agents.run(), name="ui-agents"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.transport.close()

    def snapshot(self) -> dict:
        return {"cell": self.name, "now_unix_s": time.time(), "hosts": self.hosts,
                "migrations": self._migrations_sorted(), "activity": list(self.activity), **self.agents.snapshot()}

    def _migrations_sorted(self) -> list[dict]:
        return sorted(self.migrations.values(), key=lambda m: m.get("started_unix_s") or 0, reverse=True)

    # --- hosts ----------------------------------------------------------------------------
    def want_refresh(self, host: str, ev_unix_s: float = 0.0) -> None:
        if host in self._wake:
            if ev_unix_s:
                self._cause.setdefault(host, ev_unix_s)
            self._wake[host].set()

    async def _refresher(self, host: str) -> None:
        while True:
            await wait_event(self._wake[host], self.refresh_s)
            self._wake[host].clear()
            cause = self._cause.pop(host, 0.0)
            await self.refresh_host(host, cause)

    async def refresh_host(self, host: str, ev_unix_s: float = 0.0) -> None:
        t = self.targets[host]
        view = self.hosts[host]
        try:
            st, vms = await asyncio.gather(
                self.transport.request(t, "NodeAgent/GetHostState", npb.GetHostStateRequest(), timeout=CALL_S),
                self.transport.request(t, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=CALL_S))
        except errors.CellbedError as e:
            view["error"] = str(e)
        else:
            view.update(state=convert.host(st.state), vms=[convert.vm(v) for v in vms.vms], error="")
        self.hub.publish("host", {"host": host, **view, "ev_unix_s": ev_unix_s})

    # --- events ---------------------------------------------------------------------------
    async def _watch(self, host: str) -> None:
        tries = 0
        while True:
            channel = self.security.channel(self.targets[host])
            try:
                await self._history(host)
                stream = npbg.NodeAgentStub(channel).WatchEvents(npb.WatchEventsRequest())
                self.hosts[host]["connected"] = True
                self.want_refresh(host)
                async for ev in stream:
                    tries = 0
                    self.on_event(ev)
            except (grpc.aio.AioRpcError, errors.CellbedError) as e:
                msg = e.details() if isinstance(e, grpc.aio.AioRpcError) else str(e)
                self.hosts[host].update(connected=False, error=f"event stream: {msg}")
                self.hub.publish("host", {"host": host, **self.hosts[host], "ev_unix_s": 0.0})
            finally:
                await channel.close()
            await asyncio.sleep(RETRY_S[min(tries, len(RETRY_S) - 1)])    # back off before reconnecting
            tries += 1

    async def _history(self, host: str) -> None:
        r = await self.transport.request(self.targets[host], "NodeAgent/ListMigrations",
                                         npb.ListMigrationsRequest(limit=HISTORY), timeout=CALL_S)
        for rec in r.records:
            if rec.id not in self.migrations or self.migrations[rec.id]["status"] == convert.IN_FLIGHT:
                self.migrations[rec.id] = convert.record(rec)
        self._prune()
        if r.records:
            self.hub.publish("migrations", {"migrations": self._migrations_sorted(), "ev_unix_s": 0.0})

    def on_event(self, ev: npb.Event) -> None:
        item = convert.event(ev)
        self.activity.append(item)
        self.hub.publish("activity", {**item, "ev_unix_s": ev.unix_s})
        k = ev.kind
        if k == npb.EVENT_KIND_MIGRATION_STARTED:
            self._migration(convert.started(ev), ev.unix_s)
        elif k == npb.EVENT_KIND_MIGRATION_PROGRESS:
            self._migration(convert.progress(ev), ev.unix_s)
        elif k == npb.EVENT_KIND_MIGRATION_FINISHED:
            self._migration(convert.record(ev.record, ev.unix_s), ev.unix_s)
            self.want_refresh(ev.record.dst, ev.unix_s)
        elif k == npb.EVENT_KIND_SAN_STEP:
            self.agents.san_step(ev)
        if k in HOST_EVENTS:
            self.want_refresh(ev.host, ev.unix_s)

    def _migration(self, update: dict, ev_unix_s: float) -> None:
        mid = update["id"]
        m = self.migrations.get(mid)
        if m is not None and m["status"] != convert.IN_FLIGHT and update["status"] == convert.IN_FLIGHT:
            return                          # a late progress event after the final record
        m = {**(m or {}), **{k: v for k, v in update.items() if v != "" or k not in (m or {})}}
        self.migrations[mid] = m
        self._prune()
        self.hub.publish("migration", {**m, "ev_unix_s": ev_unix_s})

    def _prune(self) -> None:
        done = [m for m in self.migrations.values() if m["status"] != convert.IN_FLIGHT]
        if len(done) > KEEP_FINISHED:
            done.sort(key=lambda m: m.get("updated_unix_s") or 0)
            for m in done[:len(done) - KEEP_FINISHED]:
                del self.migrations[m["id"]]
