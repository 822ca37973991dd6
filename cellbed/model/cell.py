"""A MASB model cell: N model hosts (NodeAgent + SanAgent on the model backend), B broker
agents, all on one InProcNetwork in virtual time, driven by a workload event stream (the
GCD-shaped generator or a trace). The same agent code as on a real cell.

    summary = run_virtual(ModelCell(ModelCellParams(nodes=500)).run())

Normalised GCD resources become absolute ones with ``cpu_scale_cores`` and
``mem_scale_mib`` (the largest machine). Placement front-ends: ``masb`` (a random BA
places with SIAS, DESIGN §7) and ``bestfit`` (a central Borg-like best fit over true
state, no negotiation: MASB Table 3's baseline). Rebalancing is SAN, on or off.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import math
import random
from typing import Callable, Iterable

import numpy as np

from cellbed.domain import errors, wire
from cellbed.broker.agent import BrokerAgent, BrokerServicer
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.domain.vm import VmSpec
from cellbed.daemon.san import SanAgent, SanConfig, SanServicer
from cellbed.policy.migration.cost import PrecopyParams
from cellbed.daemon.hv_model import ModelFabric
from cellbed.model.node import ModelHost, model_config, model_host
from cellbed.policy.scores.asr import AsrClass, classify
from cellbed.runtime.clock import VirtualClock
from cellbed.runtime.rng import agent_rng
from cellbed.runtime.transport import InProcNetwork
from cellbed.v1 import masb_pb2 as mpb, node_pb2 as pb
from cellbed.workload import events as ev

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ModelCellParams:
    nodes: int = 500
    brokers: int = 3
    seed: int = 0
    duration_s: float = 7200.0
    tick_s: float = 60.0
    monitor_period_s: float = 60.0
    cpu_scale_cores: float = 32.0          # normalised 1.0 CPU
    mem_scale_mib: float = 65536.0         # normalised 1.0 memory
    latency_s: float = 0.0005              # one way, in-process network
    jitter_s: float = 0.0005
    frontend: str = "masb"                 # masb | bestfit
    san: SanConfig = SanConfig(window_s=30.0, report_period_s=60.0)
    broker: BrokerParams = BrokerParams()
    generator: dict = dataclasses.field(default_factory=dict)   # GeneratorConfig overrides
    overload_share: float = 0.0            # share of hosts whose tasks (those there at overload_at_s)...
    overload_factor: float = 1.0           # ...use this many times more CPU from then on, wherever they go
    overload_at_s: float = 0.0
    migration_failure_prob: float = 0.0
    cost: PrecopyParams = PrecopyParams()
    retry_per_tick: int = 0                # deferred placements retried per tick; 0: max(500, nodes // 4)


@dataclasses.dataclass
class Tick:
    t_s: float
    nodes: int
    idle: int
    overloaded: int
    above_max_util: int
    sta: int
    ta: int
    pa: int
    da: int
    used_cpu: float
    used_mem: float
    req_cpu: float
    req_mem: float
    tasks_running: int
    tasks_pending: int
    migrations_attempted: int = 0
    migrations_succeeded: int = 0
    migrations_refused: int = 0
    migrations_failed: int = 0
    bytes_moved: int = 0


@dataclasses.dataclass
class Summary:
    ticks: list[Tick]
    tasks_added: int
    tasks_removed: int
    tasks_live: int
    tasks_pending: int
    lost: list[str]
    duplicated: list[str]
    counters: dict
    broker_counters: dict
    net: dict
    migrations: list[dict]


def task_name(job_id: int, index: int) -> str:
    return f"t{job_id}-{index}"


class ModelCell:
    def __init__(self, params: ModelCellParams, events: Iterable[ev.WorkloadEvent] | None = None,
                 on_tick: Callable[[Tick], None] | None = None, on_allocation: Callable[[dict], None] | None = None,
                 on_migration: Callable[[dict], None] | None = None) -> None:
        self.p = params
        self._events = events
        self.on_tick = on_tick
        self.on_allocation = on_allocation
        self.on_migration_row = on_migration
        self.arrival: dict[str, tuple[float, int]] = {}   # task -> (arrival time, attempts)
        self.rng = random.Random(params.seed)
        self.hosts: dict[str, ModelHost] = {}
        self.sans: dict[str, SanAgent] = {}
        self.brokers: list[BrokerAgent] = []
        self.node_of_id: dict[int, str] = {}
        self.live: dict[str, VmSpec] = {}          # tasks between AddTask and RemoveTask
        self.pending: collections.OrderedDict[str, VmSpec] = collections.OrderedDict()
        self.remove_later: set[str] = set()
        self.usage_boost: set[str] = set()        # tasks whose CPU use is multiplied (overload injection)
        self.boosted_hosts: list[str] = []
        self.added = self.removed = 0
        self.migrations: list[dict] = []
        self._tick_mig = collections.Counter()
        self.counters: collections.Counter = collections.Counter()
        self._inflight: set[asyncio.Task] = set()
        self._bestfit_booked: dict[str, tuple[float, float]] = {}   # host -> (cores, MiB) being started there

    # --- building ----------------------------------------------------------------------
    def _generator(self):
        from cellbed.workload.generator import GeneratorConfig, WorkloadGenerator
        cfg = GeneratorConfig.from_mapping({"nodes": self.p.nodes, "duration_s": self.p.duration_s,
                                            "seed": self.p.seed, **self.p.generator})
        return WorkloadGenerator(cfg)

    async def _add_host(self, node_id: int, cpu: float, mem: float) -> None:
        name = f"n{node_id}"
        self.node_of_id[node_id] = name
        cfg = model_config(name, cpu * self.p.cpu_scale_cores, max(64, int(mem * self.p.mem_scale_mib)),
                           monitor_period_s=self.p.monitor_period_s)
        h = await model_host(self.net, self.fabric, cfg, start=False)
        await h.agent.start(first_sample_delay_s=self.rng.uniform(0, self.p.monitor_period_s))
        self.hosts[name] = h
        san = SanAgent(h.agent, self.net.transport(name), self.clock, agent_rng(self.p.seed, name),
                       dataclasses.replace(self.p.san, enabled=self.p.san.enabled), [b.name for b in self.brokers],
                       cell="model")
        san.on_migration = self._on_migration
        san.on_refused = self._on_refused
        san.start()
        self.net.serve(name, "San", SanServicer(san))
        self.sans[name] = san

    def _set_attributes(self, node_id: int, attrs: dict) -> None:
        h = self.hosts.get(self.node_of_id.get(node_id, ""))
        if h is not None:
            h.agent.cfg.attributes.update(attrs)     # the cfg dict is this host's own
            h.agent.host_sample.ClearField("attributes")

    def _on_migration(self, rec: pb.MigrationRecord, neg, forced: bool) -> None:
        ok = rec.outcome == pb.MIGRATION_OUTCOME_SUCCEEDED
        self._tick_mig["attempted"] += 1
        self._tick_mig["succeeded" if ok else "failed"] += 1
        self._tick_mig["bytes"] += rec.data_total_bytes if ok else 0
        row = {"t_s": self.clock.monotonic(), "vm": rec.vm, "src": rec.src, "dst": rec.dst,
                                "outcome": pb.MigrationOutcome.Name(rec.outcome).removeprefix("MIGRATION_OUTCOME_").lower(),
                                "forced": forced, "san_id": neg.san_id, "time_ms": rec.time_elapsed_ms,
                                "downtime_ms": rec.downtime_ms, "bytes": rec.data_total_bytes}
        self.migrations.append(row)
        if self.on_migration_row is not None:
            self.on_migration_row(row)

    def _on_refused(self, neg, host: str, forced: bool, detail: str) -> None:
        """SAN step 5: the target refused the TaskMigrationProcessRequest (a collision) or could
        not be reached; an attempt with no transfer. Counted in the tick and passed to
        on_migration, but not kept in ``self.migrations`` (which holds transfers only)."""
        self._tick_mig["attempted"] += 1
        self._tick_mig["refused"] += 1
        if self.on_migration_row is not None:
            row = {"t_s": self.clock.monotonic(), "vm": neg.vm, "src": neg.src_host, "dst": host,
                   "outcome": "refused", "forced": forced, "san_id": neg.san_id, "time_ms": math.nan,
                   "downtime_ms": math.nan, "bytes": 0}
            self.on_migration_row(row)

    # --- workload -----------------------------------------------------------------------------
    def _spec(self, e: ev.AddTask) -> VmSpec:
        cpu = e.cpu_request * self.p.cpu_scale_cores
        mem = max(1, int(round(e.mem_request * self.p.mem_scale_mib)))
        vcpus = max(1, math.ceil(cpu - 1e-9))
        used_cpu = 0.45 * cpu      # until the first usage record: the mean use/request ratio
        return VmSpec(name=task_name(e.job_id, e.task_index), mem_mib=mem, vcpus=vcpus,
                      cpu_load=min(1.0, used_cpu / vcpus), wss_mib=max(0, int(0.8 * mem)), dirty_mib_s=0.0,
                      production=e.band == ev.Band.PRODUCTION, priority=e.priority, req_cpu_cores=min(cpu, vcpus),
                      constraints=tuple(e.constraints), user=e.user)

    async def _place(self, spec: VmSpec) -> bool:
        if self.p.frontend == "bestfit":
            return await self._place_bestfit(spec)
        b = self.brokers[self.rng.randrange(len(self.brokers))]
        from cellbed.daemon.agent import spec_pb
        task = mpb.TaskInfo(name=spec.name, requested=wire.resources(spec.requested_cpu, spec.mem_mib),
                            used=wire.resources(spec.vcpus * spec.cpu_load, spec.wss_mib),
                            constraints=wire.constraints_pb(spec.constraints), production=spec.production,
                            priority=spec.priority, mem_mib=spec.mem_mib)
        try:
            await self.driver.request(b.name, "BrokerAgent/AllocateTask",
                                      mpb.AllocateTaskRequest(task=task, spec=spec_pb(spec), launch=True), timeout=60)
            return True
        except errors.FailedPrecondition:
            return False

    async def _place_bestfit(self, spec: VmSpec) -> bool:
        """Borg-like best fit over the true state: the feasible host (requests within capacity
        on the request side, use on the use side) left with the least free CPU+memory share."""
        best, best_left = None, math.inf
        for name, h in self.hosts.items():
            a = h.agent
            if spec.constraints and not ev.constraints_match(spec.constraints, a.cfg.attributes):
                continue
            cu, mu = a.used()
            bc, bm = self._bestfit_booked.get(name, (0.0, 0.0))   # decided, StartVm still in flight
            cu, mu = cu + bc, mu + bm
            cap_c, cap_m = a.cfg.cpu_cores, a.cfg.mem_mib
            if cu + spec.requested_cpu > cap_c or mu + spec.mem_mib > cap_m:
                continue
            left = (cap_c - cu - spec.requested_cpu) / cap_c + (cap_m - mu - spec.mem_mib) / cap_m
            if left < best_left:
                best, best_left = name, left
        if best is None:
            return False
        from cellbed.daemon.agent import spec_pb
        bc, bm = self._bestfit_booked.get(best, (0.0, 0.0))
        self._bestfit_booked[best] = (bc + spec.requested_cpu, bm + spec.mem_mib)
        try:
            await self.driver.request(best, "NodeAgent/StartVm", pb.StartVmRequest(spec=spec_pb(spec)), timeout=60)
            return True
        except errors.FailedPrecondition:
            return False
        finally:
            bc, bm = self._bestfit_booked.pop(best)
            if bc - spec.requested_cpu > 1e-9 or bm - spec.mem_mib > 0:
                self._bestfit_booked[best] = (bc - spec.requested_cpu, bm - spec.mem_mib)

    def _spawn(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self._inflight.add(t)
        t.add_done_callback(self._inflight.discard)

    async def _arrive(self, spec: VmSpec) -> None:
        t_arr, attempts = self.arrival.get(spec.name, (self.clock.monotonic(), 0))
        t0 = self.clock.monotonic()
        self.arrival[spec.name] = (t_arr, attempts + 1)
        if not await self._place(spec):
            if spec.name in self.live:
                self.pending[spec.name] = spec
                self.counters["placement_deferred"] += 1
            return
        self.arrival.pop(spec.name, None)
        if self.on_allocation is not None:
            # virtual time: decisions take no time, so the parts are the wait in the front-end's
            # queue (deferred placements) and the messages of the last, successful attempt
            now = self.clock.monotonic()
            self.on_allocation({"task": spec.name, "user": spec.user, "frontend": self.p.frontend,
                                "arrival_s": t_arr, "start_s": now, "host": self.fabric.location.get(spec.name, ""),
                                "framework_queue_ms": (t0 - t_arr) * 1000, "processing_ms": 0.0,
                                "worker_queue_ms": 0.0, "communication_ms": (now - t0) * 1000,
                                "total_ms": (now - t_arr) * 1000, "attempts": attempts + 1, "outcome": "placed"})

    async def _stop(self, name: str) -> None:
        host = self.fabric.location.get(name)
        if host is None:
            self.pending.pop(name, None)
            return
        try:
            await self.hosts[host].agent.stop_vm(name)
        except errors.FailedPrecondition:     # migrating: stop it once it has landed
            self.remove_later.add(name)
        except errors.NotFound:
            self.remove_later.add(name)

    def apply(self, e: ev.WorkloadEvent) -> None:
        if isinstance(e, ev.UpdateTaskUsedResources):
            name = task_name(e.job_id, e.task_index)
            cpu = (e.cpu_rate or 0.0) * self.p.cpu_scale_cores
            mem = (e.canonical_memory or 0.0) * self.p.mem_scale_mib
            if name in self.usage_boost:
                cpu *= self.p.overload_factor
            self.fabric.set_usage(name, cpu, mem)
        elif isinstance(e, ev.AddTask):
            spec = self._spec(e)
            self.live[spec.name] = spec
            self.added += 1
            self._spawn(self._arrive(spec))
        elif isinstance(e, ev.RemoveTask):
            name = task_name(e.job_id, e.task_index)
            if self.live.pop(name, None) is not None:
                self.removed += 1
                self.arrival.pop(name, None)
                self._spawn(self._stop(name))
        elif isinstance(e, ev.AddNodeAttributes):
            self._set_attributes(e.node_id, e.as_dict())
        elif isinstance(e, ev.RemoveNodeAttributes):
            h = self.hosts.get(self.node_of_id.get(e.node_id, ""))
            if h is not None:
                for k in e.names:
                    h.agent.cfg.attributes.pop(k, None)

    # --- metrics ---------------------------------------------------------------------------------
    def tick(self) -> Tick:
        names = list(self.hosts)
        cap = np.array([(self.hosts[n].agent.cfg.cpu_cores, self.hosts[n].agent.cfg.mem_mib) for n in names])
        used = np.array([self.hosts[n].agent.used() for n in names])
        req = np.array([self.hosts[n].agent._allocated()[::-1] for n in names])
        count = np.array([len(self.hosts[n].agent.vms) for n in names])
        pct = 100.0 * used / cap
        codes = classify(pct, count)
        c = np.bincount(codes.astype(int), minlength=6)
        above = int(((pct > 100 * self.p.san.max_util).any(axis=1) & (count > 0)).sum())
        tm = self._tick_mig
        t = Tick(self.clock.monotonic(), len(names), int(c[AsrClass.IDLE]), int(c[AsrClass.OVERLOADED]), above,
                 int(c[AsrClass.STA]), int(c[AsrClass.TA]), int(c[AsrClass.PA]), int(c[AsrClass.DA]),
                 float(used[:, 0].sum() / cap[:, 0].sum()), float(used[:, 1].sum() / cap[:, 1].sum()),
                 float(req[:, 0].sum() / cap[:, 0].sum()), float(req[:, 1].sum() / cap[:, 1].sum()),
                 int(count.sum()), len(self.pending), tm["attempted"], tm["succeeded"], tm["refused"], tm["failed"],
                 tm["bytes"])
        self._tick_mig = collections.Counter()
        return t

    async def _ticker(self, ticks: list[Tick]) -> None:
        """Every tick_s up to and including duration_s, then return. (The run waits for it to
        return instead of cancelling it at duration_s: a tick due at that very instant would
        otherwise be taken or lost depending on the order of same-time callbacks.)"""
        while self.clock.monotonic() + self.p.tick_s <= self.p.duration_s + 1e-9:
            await self.clock.sleep(self.p.tick_s)
            for name in [n for n in self.remove_later if n not in self.live]:
                if self.fabric.location.get(name) is None:
                    self.remove_later.discard(name)
                else:
                    self.remove_later.discard(name)
                    self._spawn(self._stop(name))
            retry = self.p.retry_per_tick or max(500, self.p.nodes // 4)
            for name, spec in list(itertools.islice(self.pending.items(), retry)):
                del self.pending[name]
                if name in self.live:
                    self._spawn(self._arrive(spec))
            t = self.tick()
            ticks.append(t)
            if self.on_tick is not None:
                self.on_tick(t)

    def check_tasks(self) -> tuple[list[str], list[str]]:
        """(lost, duplicated): every live task is placed exactly once or waits in the queue."""
        holders = collections.Counter()
        for h in self.hosts.values():
            for n in h.agent.vms:
                holders[n] += 1
        for b in self.fabric.backends.values():
            for n in b.tasks:
                holders[n] += 0
        dup = [n for n, k in holders.items() if k > 1]
        lost = [n for n in self.live if n not in self.pending and self.fabric.location.get(n) is None]
        for n, host in self.fabric.location.items():
            if n not in self.hosts[host].agent.vms and not any(r.spec.name == n for r in self.hosts[host].agent.incoming.values()):
                lost.append(n)
        return lost, dup

    # --- the run ---------------------------------------------------------------------------------
    async def run(self) -> Summary:
        self.clock = VirtualClock()
        self.net = InProcNetwork(self.clock, self.p.latency_s, self.p.jitter_s, seed=self.p.seed)
        self.fabric = ModelFabric(self.clock, self.p.cost, self.p.migration_failure_prob, seed=self.p.seed)
        self.driver = self.net.transport("driver")
        names = [f"ba{i}" for i in range(self.p.brokers)]
        for n in names:
            b = BrokerAgent(n, self.net.transport(n), self.clock, seed=self.p.seed, params=self.p.broker,
                            peers=names, cell="model")
            await b.start()
            self.net.serve(n, "BrokerAgent", BrokerServicer(b))
            self.brokers.append(b)
        stream = iter(self._events if self._events is not None else self._generator())
        start_us = None
        ticks: list[Tick] = []
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
            if isinstance(e, ev.AddNode):
                await self._add_host(e.node_id, e.cpu, e.mem)
                continue
            if ticker is None and not isinstance(e, (ev.AddNodeAttributes, ev.RemoveNodeAttributes)):
                ticker = await self._begin(ticks)
            self.apply(e)
        if ticker is None:
            ticker = await self._begin(ticks)
        if self.clock.monotonic() < self.p.duration_s:
            await self.clock.sleep(self.p.duration_s - self.clock.monotonic())
        await ticker                     # takes the tick due at duration_s, if any, and returns
        # let in-flight negotiations and migrations settle, then check the books
        for s in self.sans.values():
            s.cfg = dataclasses.replace(s.cfg, enabled=False)
        for _ in range(100):
            busy = [s for s in self.sans.values() if s.active] or self._inflight
            if not busy:
                break
            await self.clock.sleep(5.0)
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
                       dict(counters), dict(bc), dataclasses.asdict(self.net.stats), self.migrations)

    async def _begin(self, ticks: list[Tick]) -> asyncio.Task:
        """The cell is built: initial reports to the brokers, overload injection, the ticker."""
        for s in self.sans.values():
            s.brokers = [b.name for b in self.brokers]
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
        for h in self.boosted_hosts:
            for name in list(self.hosts[h].agent.vms):
                self.usage_boost.add(name)
                b = self.fabric.backends[h]
                if name in b.tasks:
                    t = b.tasks[name]
                    b.set_usage(name, t.cpu_cores * self.p.overload_factor, t.mem_mib)
        self.counters["overload_injected_tasks"] = len(self.usage_boost)
