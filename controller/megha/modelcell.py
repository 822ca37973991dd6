"""The Megha model cell: N model hosts (the unchanged NodeAgent on the model backend), G GMs ×
L LMs (or the sampling baseline) in virtual time on an in-process network with a latency
model, driven by a seeded workload; every task's allocation time and its parts recorded.

    res = simulate(ModelCellConfig(frontend="megha", nodes=1000, gms=4, lms=10),
                   ArrivalConfig(duration_s=30, job_rate_per_s=40, users=...))

The GMs, LMs, sampling agents and NodeAgents are the same code as on a real cell; only the
transport (InProcNetwork), the clock (VirtualClock) and the hypervisor (model) differ.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections import Counter

import numpy as np

from cellbed.domain import errors, wire
from cellbed.controller.megha.alloc import AllocationRecord, pending, summarize
from cellbed.policy.megha.fairness import QueueConfig, dominant_share
from cellbed.controller.megha.frontend import FRONTEND_NAMES, MeghaFrontend, SamplingFrontend
from cellbed.controller.megha.gm import GlobalMaster, GlobalMasterServicer
from cellbed.controller.megha.lm import ACTIVE, LocalMaster, LocalMasterServicer
from cellbed.controller.megha.params import CostModel, GmParams, LmParams
from cellbed.controller.megha.queues import MemoryQueueStore
from cellbed.controller.megha.sampling import (LocalTransport, SamplingScheduler, SamplingSchedulerServicer,
                                               SamplingWorker, SamplingWorkerServicer)
from cellbed.controller.megha.workload import Arrival, ArrivalConfig, arrivals, node_attributes
from cellbed.v1 import megha_pb2 as mpb, node_pb2 as npb
from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.daemon.hv_model import ModelFabric
from cellbed.model.node import ModelHost, model_config, model_host
from cellbed.runtime.clock import VirtualClock, run_virtual
from cellbed.runtime.transport import InProcNetwork
from cellbed.workload.generator import DEFAULT_ATTRIBUTE_PROBS, attribute_name

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ModelCellConfig:
    frontend: str = "megha"                 # megha | central | sampling
    nodes: int = 100
    node_cpu: float = 4.0                   # cores per node
    node_mem_mib: int = 16384               # MiB per node
    gms: int = 2                            # Global Masters (central: 1)
    lms: int = 2                            # Local Masters (central: 1); hosts split in equal blocks
    latency_s: float = 0.0005               # one-way message delay (Sparrow simulator: 0.5 ms)
    jitter_s: float = 0.0                   # + U(0, jitter) per message
    update_period_s: float = 10.0           # LM -> GM periodic state (Megha: 10 s)
    probes: int = 2                         # sampling: d
    schedulers: int = 0                     # sampling schedulers; 0 = as many as GMs
    shares: tuple[tuple[str, float], ...] = ()   # (user, share); empty: one equal queue per GM, no fairness
    queue_gm: tuple[int, ...] = ()          # GM index (0-based) per share entry; empty: i mod gms
    fairness: bool = False                  # preemption under contention (needs shares)
    cost: CostModel | None = CostModel()    # modelled processing times; None = zero
    seed: int = 0
    background_fill: float = 0.0            # mean share of each node's CPU pre-filled at t=0 (a warm cell)
    background_s: tuple[float, float] = (10.0, 120.0)   # background tasks run U(lo, hi) s, then end
    attribute_clusters: int = 10            # nodes are cut in this many blocks, each with its own
                                            # attribute prevalence factor (same cell for every front-end)
    standby: bool = False                   # give every LM a standby instance
    monitor_period_s: float = 3600.0        # NodeAgent sampling period (irrelevant to placement)
    attribute_probs: tuple[float, ...] = DEFAULT_ATTRIBUTE_PROBS

    def validate(self) -> "ModelCellConfig":
        if self.frontend not in ("megha", "central", "sampling"):
            raise InvalidArgument(f"frontend={self.frontend!r}: allowed megha, central, sampling "
                                  f"(masb runs on the MASB model cell); all front-ends: {', '.join(FRONTEND_NAMES)}")
        check_range("nodes", self.nodes, 1, 200_000)
        check_range("gms", self.gms, 1, 1000)
        check_range("lms", self.lms, 1, min(1000, self.nodes))
        check_range("latency_s", self.latency_s, 0.0, 10.0, "s")
        check_range("background_fill", self.background_fill, 0.0, 0.95)
        if self.queue_gm and len(self.queue_gm) != len(self.shares):
            raise InvalidArgument(f"queue_gm has {len(self.queue_gm)} entries: give one per share ({len(self.shares)})")
        if self.shares and abs(sum(s for _, s in self.shares) - 1.0) > 1e-6:
            raise InvalidArgument(f"shares must sum to 1, got {sum(s for _, s in self.shares):g}")
        return self

    @property
    def n_gms(self) -> int:
        return 1 if self.frontend == "central" else self.gms

    @property
    def n_lms(self) -> int:
        return 1 if self.frontend == "central" else self.lms

    def queues(self) -> list[QueueConfig]:
        g = self.n_gms
        if self.shares:
            return [QueueConfig(u, s, f"gm{(self.queue_gm[i] if self.queue_gm else i % g) + 1}")
                    for i, (u, s) in enumerate(self.shares)]
        n = g if self.frontend != "sampling" else (self.schedulers or self.gms)
        return [QueueConfig(f"u{i + 1}", 1.0 / n, f"gm{i % g + 1}") for i in range(n)]

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(q.user for q in self.queues())


@dataclasses.dataclass
class ModelRunResult:
    config: ModelCellConfig
    records: list[AllocationRecord]
    counters: dict
    lm_counters: dict
    virtual_s: float
    wall_s: float
    usage_samples: list[tuple[float, dict[str, float]]]
    messages: int

    @property
    def summary(self) -> dict:
        return summarize(self.records)


class ModelCell:
    def __init__(self, cfg: ModelCellConfig, gm_params: GmParams | None = None,
                 lm_params: LmParams | None = None, host_attributes: list[dict] | None = None) -> None:
        """*host_attributes*: one dict per node, instead of the seeded draw (tests)."""
        self.cfg = cfg.validate()
        self._host_attributes = host_attributes
        self.gm_params = gm_params or GmParams(fairness=cfg.fairness)
        self.lm_params = lm_params or LmParams(update_period_s=cfg.update_period_s)
        self.hosts: list[ModelHost] = []
        self.lms: dict[str, LocalMaster] = {}
        self.gms: dict[str, GlobalMaster] = {}
        self.store = MemoryQueueStore()
        self.workers: list[SamplingWorker] = []
        self.schedulers: list[SamplingScheduler] = []
        self.frontend = None
        self.lm_hosts: dict[str, list[str]] = {}
        self.attributes: dict[str, dict] = {}

    # --- build ------------------------------------------------------------------------------------
    async def build(self) -> "ModelCell":
        c = self.cfg
        self.clock = VirtualClock()
        self.net = InProcNetwork(self.clock, latency_s=c.latency_s, jitter_s=c.jitter_s, seed=c.seed)
        self.fabric = ModelFabric(self.clock, seed=c.seed)
        rng = np.random.default_rng(np.random.SeedSequence([c.seed, 1]))
        width = max(5, len(str(c.nodes)))
        names = [f"h{i:0{width}d}" for i in range(1, c.nodes + 1)]
        k = max(1, min(c.attribute_clusters, c.nodes))
        for j in range(k):
            block = names[j * c.nodes // k:(j + 1) * c.nodes // k]
            for h, a in zip(block, node_attributes(len(block), rng, c.attribute_probs, float(rng.uniform(0.7, 1.3)))):
                self.attributes[h] = a
        if self._host_attributes is not None:
            if len(self._host_attributes) != c.nodes:
                raise InvalidArgument(f"host_attributes has {len(self._host_attributes)} entries, nodes = {c.nodes}")
            self.attributes = dict(zip(names, (dict(a) for a in self._host_attributes)))
        L = c.n_lms
        for j in range(L):
            self.lm_hosts[f"lm{j + 1}"] = names[j * c.nodes // L:(j + 1) * c.nodes // L]
        hosts = await asyncio.gather(*(model_host(self.net, self.fabric, model_config(
            h, c.node_cpu, c.node_mem_mib, self.attributes[h], monitor_period_s=c.monitor_period_s,
            admission="requested")) for h in names))
        self.hosts = list(hosts)
        background = self._background(rng) if c.background_fill > 0 else []
        if c.frontend == "sampling":
            await self._build_sampling(rng)
            by_host = {w.host: w for w in self.workers}
            await asyncio.gather(*(by_host[h].place_direct(t) for h, t in background))
        else:
            await self._build_megha()
            lm_of = {h: lm for lm, hs in self.lm_hosts.items() for h in hs}
            await asyncio.gather(*(self.lms[lm_of[h]].place_direct(t, h) for h, t in background))
            if background:
                # The GMs took their views at start, before this fill: without an update now they
                # would place on an empty cell until each LM's first periodic update (up to
                # update_period_s), and every LM would refuse their first requests as stale.
                for a in self.lms.values():
                    a.publish_state()
                await self.clock.sleep(4 * (c.latency_s + c.jitter_s) + 1e-3)
        return self

    def _background(self, rng: np.random.Generator) -> list[tuple[str, mpb.MeghaTask]]:
        """A warm cell: tasks of user "background" on every node, a random share of its CPU each
        (uniform, mean background_fill), ending at random times in background_s. They are
        placed directly (not through the front-end), the same for every front-end."""
        c = self.cfg
        out = []
        lo, hi = c.background_s
        for mh in self.hosts:
            left = min(0.95, float(rng.uniform(0.0, 2 * c.background_fill))) * c.node_cpu
            k = 0
            while left >= 0.25:
                cpu = min(left, float(rng.choice([0.25, 0.5, 1.0])))
                k += 1
                out.append((mh.name, mpb.MeghaTask(
                    name=f"bg-{mh.name}-{k}", user="background", duration_s=float(rng.uniform(lo, hi)),
                    request=wire.resources(cpu, max(1, int(c.node_mem_mib * cpu / c.node_cpu))),
                    workload=npb.Workload(cpu_load=0.0))))
                left -= cpu
        return out

    async def _build_megha(self) -> None:
        c = self.cfg
        gms = [f"gm{i + 1}" for i in range(c.n_gms)]
        lm_inst: dict[str, list[str]] = {}
        lms = []
        for lm, hosts in self.lm_hosts.items():
            inst = [lm] + ([f"{lm}b"] if c.standby else [])
            lm_inst[lm] = inst
            for k, name in enumerate(inst):
                a = LocalMaster(lm, name, self.net.transport(name), self.clock, hosts=hosts, gms=gms,
                                standby=k > 0, peer=(inst[1 - k] if len(inst) > 1 else ""), params=self.lm_params,
                                cost=c.cost)
                self.net.serve(name, "LocalMaster", LocalMasterServicer(a))
                self.lms[name] = a
                lms.append(a)
        await asyncio.gather(*(a.start() for a in lms))
        queues = c.queues()
        for g in gms:
            a = GlobalMaster(g, self.net.transport(g), self.clock, lms=lm_inst, queues=queues, store=self.store,
                             params=self.gm_params, cost=c.cost, frontend=c.frontend,
                             known_attributes=tuple(attribute_name(j) for j in range(len(c.attribute_probs))))
            self.net.serve(g, "GlobalMaster", GlobalMasterServicer(a))
            self.gms[g] = a
        await asyncio.gather(*(a.start() for a in self.gms.values()))
        self.frontend = MeghaFrontend(self.gms, name=c.frontend)

    async def _build_sampling(self, rng: np.random.Generator) -> None:
        c = self.cfg
        for mh in self.hosts:
            w = SamplingWorker(mh.name, self.net.transport(mh.name), self.clock,
                               node=LocalTransport({"NodeAgent": mh.servicer}, mh.name))
            self.net.serve(mh.name, "SamplingWorker", SamplingWorkerServicer(w))
            self.workers.append(w)
        await asyncio.gather(*(w.start() for w in self.workers))
        names = [mh.name for mh in self.hosts]
        attrs = [self.attributes[h] for h in names]
        for i in range(c.schedulers or c.gms):
            s = SamplingScheduler(f"s{i + 1}", self.net.transport(f"s{i + 1}"), self.clock,
                                  np.random.default_rng(np.random.SeedSequence([c.seed, 2, i])), hosts=names,
                                  cap_cpu=[c.node_cpu] * len(names), cap_mem=[c.node_mem_mib] * len(names),
                                  attributes=attrs, probes=c.probes, cost=c.cost)
            self.net.serve(s.name, "SamplingScheduler", SamplingSchedulerServicer(s))
            self.schedulers.append(s)
        self.frontend = SamplingFrontend(self.schedulers)

    async def close(self) -> None:
        for a in list(self.gms.values()) + list(self.lms.values()) + self.workers:
            await a.stop()
        for mh in self.hosts:
            await mh.agent.stop()

    # --- observation ---------------------------------------------------------------------------------
    def true_usage(self) -> dict[str, float]:
        """Each user's dominant share of the cell now, from the LMs' true state (or the nodes)."""
        cap_c = self.cfg.node_cpu * self.cfg.nodes
        cap_m = float(self.cfg.node_mem_mib) * self.cfg.nodes
        tot: dict[str, list[float]] = {}
        for a in self.lms.values():
            if a.role == ACTIVE and a.cluster is not None:
                for u, (cc, mm, _) in a.cluster.usage.items():
                    x = tot.setdefault(u, [0.0, 0.0])
                    x[0] += cc
                    x[1] += mm
        return {u: dominant_share(x[0], x[1], cap_c, cap_m) for u, x in tot.items()}

    def check_no_double_allocation(self) -> None:
        """Every model task is on exactly one host, and no host's requests exceed its capacity."""
        seen: dict[str, str] = {}
        for h, b in self.fabric.backends.items():
            cpu = mem = 0.0
            for name, t in b.tasks.items():
                if name in seen:
                    raise AssertionError(f"task {name} runs on {seen[name]} and {h}")
                seen[name] = h
                cpu += t.spec.requested_cpu
                mem += t.spec.mem_mib
            if cpu > self.cfg.node_cpu + 1e-6 or mem > self.cfg.node_mem_mib + 1e-6:
                raise AssertionError(f"{h}: requests {cpu:.3f} cores / {mem:.0f} MiB exceed its capacity")
        for a in self.lms.values():
            if a.role == ACTIVE and a.cluster is not None:
                a.cluster.check_invariants()

    # --- run ------------------------------------------------------------------------------------------
    async def run(self, arr: list[Arrival], drain_s: float = 300.0, sample_period_s: float = 0.0,
                  stop_at_s: float | None = None) -> ModelRunResult:
        """Submit every arrival at its time; then wait (virtual time) until every task has started
        or *drain_s* has passed. *sample_period_s* > 0 samples each user's true share."""
        wall0 = time.perf_counter()
        recs: list[AllocationRecord] = []
        self.frontend.on_record(recs.append)
        t0 = self.clock.monotonic()
        epoch = self.clock.now()
        samples: list[tuple[float, dict[str, float]]] = []
        bg: set[asyncio.Task] = set()
        rejected: Counter = Counter()
        sampler = None
        if sample_period_s > 0:
            async def sample():
                while True:
                    samples.append((self.clock.monotonic() - t0, self.true_usage()))
                    await self.clock.sleep(sample_period_s)
            sampler = asyncio.create_task(sample())

        submitting: dict[str, Arrival] = {}      # arrivals whose submission has not returned yet
        refused: list[Arrival] = []

        async def one(a: Arrival):
            try:
                await self.frontend.submit(a.task)
            except errors.CellbedError as e:
                rejected[type(e).__name__] += 1
                refused.append(a)
            finally:
                submitting.pop(a.task.name, None)
        for a in arr:
            dt = t0 + a.time_s - self.clock.monotonic()
            if dt > 0:
                await self.clock.sleep(dt)
            submitting[a.task.name] = a
            t = asyncio.create_task(one(a))
            bg.add(t)
            t.add_done_callback(bg.discard)
        end = (t0 + stop_at_s) if stop_at_s is not None else None
        deadline = self.clock.monotonic() + drain_s
        while True:
            now = self.clock.monotonic()
            if end is not None and now >= end:
                break
            if end is None and (not self.frontend.unstarted() and not bg) or now >= deadline:
                break
            await self.clock.sleep(min(1.0, max(1e-3, (end or deadline) - now)))
        if sampler is not None:
            sampler.cancel()
        seen = {r.task for r in recs}
        out = list(recs)
        for name, user, arrival, attempts in self.frontend.unstarted():
            if name not in seen:
                seen.add(name)
                out.append(pending(name, user, self.cfg.frontend, arrival, attempts))
        # a run stopped while a submission was on its way: the front-end does not list the task
        # yet, but it arrived, so it is pending too; a refused submission is "rejected"
        for a in list(submitting.values()):
            if a.task.name not in seen:
                seen.add(a.task.name)
                out.append(pending(a.task.name, a.task.user, self.cfg.frontend, epoch + a.time_s, 0))
        for a in refused:
            if a.task.name not in seen:
                seen.add(a.task.name)
                out.append(pending(a.task.name, a.task.user, self.cfg.frontend, epoch + a.time_s, 0,
                                   outcome="rejected"))
        lm_counters: Counter = Counter()
        for a in self.lms.values():
            lm_counters.update(a.counters)
        counters = dict(self.frontend.counters())
        counters.update({f"submit_rejected_{k}": v for k, v in rejected.items()})
        records = [dataclasses.replace(r, arrival_s=r.arrival_s - epoch, start_s=r.start_s - epoch) for r in out]
        return ModelRunResult(self.cfg, records, counters, dict(lm_counters), self.clock.monotonic() - t0,
                              time.perf_counter() - wall0, samples, self.net.stats.requests)


def simulate(cfg: ModelCellConfig, workload: ArrivalConfig | list[Arrival], drain_s: float = 300.0,
             sample_period_s: float = 0.0, check: bool = True, gm_params: GmParams | None = None,
             lm_params: LmParams | None = None) -> ModelRunResult:
    """Build a model cell, run *workload* through it in virtual time, and tear it down."""
    async def main():
        cell = await ModelCell(cfg, gm_params, lm_params).build()
        try:
            arr = workload if isinstance(workload, list) else arrivals(workload, cfg.attribute_probs)
            res = await cell.run(arr, drain_s=drain_s, sample_period_s=sample_period_s)
            if check:
                cell.check_no_double_allocation()
            return res
        finally:
            await cell.close()
    return run_virtual(main())
