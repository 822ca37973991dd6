"""The MASB front-ends of the model cell: ``masb`` (a random broker agent places each task with
SIAS, DESIGN §7) and ``bestfit`` (a central Borg-like best fit over true state, no negotiation:
MASB Table 3's baseline), with SAN rebalancing on or off. Hosts come and go with the workload's
node events; normalised GCD resources become absolute ones with ``cpu_scale_cores`` and
``mem_scale_mib`` (the largest machine)."""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import math
import random
from typing import Iterable

from cellbed import assembly
from cellbed.domain.wire import spec_pb
from cellbed.domain import errors, wire
from cellbed.domain.constraints import constraints_match
from cellbed.domain.vm import VmSpec
from cellbed.metrics.rows import AllocationRow, MigrationRow
from cellbed.model.central_fit import Row, choose
from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.model.front import Front
from cellbed.model.masb_stream import HOST_EVENTS, StreamMixin
from cellbed.model.params import Summary
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb
from cellbed.workload import events as ev
from cellbed.workload.generator import GeneratorConfig, WorkloadGenerator

RETRY_BACKOFF_MAX_TICKS = 16
"""retry_backoff: a task that keeps finding no room is tried again at least every this many ticks."""

OUTCOMES = {"succeeded": "succeeded", "refused": "refused"}
"""A migration record's outcome in migrations.csv: anything else (aborted, verification
failed, failed) is "failed"."""


def _ms(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) and v >= 0 else math.nan


