"""The Megha front-ends of the model cell: ``megha`` (G GMs × L LMs), ``central`` (1 × 1) and
``sampling`` (Sparrow-style power-of-d probing) on homogeneous model hosts, every task's
allocation time and its parts recorded (seed 001 eq. 1–2).

    res = simulate(megha_cell(frontend="megha", nodes=1000, gms=4, lms=10),      # cellbed.model.simulate
                   ArrivalConfig(duration_s=30, job_rate_per_s=40, users=...))

The GMs, LMs, sampling agents and NodeAgents are built by :mod:`cellbed.assembly`, as on a real
cell; the processing-cost model is the virtual clock's (``Clock.charge``).
"""
from __future__ import annotations

import asyncio
import dataclasses

import numpy as np

from cellbed import assembly
from cellbed.controller.megha.frontend import MeghaFrontend as GmSubmitter, SamplingFrontend
from cellbed.controller.megha.lm_wire import ACTIVE
from cellbed.controller.megha.params import GmParams, LmParams
from cellbed.controller.megha.queues import MemoryQueueStore
from cellbed.controller.megha.workload import Arrival, node_attributes
from cellbed.domain import wire
from cellbed.domain.config import check_keys
from cellbed.domain.errors import InvalidArgument
from cellbed.model.megha_run import JobsWorkload, ModelRunResult, run_arrivals, run_jobs, run_stream
from cellbed.model.megha_stream import CPU_SCALE_CORES, MEM_SCALE_MIB, Machine
from cellbed.model.front import Front
from cellbed.model.params import MIN_HOST_CPU, MIN_HOST_MEM_MIB, MeghaParams, ModelCellParams
from cellbed.policy.megha.fairness import QueueConfig, dominant_share
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.workload.generator import attribute_name

__all__ = ["MeghaFront", "ModelRunResult", "megha_cell", "megha_queues", "megha_users"]

_COMMON = ("frontend", "nodes", "seed", "latency_s", "jitter_s", "monitor_period_s", "duration_s", "tick_s")


def megha_cell(**kw) -> ModelCellParams:
    """Model-cell parameters for a Megha front-end from one flat set of keywords: the common ones
    (frontend, nodes, seed, latency_s, jitter_s, monitor_period_s) and the :class:`MeghaParams`."""
    known = set(_COMMON) | {f.name for f in dataclasses.fields(MeghaParams)}
    check_keys(kw, known, "megha_cell")
    common = {"frontend": "megha", "jitter_s": 0.0, "monitor_period_s": 3600.0,
              **{k: v for k, v in kw.items() if k in _COMMON}}
    return ModelCellParams(**common, megha=MeghaParams(**{k: v for k, v in kw.items() if k not in _COMMON}))


def megha_queues(p: ModelCellParams) -> list[QueueConfig]:
    """The users' queues and their GMs: the configured shares, or one equal queue per GM
    (per scheduler for sampling)."""
    g, m = p.n_gms, p.megha
    if m.shares:
        return [QueueConfig(u, s, f"gm{(m.queue_gm[i] if m.queue_gm else i % g) + 1}")
                for i, (u, s) in enumerate(m.shares)]
    n = g if p.frontend != "sampling" else (m.schedulers or m.gms)
    return [QueueConfig(f"u{i + 1}", 1.0 / n, f"gm{i % g + 1}") for i in range(n)]


def megha_users(p: ModelCellParams) -> tuple[str, ...]:
    return tuple(q.user for q in megha_queues(p))


def node_caps(m, n: int) -> list[tuple[float, int]]:
    """Every host's (cores, MiB): the node classes in host order, or the homogeneous node."""
    if not m.node_classes:
        return [(m.node_cpu, m.node_mem_mib)] * n
    caps = [(float(c), int(mem)) for k, c, mem in m.node_classes for _ in range(int(k))]
    if len(caps) != n:
        raise InvalidArgument(f"node classes hold {len(caps)} nodes, the cell has {n}")
    return caps