class MasbFront(StreamMixin, Front):
    """Placement by brokers (masb) or central best fit (bestfit), SAN per host; every event of
    the stream acted on as masb_stream.py says (hosts join and leave, tasks run again, change)."""

    def __init__(self, cell) -> None:
        super().__init__(cell)
        self.arrival: dict[str, tuple[float, int]] = {}   # task -> (arrival time, attempts)
        self.rng = random.Random(self.p.seed)
        self.sans: dict = {}
        self.brokers: list = []
        self.node_of_id: dict[int, str] = {}
        self.live: dict[str, VmSpec] = {}          # tasks between AddTask and RemoveTask
        self.pending: collections.OrderedDict[str, VmSpec] = collections.OrderedDict()
        self.remove_later: set[str] = set()
        self.update_later: dict[str, bool] = {}   # placed tasks whose update waits for their migration
        self.run_name: dict[tuple[int, int], str] = {}   # task -> its run's name, when not t<job>-<index>
        self.displaced_at: dict[str, float] = {}  # tasks waiting since their host left -> when it left
        self.usage_boost: set[str] = set()        # tasks whose CPU use is multiplied (overload injection)
        self.boosted_hosts: list[str] = []
        self.added = self.removed = 0
        self.migrations: list[MigrationRow] = []
        self.counters: collections.Counter = collections.Counter()
        self._inflight: set[asyncio.Task] = set()
        self._bestfit_booked: dict[str, tuple[float, float]] = {}   # host -> (cores, MiB) being started there
        self.retry_at: dict[str, float] = {}      # retry_backoff: a deferred task waits until then
        self._arriving = 0                        # new tasks' placements in flight (arrival_window)
        self.arrivals_in_flight_max = 0           # the most there were at once
        self._room: asyncio.Future | None = None  # the stream waits on it while the window is full

    # --- building ----------------------------------------------------------------------
    def _generator(self) -> WorkloadGenerator:
        cfg = GeneratorConfig.from_mapping({"nodes": self.p.nodes, "duration_s": self.p.duration_s,
                                            "seed": self.p.seed, **self.p.generator})
        return WorkloadGenerator(cfg)

    def _on_migration(self, rec: npb.MigrationRecord, neg, forced: bool) -> None:
        ok = rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED
        outcome = npb.MigrationOutcome.Name(rec.outcome).removeprefix("MIGRATION_OUTCOME_").lower()
        row = MigrationRow(t_s=float(self.clock.monotonic()), vm=rec.vm, src=rec.src, dst=rec.dst,
                           outcome=OUTCOMES.get(outcome, "failed"), forced=bool(forced), san_id=neg.san_id,
                           time_ms=_ms(rec.time_elapsed_ms), downtime_ms=_ms(rec.downtime_ms),
                           bytes=max(0, int(rec.data_total_bytes or 0)))
        self.migrations.append(row)
        self.cell.migration(row, counted_as="succeeded" if ok else "failed")

    def _on_refused(self, neg, host: str, forced: bool, detail: str) -> None:
        """SAN step 5: the target refused the TaskMigrationProcessRequest (a collision) or could
        not be reached; an attempt with no transfer. Counted in the tick and passed to
        on_migration, but not kept in ``self.migrations`` (which holds transfers only)."""
        self.cell.migration(MigrationRow(t_s=float(self.clock.monotonic()), vm=neg.vm, src=neg.src_host, dst=host,
                                         outcome="refused", forced=bool(forced), san_id=neg.san_id))

    # --- workload -----------------------------------------------------------------------------
    async def _place(self, spec: VmSpec) -> bool:
        if self.p.frontend == "bestfit":
            return await self._place_bestfit(spec)
        b = self.brokers[self.rng.randrange(len(self.brokers))]
        task = masbpb.TaskInfo(name=spec.name, requested=wire.resources(spec.requested_cpu, spec.mem_mib),
                               used=wire.resources(spec.vcpus * spec.cpu_load, spec.wss_mib),
                               constraints=wire.constraints_pb(spec.constraints), production=spec.production,
                               priority=spec.priority, mem_mib=spec.mem_mib)
        try:
            await self.driver.request(b.name, "BrokerAgent/AllocateTask",
                                      masbpb.AllocateTaskRequest(task=task, spec=spec_pb(spec), launch=True), timeout=60)
            return True
        except errors.FailedPrecondition:
            return False
        except errors.CellbedError:            # e.g. the host it was started on has just left
            self.counters["placement_errors"] += 1
            return False

    def _may_host(self, view) -> bool:
        """A host-level filter of best fit beyond room and constraints (none here; the twin limits VMs per host)."""
        return True

    def _best_host(self, spec: VmSpec) -> str | None:
        """Borg-like best fit (the ``allocation`` stage, best_fit by default) over the true state:
        each host's load as the cell admits VMs (measured use for ``used``, requests otherwise),
        plus what this front-end decided and has not seen started yet."""
        by_use = self.cell.policies.get("admission", self.admission).ident.name == "used"
        rows = []
        for name, h in self.hosts.items():
            v = h.agent.view()
            cu, mu = v.used() if by_use else v.allocated()
            bc, bm = self._bestfit_booked.get(name, (0.0, 0.0))   # decided, StartVm still in flight
            rows.append(Row(name, (not spec.constraints or constraints_match(spec.constraints, v.attributes))
                            and self._may_host(v), v.capacity, (cu + bc, mu + bm)))
        return choose(self.cell.policies.get("allocation", "best_fit"), rows, (spec.requested_cpu, spec.mem_mib),
                      self.rng)

    async def _place_bestfit(self, spec: VmSpec) -> bool:
        try:
            best = self._best_host(spec)
        except PolicyFailed:            # counted by the guard: not placed now, tried again like a task with no room
            self.counters["policy_refused"] += 1
            return False
        if best is None:
            return False
        bc, bm = self._bestfit_booked.get(best, (0.0, 0.0))
        self._bestfit_booked[best] = (bc + spec.requested_cpu, bm + spec.mem_mib)
        try:
            await self.driver.request(best, "NodeAgent/StartVm", npb.StartVmRequest(spec=spec_pb(spec)), timeout=60)
            return True
        except errors.FailedPrecondition:
            return False
        except errors.CellbedError:
            self.counters["placement_errors"] += 1
            return False
        finally:
            bc, bm = self._bestfit_booked.pop(best)
            if bc - spec.requested_cpu > 1e-9 or bm - spec.mem_mib > 0:
                self._bestfit_booked[best] = (bc - spec.requested_cpu, bm - spec.mem_mib)

    def _spawn(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self._inflight.add(t)
        t.add_done_callback(self._inflight.discard)

    def _spawn_arrival(self, spec: VmSpec) -> None:
        self._arriving += 1
        self.arrivals_in_flight_max = max(self.arrivals_in_flight_max, self._arriving)
        self._spawn(self._arrive_counted(spec))

    async def _arrive_counted(self, spec: VmSpec) -> None:
        try:
            await self._arrive(spec)
        finally:
            self._arriving -= 1
            if self._room is not None and self._arriving < self.p.arrival_window:
                if not self._room.done():
                    self._room.set_result(None)
                self._room = None

    async def _window_room(self) -> None:
        """arrival_window: wait until fewer than that many new tasks' placements are in flight."""
        while self.p.arrival_window and self._arriving >= self.p.arrival_window:
            if self._room is None:
                self._room = asyncio.get_running_loop().create_future()
                self.counters["arrival_window_waits"] += 1
            await self._room

    async def _arrive(self, spec: VmSpec) -> None:
        t_arr, attempts = self.arrival.get(spec.name, (self.clock.monotonic(), 0))
        t0 = self.clock.monotonic()
        self.arrival[spec.name] = (t_arr, attempts + 1)
        if not await self._place(spec):
            if spec.name in self.live:
                self.pending[spec.name] = self.live[spec.name]      # with any update made meanwhile
                self.counters["placement_deferred"] += 1
                self.counters[f"placement_deferred_{ev.band_of(spec.priority).name.lower()}"] += 1
                if self.p.retry_backoff:      # next try after 1, 2, 4, 8, then every 16 ticks
                    wait = min(2 ** attempts, RETRY_BACKOFF_MAX_TICKS) * self.p.tick_s
                    self.retry_at[spec.name] = self.clock.monotonic() + wait
            return
        self.retry_at.pop(spec.name, None)
        self.arrival.pop(spec.name, None)
        self.displaced_at.pop(spec.name, None)
        # virtual time: decisions take no time, so the parts are the wait in the front-end's
        # queue (deferred placements) and the messages of the last, successful attempt
        now = self.clock.monotonic()
        self.cell.allocation(AllocationRow(
            task=spec.name, user=spec.user, frontend=self.p.frontend, arrival_s=t_arr, start_s=now,
            host=self.cell.fabric.location.get(spec.name, ""), framework_queue_ms=(t0 - t_arr) * 1000,
            processing_ms=0.0, worker_queue_ms=0.0, communication_ms=(now - t0) * 1000,
            total_ms=(now - t_arr) * 1000, attempts=attempts + 1, outcome="placed"))

    async def _stop(self, name: str) -> None:
        host = self.cell.fabric.location.get(name)
        if host is None:
            self.pending.pop(name, None)
            return
        try:
            await self.hosts[host].agent.stop_vm(name)
        except errors.FailedPrecondition:     # migrating: stop it once it has landed
            self.remove_later.add(name)
        except errors.NotFound:
            self.remove_later.add(name)

    # --- ticks and checks ------------------------------------------------------------------------
    async def _ticker(self, ticks: list) -> None:
        """Every tick_s up to and including duration_s, then return. (The run waits for it to
        return instead of cancelling it at duration_s: a tick due at that very instant would
        otherwise be taken or lost depending on the order of same-time callbacks.)"""
        while self.clock.monotonic() + self.p.tick_s <= self.p.duration_s + 1e-9:
            await self.clock.sleep(self.p.tick_s)
            for name in [n for n in self.remove_later if n not in self.live]:
                self.remove_later.discard(name)
                if self.cell.fabric.location.get(name) is not None:
                    self._spawn(self._stop(name))
            for name in list(self.update_later):
                self._spawn(self._update_placed(name))
            retry = self.p.retry_per_tick or max(500, self.p.nodes // 4)
            due = self._due(retry) if self.p.retry_backoff else itertools.islice(self.pending.items(), retry)
            for name, spec in list(due):
                del self.pending[name]
                if name in self.live:
                    self._spawn(self._arrive(spec))
            ticks.append(self.cell.tick(self.clock.monotonic(), len(self.pending)))

    def _due(self, n: int):
        """retry_backoff: the first *n* waiting tasks whose wait is over, in queue order."""
        now = self.clock.monotonic() + 1e-9
        for name in [k for k, t in self.retry_at.items() if k not in self.pending]:
            del self.retry_at[name]
        return itertools.islice(((k, s) for k, s in self.pending.items() if self.retry_at.get(k, 0.0) <= now), n)

    def check_tasks(self) -> tuple[list[str], list[str]]:
        """(lost, duplicated): every live task is placed exactly once or waits in the queue."""
        fabric = self.cell.fabric
        holders = collections.Counter()
        for h in self.hosts.values():
            for n in h.agent.view().vm_names:
                holders[n] += 1
        dup = [n for n, k in holders.items() if k > 1]
        lost = [n for n in self.live if n not in self.pending and fabric.location.get(n) is None]
        for n, host in fabric.location.items():
            h = self.hosts.get(host)
            if h is None or (n not in h.agent.view().vm_names and n not in h.agent.view().incoming_names):
                lost.append(n)
        return lost, dup

    def unplaced(self) -> list[AllocationRow]:
        """Tasks still waiting for a placement at the end: one "pending" row each."""
        end = self.p.duration_s
        out = []
        for name, spec in self.pending.items():
            if name not in self.live:
                continue
            t_arr, attempts = self.arrival.get(name, (end, 0))
            out.append(AllocationRow(task=name, user=spec.user, frontend=self.p.frontend, arrival_s=t_arr,
                                     start_s=math.nan, host="", framework_queue_ms=math.nan,
                                     processing_ms=math.nan, worker_queue_ms=math.nan, communication_ms=math.nan,
                                     total_ms=math.nan, attempts=attempts, outcome="pending"))
        return out

    # --- the run ---------------------------------------------------------------------------------
    async def run(self, events: Iterable[ev.WorkloadEvent] | None) -> Summary:
        env = self.cell.make_env()
        self.driver = env.transport_for("driver")
        names = [f"ba{i}" for i in range(self.p.brokers)]
        for n in names:
            b, _ = assembly.build_broker(env, n, params=self.p.broker, peers=names, cell="model")
            await b.start()
            self.brokers.append(b)
        ticks: list = []
        ticker = await self._feed(iter(events if events is not None else self._generator()), ticks)
        if self.clock.monotonic() < self.p.duration_s:
            await self.clock.sleep(self.p.duration_s - self.clock.monotonic())
        await ticker                     # takes the tick due at duration_s, if any, and returns
        await self._settle()
        return await self._close(ticks)

    async def _feed(self, stream, ticks: list) -> asyncio.Task:
        """Apply the events in time order up to duration_s; returns the ticker."""
        start_us = None
        ticker = None
        for e in stream:
            if start_us is None:
                start_us = e.time_us
            t = (e.time_us - start_us) / 1e6
            if t > self.p.duration_s:
                break
            if t > self.clock.monotonic():
                if ticker is None:
                    ticker = await self._begin(ticks)
                await self.clock.sleep(t - self.clock.monotonic())
            if ticker is None and not isinstance(e, ev.NodeEvent):
                ticker = await self._begin(ticks)
            if isinstance(e, HOST_EVENTS):
                await self.apply_node(e)
            else:
                if isinstance(e, ev.AddTask):
                    await self._window_room()
                self.apply(e)
        return ticker if ticker is not None else await self._begin(ticks)

    async def _settle(self) -> None:
        """Let in-flight negotiations and migrations settle (SAN off), before checking the books."""
        for s in self.sans.values():
            s.disable()
        for _ in range(100):
            busy = [s for s in self.sans.values() if s.active] or self._inflight
            if not busy:
                break
            await self.clock.sleep(5.0)

    async def _close(self, ticks: list) -> Summary:
        lost, dup = self.check_tasks()
        counters = collections.Counter()
        for s in self.sans.values():
            counters.update(s.counters)
        bc = collections.Counter()
        for b in self.brokers:
            bc.update(b.counters)
        for h in self.hosts.values():
            await h.agent.stop()
        for b in self.brokers:
            await b.stop()
        return Summary(ticks, self.added, self.removed, len(self.live), len(self.pending), lost, dup,
                       dict(counters), dict(bc), dataclasses.asdict(self.cell.net.stats), self.migrations)

    async def _begin(self, ticks: list) -> asyncio.Task:
        """The cell is built: initial reports to the brokers, overload injection, the ticker."""
        for s in self.sans.values():
            s.set_brokers([b.name for b in self.brokers])
            s.publish_report()
        await asyncio.sleep(0)
        k = int(round(self.p.overload_share * len(self.hosts)))
        if k:
            self.boosted_hosts = self.rng.sample(sorted(self.hosts), k)
            asyncio.ensure_future(self._inject())
        return asyncio.ensure_future(self._ticker(ticks))

    async def _inject(self) -> None:
        """Overload injection: at overload_at_s the tasks on the chosen hosts start using
        overload_factor times more CPU (and keep doing so wherever SAN moves them)."""
        await self.clock.sleep(max(0.0, self.p.overload_at_s - self.clock.monotonic()))
        fabric = self.cell.fabric
        for h in self.boosted_hosts:
            if h not in self.hosts:
                continue
            for name in list(self.hosts[h].agent.view().vm_names):
                self.usage_boost.add(name)
                b = fabric.backends[h]
                if name in b.tasks:
                    t = b.tasks[name]
                    b.set_usage(name, t.cpu_cores * self.p.overload_factor, t.mem_mib)
        self.counters["overload_injected_tasks"] = len(self.usage_boost)