class MeghaFront(Front):
    """GMs and LMs (or sampling schedulers and workers) over the cell's model hosts."""

    def __init__(self, cell, gm_params: GmParams | None = None, lm_params: LmParams | None = None,
                 host_attributes: list[dict] | None = None) -> None:
        """*host_attributes*: one dict per node, instead of the seeded draw (tests)."""
        super().__init__(cell)
        self.m = cell.p.megha
        self._host_attributes = host_attributes
        self.gm_params = gm_params or GmParams(fairness=self.m.fairness, lost_launch_check_s=0.0)
        self.lm_params = lm_params or LmParams(update_period_s=self.m.update_period_s)
        self.lms: dict = {}
        self.gms: dict = {}
        self.store = MemoryQueueStore()
        self.workers: list = []
        self.schedulers: list = []
        self.submitter = None
        self.lm_hosts: dict[str, list[str]] = {}
        self.attributes: dict[str, dict] = {}
        self.all_hosts: dict = {}                  # every host built; cell.hosts holds those in the cell now
        self.capacity: dict[str, tuple[float, float]] = {}   # host -> (cores, MiB) now; (0, 0) while out
        self.machine_host: dict[int, str] = {}     # stream machine -> the host standing for it

    def queues(self) -> list[QueueConfig]:
        return megha_queues(self.p)

    @property
    def users(self) -> tuple[str, ...]:
        return megha_users(self.p)

    # --- build ------------------------------------------------------------------------------------
    def _draw_attributes(self, names: list[str], rng: np.random.Generator) -> None:
        p, m = self.p, self.m
        k = max(1, min(m.attribute_clusters, p.nodes))
        for j in range(k):
            block = names[j * p.nodes // k:(j + 1) * p.nodes // k]
            for h, a in zip(block, node_attributes(len(block), rng, m.attribute_probs, float(rng.uniform(0.7, 1.3)))):
                self.attributes[h] = a
        if self._host_attributes is not None:
            if len(self._host_attributes) != p.nodes:
                raise InvalidArgument(f"host_attributes has {len(self._host_attributes)} entries, nodes = {p.nodes}")
            self.attributes = dict(zip(names, (dict(a) for a in self._host_attributes)))

    def stream_capacity(self, cpu: float, mem: float) -> tuple[float, int]:
        """A stream machine's normalised capacity in cores and MiB (at least the smallest host)."""
        return max(MIN_HOST_CPU, cpu * CPU_SCALE_CORES), max(MIN_HOST_MEM_MIB, int(mem * MEM_SCALE_MIB))

    async def build(self, machines: list[Machine] | None = None) -> "MeghaFront":
        """Build the cell. ``megha.machines = "stream"`` (a trace): the hosts are *machines* (the
        stream's, :class:`~cellbed.model.megha_stream.StreamPlan`), each with its capacity and
        attributes; those not there at 0 s start out of the cell. Otherwise the homogeneous cell
        of ``nodes`` hosts with drawn attributes, the stream's first machines standing for them
        in order (for their joins and leaves)."""
        p, m = self.p, self.m
        env = self.cell.make_env(cost=m.cost.seconds if m.cost is not None else None)
        rng = np.random.default_rng(np.random.SeedSequence([p.seed, 1]))
        stream = m.machines == "stream"
        if stream and not machines:
            raise InvalidArgument("megha.machines = 'stream' needs the stream's machines: the stream adds none")
        n = len(machines) if stream else p.nodes
        width = max(5, len(str(n)))
        names = [f"h{i:0{width}d}" for i in range(1, n + 1)]
        if stream:
            caps = {h: self.stream_capacity(mc.cpu, mc.mem) for h, mc in zip(names, machines)}
            self.attributes = {h: dict(mc.attributes) for h, mc in zip(names, machines)}
            absent = {h for h, mc in zip(names, machines) if not mc.present}
        else:
            self._draw_attributes(names, rng)
            caps = dict(zip(names, node_caps(m, n)))
            absent = set()
        self.machine_host = {mc.node_id: h for mc, h in zip(machines or (), names)}
        self.capacity = {h: ((0.0, 0.0) if h in absent else caps[h]) for h in names}
        L = min(p.n_lms, n)
        for j in range(L):
            self.lm_hosts[f"lm{j + 1}"] = names[j * n // L:(j + 1) * n // L]
        hosts = await asyncio.gather(*(assembly.model_host(env, assembly.model_config(
            h, caps[h][0], caps[h][1], self.attributes[h], monitor_period_s=p.monitor_period_s,
            admission="requested", boot_timeout_s=p.boot_timeout_s)) for h in names))
        for h in hosts:
            self.all_hosts[h.name] = h
            if h.name not in absent:
                self.cell.hosts[h.name] = h
        background = self._background(rng) if m.background_fill > 0 else []
        if p.frontend == "sampling":
            await self._build_sampling(absent)
            by_host = {w.host: w for w in self.workers}
            await asyncio.gather(*(by_host[h].place_direct(t) for h, t in background))
        else:
            await self._build_megha(absent)
            await self._fill(background)
        return self

    async def _fill(self, background: list) -> None:
        lm_of = {h: lm for lm, hs in self.lm_hosts.items() for h in hs}
        await asyncio.gather(*(self.lms[lm_of[h]].place_direct(t, h) for h, t in background))
        if background:
            # The GMs took their views at start, before this fill: without an update now they
            # would place on an empty cell until each LM's first periodic update (up to
            # update_period_s), and every LM would refuse their first requests as stale.
            for a in self.lms.values():
                a.publish_state()
            await self.clock.sleep(4 * (self.p.latency_s + self.p.jitter_s) + 1e-3)

    def _background(self, rng: np.random.Generator) -> list[tuple[str, meghapb.MeghaTask]]:
        """A warm cell: tasks of user "background" on every node, a random share of its CPU each
        (uniform, mean background_fill), ending at random times in background_s. They are
        placed directly (not through the front-end), the same for every front-end."""
        m = self.m
        out = []
        lo, hi = m.background_s
        for mh in self.host_list:
            cap_c, cap_m = self.capacity[mh.name]
            left = min(0.95, float(rng.uniform(0.0, 2 * m.background_fill))) * cap_c
            k = 0
            while left >= 0.25:
                cpu = min(left, float(rng.choice([0.25, 0.5, 1.0])))
                k += 1
                out.append((mh.name, meghapb.MeghaTask(
                    name=f"bg-{mh.name}-{k}", user="background", duration_s=float(rng.uniform(lo, hi)),
                    request=wire.resources(cpu, max(1, int(cap_m * cpu / cap_c))),
                    workload=npb.Workload(cpu_load=0.0))))
                left -= cpu
        return out

    async def _build_megha(self, absent: set[str] = frozenset()) -> None:
        p, env = self.p, self.cell.env
        gms = [f"gm{i + 1}" for i in range(p.n_gms)]
        lm_inst: dict[str, list[str]] = {}
        lms = []
        for lm, hosts in self.lm_hosts.items():
            inst = [lm] + ([f"{lm}b"] if self.m.standby else [])
            lm_inst[lm] = inst
            for k, name in enumerate(inst):
                a, _ = assembly.build_lm(env, lm, name, hosts=hosts, gms=gms, standby=k > 0,
                                         peer=(inst[1 - k] if len(inst) > 1 else ""), cell="cell",
                                         params=self.lm_params)
                self.lms[name] = a
                lms.append(a)
        await asyncio.gather(*(a.start() for a in lms))
        for h in sorted(absent):                   # out of the cell until the stream adds it
            self.lm_for(h).update_host(h, 0.0, 0.0)
        queues = self.queues()
        known = tuple(attribute_name(j) for j in range(len(self.m.attribute_probs)))
        for g in gms:
            self.gms[g], _ = assembly.build_gm(env, g, lms=lm_inst, queues=queues, store=self.store, cell="cell",
                                               params=self.gm_params, frontend=p.frontend, known_attributes=known)
        await asyncio.gather(*(a.start() for a in self.gms.values()))
        self.submitter = GmSubmitter(self.gms, name=p.frontend)

    async def _build_sampling(self, absent: set[str] = frozenset()) -> None:
        m, env = self.m, self.cell.env
        for mh in self.all_hosts.values():
            w, _ = assembly.build_sampling_worker(env, mh)
            self.workers.append(w)
        await asyncio.gather(*(w.start() for w in self.workers))
        for w in self.workers:
            if w.host in absent:
                w.set_capacity(0.0, 0.0)
        names = list(self.all_hosts)
        attrs = [self.attributes[h] for h in names]
        for i in range(m.schedulers or m.gms):
            s, _ = assembly.build_sampling_scheduler(
                env, f"s{i + 1}", i, hosts=names, cap_cpu=[self.capacity[h][0] for h in names],
                cap_mem=[self.capacity[h][1] for h in names], attributes=attrs, probes=m.probes)
            self.schedulers.append(s)
        self.submitter = SamplingFrontend(self.schedulers)

    async def close(self) -> None:
        for a in list(self.gms.values()) + list(self.lms.values()) + self.workers:
            await a.stop()
        for mh in self.all_hosts.values():
            await mh.agent.stop()

    def lm_for(self, host: str):
        """The active instance of the LM whose cluster holds *host*."""
        lm = next(lm for lm, hs in self.lm_hosts.items() if host in hs)
        inst = [a for a in self.lms.values() if a.lm == lm]
        return next((a for a in inst if a.role == ACTIVE), inst[0])

    def worker_for(self, host: str):
        return next(w for w in self.workers if w.host == host)

    # --- observation ---------------------------------------------------------------------------------
    def true_usage(self) -> dict[str, float]:
        """Each user's dominant share of the cell now, from the LMs' true state."""
        cap_c = sum(c for c, _ in self.capacity.values())
        cap_m = float(sum(m for _, m in self.capacity.values()))
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
        for h, b in self.cell.fabric.backends.items():
            cpu = mem = 0.0
            for name, t in b.tasks.items():
                if name in seen:
                    raise AssertionError(f"task {name} runs on {seen[name]} and {h}")
                seen[name] = h
                cpu += t.spec.requested_cpu
                mem += t.spec.mem_mib
            cap_c, cap_m = self.capacity.get(h, (self.m.node_cpu, self.m.node_mem_mib))
            if cpu > cap_c + 1e-6 or mem > cap_m + 1e-6:
                raise AssertionError(f"{h}: requests {cpu:.3f} cores / {mem:.0f} MiB exceed its capacity")
        for a in self.lms.values():
            if a.role == ACTIVE and a.cluster is not None:
                a.cluster.check_invariants()

    # --- runs -------------------------------------------------------------------------------------------
    async def run_arrivals(self, arr: list[Arrival], drain_s: float = 300.0, sample_period_s: float = 0.0,
                           stop_at_s: float | None = None) -> ModelRunResult:
        return await run_arrivals(self, arr, drain_s=drain_s, sample_period_s=sample_period_s, stop_at_s=stop_at_s)

    async def run(self, events):
        """The model cell's run: the scenario's GCD-shaped stream (see :func:`run_stream`), or
        the Megha paper's Poisson jobs (a :class:`JobsWorkload`, see :func:`run_jobs`)."""
        if isinstance(events, JobsWorkload):
            return await run_jobs(self, events)
        return await run_stream(self, events)
