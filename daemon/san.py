"""The Node Agent's half of MASB (DESIGN §7, seed 000 Fig. 2): overload detection, SCS,
and the Service Allocation Negotiation with brokers and other node agents, ending in a live
migration through NodeAgent.migrate. It also answers other agents' SAN requests.

Transport, clock and RNG are injected: on a real cell the transport is gRPC + MQTT and each
SAN ends in a libvirt live migration; on a model cell the same code runs in-process in
virtual time on the model backend. Policy (overload, scs, accept, choose) is pure and lives
in cellbed.policy.masb; this module is the mechanism: who to ask, windows, retries, bookkeeping.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import random
from typing import Any, Mapping

import numpy as np

from cellbed.domain import errors, wire
from cellbed.daemon.agent import NodeAgent, spec_from_pb, spec_pb
from cellbed.domain.vm import DomState, MigrationOptions, TimeoutPolicy
from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.policy.masb import accept, overload
from cellbed.policy.masb.choose import Acceptor, order_targets
from cellbed.runtime.decisions import DecisionLog
from cellbed.policy.masb.scs import Candidate, TabuParams, tabu_select
from cellbed.policy.migration.cost import PrecopyParams, precopy
from cellbed.policy.scores import SCORES
from cellbed.policy.scores.asr import node_class
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as mpb, masb_pb2_grpc as mpbg, node_pb2 as pb
from cellbed.broker.agent import report_topic

log = logging.getLogger(__name__)

REASON_PB = {accept.CAPACITY: mpb.REJECTION_REASON_CAPACITY, accept.CONSTRAINTS: mpb.REJECTION_REASON_CONSTRAINTS,
             accept.RUS: mpb.REJECTION_REASON_RUS, accept.OVERLOADED: mpb.REJECTION_REASON_OVERLOADED,
             accept.SAME_HOST: mpb.REJECTION_REASON_SAME_HOST, accept.NO_ANSWER: mpb.REJECTION_REASON_NO_ANSWER,
             accept.GPA: mpb.REJECTION_REASON_GPA}
REASON_NAME = {v: k for k, v in REASON_PB.items()}


@dataclasses.dataclass(frozen=True)
class SanConfig:
    enabled: bool = True
    max_util: float = 0.9                  # of capacity, for use and production requests (RUS)
    rus_threshold_pct: float = 10.0        # a rise above this many points between samples is a spike
    spike_policy: str = "none"             # none | pause | kill  (non-production VMs, on a spike with a breach)
    window_s: float = 30.0                 # step 3 collection window
    recommendation_expiry_s: float = 180.0
    report_period_s: float = 60.0          # NodeReport to the brokers
    max_parallel: int = 4                  # SANs at once on this host
    fit: str = "sum"                       # accept rule CPU test: sum | gpa
    gpa_rho: float = 0.01                  # GPA: accepted probability of exceeding capacity
    gpa_min_samples: int = 100             # GPA: fewer samples -> the sum test
    realloc_score: str = "sras"            # step 4 re-scoring
    scs_score: str = "sras"                # host score after removal, in the SCS fitness
    tabu_restarts: int = 25
    tabu_steps: int = 5
    tabu_patience: int = 6
    log_scs_rate: float = 1 / 50
    log_scoring_rate: float = 1 / 5000
    log_target_rate: float = 1 / 5000
    decision_log: str = ""                 # JSONL path; "" = keep in memory
    migration_bandwidth_mib_s: int = 0     # 0 = unlimited
    max_downtime_ms: int = 0               # 0 = QEMU default
    migration_timeout_s: float = 120.0
    request_timeout_s: float = 10.0
    cost_bandwidth_mib_s: float = 1250.0   # the SCS cost estimate's bandwidth
    keep_recent: int = 200                 # finished negotiations kept for ListNegotiations
    boot_grace_s: float = 0.0              # a VM's first seconds (booting) do not count towards overload
    unmovable_s: float = 300.0             # a task whose SAN found no target is left out of SCS this long
    max_scs_per_round: int = 4             # SCS re-runs (step 1 again) per overload round

    _CHOICES = {"spike_policy": ("none", "pause", "kill"), "fit": ("sum", "gpa"),
                "realloc_score": tuple(SCORES), "scs_score": tuple(SCORES)}

    def validate(self) -> "SanConfig":
        for k, allowed in self._CHOICES.items():
            if getattr(self, k) not in allowed:
                raise InvalidArgument(f"san.{k}={getattr(self, k)!r}: allowed {', '.join(allowed)}")
        check_range("san.max_util", self.max_util, 0.05, 1.0)
        check_range("san.rus_threshold_pct", self.rus_threshold_pct, 0.0, 100.0, "points")
        check_range("san.window_s", self.window_s, 0.001, 3600.0, "s")
        check_range("san.recommendation_expiry_s", self.recommendation_expiry_s, 0.001, 86400.0, "s")
        check_range("san.report_period_s", self.report_period_s, 0.01, 86400.0, "s")
        check_range("san.max_parallel", self.max_parallel, 1, 1000)
        check_range("san.tabu_restarts", self.tabu_restarts, 1, 10_000)
        check_range("san.tabu_steps", self.tabu_steps, 1, 10_000)
        check_range("san.tabu_patience", self.tabu_patience, 1, 10_000)
        for k in ("log_scs_rate", "log_scoring_rate", "log_target_rate"):
            check_range(f"san.{k}", getattr(self, k), 0.0, 1.0)
        check_range("san.cost_bandwidth_mib_s", self.cost_bandwidth_mib_s, 0.001, 1e7, "MiB/s")
        check_range("san.gpa_rho", self.gpa_rho, 1e-6, 0.5)
        check_range("san.gpa_min_samples", self.gpa_min_samples, 2, 1_000_000)
        check_range("san.boot_grace_s", self.boot_grace_s, 0.0, 3600.0, "s")
        check_range("san.unmovable_s", self.unmovable_s, 0.0, 86400.0, "s")
        check_range("san.max_scs_per_round", self.max_scs_per_round, 1, 1000)
        return self

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> "SanConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise InvalidArgument(f"san: unknown key(s) {', '.join(bad)}; allowed: {', '.join(sorted(known))}")
        return cls(**dict(d)).validate()


@dataclasses.dataclass
class Negotiation:
    pb: mpb.Negotiation
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class SanAgent:
    def __init__(self, node: NodeAgent, transport, clock, rng: random.Random, cfg: SanConfig,
                 brokers: list[str], cell: str = "cell", decisions: DecisionLog | None = None) -> None:
        self.node = node
        self.host = node.cfg.host
        self.transport = transport
        self.clock = clock
        self.rng = rng
        self.cfg = cfg.validate()
        self.brokers = list(brokers)
        self.cell = cell
        self.decisions = decisions or DecisionLog(
            cfg.decision_log, {"scs": cfg.log_scs_rate, "scoring": cfg.log_scoring_rate,
                               "target": cfg.log_target_rate}, random.Random(rng.random()), clock, self.host)
        self.counters: collections.Counter = collections.Counter()
        self.active: dict[str, Negotiation] = {}        # vm -> negotiation
        self.recent: collections.deque = collections.deque(maxlen=cfg.keep_recent)
        self._round: asyncio.Task | None = None
        self.unmovable: dict[str, float] = {}           # task -> monotonic time until which SCS skips it
        self._last_report = -math.inf
        self._attrs_pb: tuple[tuple, list] = ((), [])   # (attributes as items, their wire form)
        self._prev_pct: np.ndarray | None = None
        self._seq = 0
        self._sem = asyncio.Semaphore(cfg.max_parallel)
        self.cost = PrecopyParams(bandwidth_mib_s=cfg.cost_bandwidth_mib_s)
        self.tabu = TabuParams(restarts=cfg.tabu_restarts, steps=cfg.tabu_steps, patience=cfg.tabu_patience,
                               max_util=cfg.max_util, score=cfg.scs_score)
        self.migration_opts = MigrationOptions(bandwidth_mib_s=cfg.migration_bandwidth_mib_s,
                                               max_downtime_ms=cfg.max_downtime_ms,
                                               completion_timeout_s=cfg.migration_timeout_s,
                                               timeout_policy=TimeoutPolicy.ABORT)
        self.on_migration = None                        # hook: fn(record) (model-cell metrics)
        self.cpu_stats: dict[str, list[float]] = {}     # vm -> [n, mean, M2] of sampled CPU (GPA)
        from cellbed.policy.scores.gpa import GpaParams
        self.gpa_params = GpaParams(rho=cfg.gpa_rho, min_samples=cfg.gpa_min_samples, max_util=cfg.max_util)
        self.on_refused = None                          # hook: fn(neg, host, forced, detail): step 5 refused

    # --- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        self.node.sample_listeners.append(self.on_sample)

    async def stop(self) -> None:
        if self.on_sample in self.node.sample_listeners:
            self.node.sample_listeners.remove(self.on_sample)
        if self._round is not None:
            self._round.cancel()
            await asyncio.gather(self._round, return_exceptions=True)
        self.decisions.close()

    # --- the host as the policy sees it -----------------------------------------------------
    def capacity(self) -> tuple[float, float]:
        return self.node.cfg.cpu_cores, float(self.node.cfg.mem_mib)

    def prod_requested(self) -> tuple[float, float]:
        cpu = mem = 0.0
        for e in self.node.vms.values():
            if e.spec.production:
                cpu += e.spec.requested_cpu
                mem += e.spec.mem_mib
        for r in self.node.incoming.values():
            if r.spec.production:
                cpu += r.spec.requested_cpu
                mem += r.spec.mem_mib
        return cpu, mem

    def _young(self) -> list:
        """VMs still booting or within boot_grace_s of their start: their CPU is boot noise."""
        now = self.clock.now()
        return [e for e in self.node.vms.values()
                if e.reason == "starting" or (self.cfg.boot_grace_s and now - e.spec.created_unix_s < self.cfg.boot_grace_s)]

    def load(self) -> overload.HostLoad:
        cpu, mem = self.node.used()
        for e in self._young() if self.cfg.boot_grace_s else ():
            cpu -= e.cpu_used_cores
        return overload.HostLoad(self.capacity(), (max(cpu, 0.0), mem), self.prod_requested())

    def target_state(self) -> accept.TargetState:
        cpu_u = mem_u = 0.0
        for e in self.node.vms.values():
            cpu_u += e.cpu_used_cores
            mem_u += e.rss_mib
        inc_c = sum(r.cpu_used for r in self.node.incoming.values())
        inc_m = sum(r.mem_used for r in self.node.incoming.values())
        mean = var = 0.0
        samples = math.inf
        if self.cfg.fit == "gpa":
            for name in self.node.vms:
                m, v, n = self._gpa(name)
                mean, var, samples = mean + m, var + v, min(samples, n)
        return accept.TargetState(self.host, self.capacity(), (cpu_u, mem_u), (inc_c, inc_m), self.prod_requested(),
                                  self.node.cfg.attributes, mean, var, samples)

    def report(self) -> mpb.NodeReport:
        cap, used = self.capacity(), self.node.used()
        mem_req, cpu_req = self.node._allocated()
        pr = self.prod_requested()
        if self.node.vms or self.node.incoming:
            asr = int(node_class(used, cap)) + 1
        else:
            asr = cpb.ASR_CLASS_IDLE
        return mpb.NodeReport(host=self.host, capacity=wire.resources(*cap), used=wire.resources(*used),
                              requested=wire.resources(cpu_req, mem_req), prod_requested=wire.resources(*pr),
                              task_count=len(self.node.vms), attributes=self._attributes_pb(),
                              asr_class=asr, sampled_unix_s=self.clock.now())

    def _attributes_pb(self) -> list:
        key = tuple(self.node.cfg.attributes.items())
        if key != self._attrs_pb[0]:
            self._attrs_pb = (key, wire.attributes_pb(self.node.cfg.attributes))
        return self._attrs_pb[1]

    def publish_report(self) -> None:
        self._last_report = self.clock.monotonic()
        self.transport.publish(report_topic(self.cell, self.host), self.report())
        self.counters["reports"] += 1

    # --- step 1 trigger -------------------------------------------------------------------
    def _update_cpu_stats(self) -> None:
        """Welford running mean/variance of each VM's sampled CPU use, for the GPA fit test.
        (Seed 003 uses 1-s samples; here a sample is one monitor period's mean.)"""
        for name in [n for n in self.cpu_stats if n not in self.node.vms]:
            del self.cpu_stats[name]
        for name, e in self.node.vms.items():
            if e.reason == "starting":
                continue
            st = self.cpu_stats.setdefault(name, [0, 0.0, 0.0])
            st[0] += 1
            d = e.cpu_used_cores - st[1]
            st[1] += d / st[0]
            st[2] += d * (e.cpu_used_cores - st[1])

    def _gpa(self, name: str) -> tuple[float, float, int]:
        st = self.cpu_stats.get(name)
        if not st or st[0] < 2:
            return 0.0, 0.0, 0
        return st[1], st[2] / (st[0] - 1), int(st[0])

    def on_sample(self) -> None:
        if self.cfg.fit == "gpa":
            self._update_cpu_stats()
        if self.clock.monotonic() - self._last_report >= self.cfg.report_period_s - 1e-9:
            self.publish_report()
        load = self.load()
        pct = load.used_pct()
        verdict = overload.check(load, self.cfg.max_util)
        spike = overload.spike(self._prev_pct, pct, self.cfg.rus_threshold_pct)
        self._prev_pct = pct
        if spike:
            self.counters["spikes"] += 1
            if verdict and self.cfg.spike_policy != "none":
                asyncio.ensure_future(self._absorb_spike(spike, verdict))
        if verdict and self.cfg.enabled and (self._round is None or self._round.done()):
            self.counters["overload_detected"] += 1
            self._round = asyncio.ensure_future(self.run_round(verdict))

    async def _absorb_spike(self, spike: str, verdict: overload.Verdict) -> None:
        """Pause or kill non-production VMs (lowest priority, largest CPU first) until use is
        back within max_util, so that production can grow at once."""
        cap = np.asarray(self.capacity())
        limit = self.cfg.max_util * cap
        used = np.asarray(self.node.used())
        victims = sorted((e for n, e in self.node.vms.items() if not e.spec.production and not e.migrating_out
                          and e.state is DomState.RUNNING and n not in self.active),
                         key=lambda e: (e.spec.priority, -e.cpu_used_cores))
        for e in victims:
            if np.all(used <= limit):
                break
            name = e.spec.name
            try:
                if self.cfg.spike_policy == "pause":
                    await self.node.pause_vm(name)
                    used = used - np.array([e.cpu_used_cores or 0.0, 0.0])
                else:
                    freed = np.array([e.cpu_used_cores, e.rss_mib])
                    await self.node.stop_vm(name)
                    used = used - freed
            except errors.CellbedError as exc:
                log.warning("%s: spike policy could not %s %s: %s", self.host, self.cfg.spike_policy, name, exc)
                continue
            self.counters[f"spike_{self.cfg.spike_policy}"] += 1
            self.node.emit(pb.EVENT_KIND_SPIKE_ACTION, name, f"{self.cfg.spike_policy} on spike ({spike}); "
                                                              + "; ".join(verdict.reasons))

    # --- SAN rounds --------------------------------------------------------------------------
    def _candidates(self) -> tuple[list[Candidate], np.ndarray, np.ndarray]:
        """SCS input: tasks that may move, and the host's use and production requests net of
        tasks already being negotiated away."""
        used = np.asarray(self.load().used, dtype=float)
        prod = np.asarray(self.prod_requested(), dtype=float)
        young = {id(e) for e in self._young()} if self.cfg.boot_grace_s else set()
        now = self.clock.monotonic()
        for n in [n for n, t in self.unmovable.items() if t <= now or n not in self.node.vms]:
            del self.unmovable[n]
        out = []
        for name, e in self.node.vms.items():
            if id(e) in young or name in self.unmovable:
                continue
            if name in self.active or e.migrating_out:
                tu = np.array([e.cpu_used_cores, e.rss_mib])
                used = used - tu
                if e.spec.production:
                    prod = prod - np.array([e.spec.requested_cpu, e.spec.mem_mib])
                continue
            if e.state is not DomState.RUNNING:
                continue
            s = e.spec
            dirty = s.dirty_mib_s if not math.isinf(s.dirty_mib_s) else 1e6
            cost = precopy(s.mem_mib, s.wss_mib, dirty, self.cost).bytes / 2**20
            compulsory = bool(s.constraints) and not all(c.matches(self.node.cfg.attributes) for c in s.constraints)
            out.append(Candidate(name, (e.cpu_used_cores, e.rss_mib), max(cost, 1e-3), compulsory,
                                 (s.requested_cpu, float(s.mem_mib)) if s.production else (0.0, 0.0)))
        return out, np.maximum(used, 0.0), np.maximum(prod, 0.0)

    async def run_round(self, verdict: overload.Verdict | None = None) -> None:
        """Steps 1–5 until the host is no longer overloaded or nothing more can be done. A task
        whose SAN found no target is left out of the next SCS runs (the paper's "likelihood of
        finding an alternative node"), so step 1 picks others."""
        for _ in range(self.cfg.max_scs_per_round):
            detected = self.clock.now()
            load = self.load()
            verdict = overload.check(load, self.cfg.max_util)
            if not verdict:
                return
            cands, used, prod = self._candidates()
            if not cands:
                self.counters["scs_nothing_movable"] += 1
                return
            cap = self.capacity()
            sel = tabu_select(cap, used, cands, self.rng, self.tabu, prod)
            self.counters["scs_runs"] += 1
            self.decisions.maybe("scs", lambda: {
                "host": self.host, "capacity": cap, "used": used, "prod_requested": prod,
                "reasons": verdict.reasons, "tasks": [dataclasses.asdict(c) for c in cands],
                "selected": sel.names, "compulsory": sel.compulsory, "fitness": sel.fitness,
                "feasible": sel.feasible, "evaluations": sel.evaluations, "score_after": sel.score_after})
            if not sel.names:
                if any(True for _ in self.active):
                    return      # negotiations in flight already cover the excess
                self.counters["scs_empty"] += 1
                return
            by_name = {c.name: c for c in cands}
            detail = (f"overloaded ({'; '.join(verdict.reasons)}); selected {len(sel.names)} of {len(cands)}: "
                      f"{', '.join(sel.names)} (fitness {sel.fitness:.4g}, feasible {sel.feasible}, "
                      f"{sel.evaluations} evaluations)")
            results = await asyncio.gather(*(self.negotiate(n, detail, by_name[n], detected) for n in sel.names),
                                           return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    log.error("%s: negotiation failed with %r", self.host, r)
            if not any(r is True for r in results) and not any(n in self.unmovable for n in sel.names):
                return          # nothing moved and nothing new to try: again at the next sample

    def _step(self, neg: mpb.Negotiation, kind: str, host: str = "", detail: str = "") -> None:
        neg.steps.add(unix_s=self.clock.now(), kind=kind, host=host, detail=detail)
        self.node.emit(pb.EVENT_KIND_SAN_STEP, neg.vm, f"{neg.san_id} {kind} {host} {detail}".strip())

    def _finish(self, neg: mpb.Negotiation, state: str, detail: str = "") -> None:
        neg.state, neg.ended_unix_s = state, self.clock.now()
        if state == "gave-up" and self.cfg.unmovable_s:
            self.unmovable[neg.vm] = self.clock.monotonic() + self.cfg.unmovable_s
        self._step(neg, "done", neg.target, f"{state}{': ' + detail if detail else ''}")
        self.counters[f"sans_{state}"] += 1
        self.active.pop(neg.vm, None)
        self.recent.append(neg)

    def task_info(self, name: str) -> mpb.TaskInfo:
        e = self.node.vms.get(name)
        if e is None:
            raise errors.NotFound(f"task {name!r} is not on host {self.host}")
        s = e.spec
        m, v, n = self._gpa(name)
        return mpb.TaskInfo(name=name, used=wire.resources(e.cpu_used_cores, e.rss_mib),
                            cpu_mean=m, cpu_var=v, cpu_samples=n,
                            requested=wire.resources(s.requested_cpu, s.mem_mib),
                            constraints=wire.constraints_pb(s.constraints), production=s.production,
                            priority=s.priority, mem_mib=s.mem_mib, wss_mib=s.wss_mib,
                            dirty_mib_s=-1 if math.isinf(s.dirty_mib_s) else s.dirty_mib_s)

    async def negotiate(self, name: str, scs_detail: str = "", cand: Candidate | None = None,
                        detected_unix_s: float = 0.0) -> bool:
        """One SAN for task *name* (steps 2–5). True if it migrated. *detected_unix_s*: when
        the overload that led to it was detected (the negotiation's start)."""
        if name in self.active or name not in self.node.vms:
            return False
        self._seq += 1
        neg = mpb.Negotiation(san_id=f"{self.host}-{self._seq}-{self.rng.getrandbits(24):06x}", vm=name,
                              src_host=self.host, state="active", started_unix_s=detected_unix_s or self.clock.now())
        self.active[name] = Negotiation(neg)
        self.counters["sans_started"] += 1
        self._step(neg, "scs", "", scs_detail)
        try:
            async with self._sem:
                return await self._negotiate(neg, name)
        except asyncio.CancelledError:
            if neg.state == "active":
                self._finish(neg, "cancelled")
            raise
        except errors.CellbedError as exc:
            if neg.state == "active":
                gone = name not in self.node.vms
                self._finish(neg, "cancelled" if gone else "failed", "the task ended" if gone else str(exc))
            return False

    async def negotiate_now(self, name: str) -> mpb.Negotiation:
        if not name:
            raise InvalidArgument("name must be set")
        e = self.node.vms.get(name)
        if e is None:
            raise errors.NotFound(f"task {name!r} is not on host {self.host}")
        if name in self.active:
            raise errors.FailedPrecondition(f"task {name} is already being negotiated ({self.active[name].pb.san_id})")
        if e.state is not DomState.RUNNING or e.migrating_out:
            raise errors.FailedPrecondition(f"task {name} is {e.state.value} ({e.reason}); only running tasks move")
        await self.negotiate(name, "requested by an operator (NegotiateTask)")
        for n in reversed(self.recent):
            if n.vm == name:
                return n
        raise errors.CellbedError(f"negotiation of {name} left no record")

    async def _ask_broker(self, req: mpb.GetCandidateNodesRequest) -> mpb.GetCandidateNodesResponse | None:
        order = list(self.brokers)
        self.rng.shuffle(order)
        for b in order:
            try:
                return await self.transport.request(b, "BrokerAgent/GetCandidateNodes", req,
                                                    timeout=self.cfg.request_timeout_s)
            except (errors.Unavailable, errors.DeadlineExceeded) as exc:
                self.counters["broker_unreachable"] += 1
                log.info("%s: broker %s unreachable (%s); trying another", self.host, b, exc)
        return None

    async def _negotiate(self, neg: mpb.Negotiation, name: str) -> bool:
        task = self.task_info(name)
        # step 2: candidates
        resp = await self._ask_broker(mpb.GetCandidateNodesRequest(task=task, src_host=self.host, san_id=neg.san_id))
        if resp is None:
            self._finish(neg, "gave-up", f"no broker reachable of {len(self.brokers)}")
            return False
        recs = [r for r in resp.recommendations if r.host != self.host]
        self.counters["candidates"] += len(recs)
        self._step(neg, "candidates", resp.broker,
                   f"{len(recs)} of {resp.matched} matching ({resp.scanned} scanned): "
                   + ", ".join(f"{r.host}{'*' if r.force_migration else ''}:{r.fitness:.3f}" for r in recs))
        if not recs:
            self._finish(neg, "gave-up", "no candidates")
            return False
        # step 3: ask every candidate at once; the window ends early when all have answered
        self._step(neg, "request", "", f"TaskMigrationRequest to {len(recs)}")
        forced = {r.host: r.force_migration for r in recs}
        jobs = {asyncio.ensure_future(self.transport.request(
            r.host, "San/RequestTaskMigration",
            mpb.TaskMigrationRequest(san_id=neg.san_id, src_host=self.host, task=task,
                                     force_migration=r.force_migration),
            timeout=self.cfg.window_s)): r.host for r in recs}
        done, pending = await asyncio.wait(jobs, timeout=self.cfg.window_s)
        for j in pending:
            j.cancel()
        acceptors: list[Acceptor] = []
        for j, host in jobs.items():
            if j in pending or j.cancelled() or j.exception() is not None:
                why = "no answer within the window" if (j in pending or j.cancelled()) else str(j.exception())
                self.counters["rejections_no_answer"] += 1
                self._step(neg, "rejection", host, f"no_answer: {why}")
                continue
            ans: mpb.TaskMigrationResponse = j.result()
            if ans.HasField("acceptance"):
                a = ans.acceptance
                acceptors.append(Acceptor(host, (a.capacity.cpu_cores, a.capacity.mem_mib),
                                          (a.used.cpu_cores, a.used.mem_mib), forced[host]))
                self.counters["acceptances"] += 1
                self._step(neg, "acceptance", host, f"used {a.used.cpu_cores:.3f} cores / {a.used.mem_mib:.0f} MiB "
                                                    f"of {a.capacity.cpu_cores:.3f} / {a.capacity.mem_mib:.0f}")
            else:
                rj = ans.rejection
                reason = REASON_NAME.get(rj.reason, "unspecified")
                self.counters[f"rejections_{reason}"] += 1
                self._step(neg, "rejection", host, f"{reason}: {rj.detail}")
        for j in pending:
            await asyncio.gather(j, return_exceptions=True)
        if not acceptors:
            self._finish(neg, "gave-up", "every candidate rejected")
            return False
        # step 4: re-score and order (forced last); the order is the retry list
        tu = (task.used.cpu_cores, task.used.mem_mib)
        order = order_targets(acceptors, tu, self.rng, self.cfg.realloc_score)
        self.decisions.maybe("target", lambda: {"san_id": neg.san_id, "task": name, "task_used": tu,
                                                 "order": [(a.host, s, a.forced, a.used, a.capacity)
                                                           for a, s in order]})
        expires = self.clock.monotonic() + self.cfg.recommendation_expiry_s
        # step 5: process, then migrate; next candidate on refusal or failure
        for a, score in order:
            if self.clock.monotonic() > expires:
                self.counters["recommendations_expired"] += 1
                self._finish(neg, "gave-up", f"recommendations expired after {self.cfg.recommendation_expiry_s:g} s")
                return False
            e = self.node.vms.get(name)
            if e is None:
                self._finish(neg, "cancelled", "the task ended")
                return False
            mid = f"{neg.san_id}-{self.rng.getrandbits(32):08x}"
            task = self.task_info(name)
            try:
                pr = await self.transport.request(a.host, "San/ProcessTaskMigration", mpb.TaskMigrationProcessRequest(
                    san_id=neg.san_id, src_host=self.host, task=task, spec=spec_pb(e.spec),
                    force_migration=a.forced, migration_id=mid), timeout=self.cfg.request_timeout_s)
            except errors.CellbedError as exc:
                self.counters["process_errors"] += 1
                self._step(neg, "refused", a.host, str(exc))
                if self.on_refused is not None:
                    self.on_refused(neg, a.host, a.forced, str(exc))
                continue
            if not pr.accepted:
                self.counters["collisions"] += 1
                detail = f"{REASON_NAME.get(pr.rejection.reason, '?')}: {pr.rejection.detail}"
                self._step(neg, "refused", a.host, detail)
                if self.on_refused is not None:
                    self.on_refused(neg, a.host, a.forced, detail)
                continue
            self._step(neg, "process", a.host, f"{'forced ' if a.forced else ''}score {score:.3f}, reservation {mid}")
            try:
                rec = await self.node.migrate(name, a.host, self.migration_opts, prepared_mid=mid)
            except errors.CellbedError as exc:
                self.counters["migrations_failed"] += 1
                self._step(neg, "failed", a.host, str(exc))
                await self._release(a.host, mid, name)
                if name not in self.node.vms:
                    self._finish(neg, "failed", "the task left this host")
                    return False
                continue
            if self.on_migration is not None:
                self.on_migration(rec, neg, a.forced)
            if rec.outcome == pb.MIGRATION_OUTCOME_SUCCEEDED:
                self.counters["migrations_succeeded"] += 1
                self.counters["bytes_moved"] += rec.data_total_bytes
                neg.target = a.host
                self._step(neg, "migrated", a.host, f"{rec.data_total_bytes} B in {rec.time_elapsed_ms:.0f} ms, "
                                                    f"downtime {rec.downtime_ms:.0f} ms")
                self._finish(neg, "migrated")
                return True
            self.counters["migrations_failed"] += 1
            self._step(neg, "failed", a.host, f"{pb.MigrationOutcome.Name(rec.outcome)}: {rec.detail}")
            if name not in self.node.vms:
                self._finish(neg, "failed", "the task left this host unverified")
                return False
        self._finish(neg, "gave-up", f"all {len(order)} acceptor(s) refused or failed")
        return False

    async def _release(self, host: str, mid: str, name: str) -> None:
        try:
            await self.transport.request(host, "NodeAgent/FinishIncoming", pb.FinishIncomingRequest(
                migration_id=mid, name=name, migrated=False), timeout=self.cfg.request_timeout_s)
        except errors.NotFound:
            pass   # NodeAgent.migrate already released it
        except errors.CellbedError as exc:
            log.warning("%s: could not release reservation %s on %s: %s", self.host, mid, host, exc)

    # --- the target's side ------------------------------------------------------------------
    def _demand(self, t: mpb.TaskInfo) -> accept.TaskDemand:
        if not t.name:
            raise InvalidArgument("task.name must be set")
        vals = (t.used.cpu_cores, t.used.mem_mib, t.requested.cpu_cores, t.requested.mem_mib)
        if not all(math.isfinite(v) and v >= 0 for v in vals):
            raise InvalidArgument(f"task {t.name}: used ({vals[0]}, {vals[1]}) and requested ({vals[2]}, {vals[3]}) "
                                  f"are out of range: allowed ≥ 0 cores and ≥ 0 MiB")
        if not (math.isfinite(t.cpu_mean) and t.cpu_mean >= 0 and math.isfinite(t.cpu_var) and t.cpu_var >= 0):
            raise InvalidArgument(f"task {t.name}: cpu_mean={t.cpu_mean}, cpu_var={t.cpu_var} are out of range: "
                                  "allowed ≥ 0")
        return accept.TaskDemand(t.name, (t.used.cpu_cores, t.used.mem_mib),
                                 (t.requested.cpu_cores, t.requested.mem_mib), t.production,
                                 wire.constraints_from_pb(t.constraints), t.cpu_mean, t.cpu_var, t.cpu_samples)

    def answer(self, req: mpb.TaskMigrationRequest) -> mpb.TaskMigrationResponse:
        if not req.san_id or not req.src_host:
            raise InvalidArgument("san_id and src_host must be set")
        d = self._demand(req.task)
        self.counters["requests_received"] += 1
        if d.name in self.node.vms or req.src_host == self.host:
            a = accept.Answer(False, accept.SAME_HOST, f"{self.host}: task {d.name} is already here")
        elif not req.force_migration and overload.check(self.load(), self.cfg.max_util):
            a = accept.Answer(False, accept.OVERLOADED, f"{self.host}: overloaded itself: "
                              + "; ".join(overload.check(self.load(), self.cfg.max_util).reasons))
        else:
            a = accept.evaluate(self.target_state(), d, self.cfg.max_util, self.cfg.fit, gpa=self.gpa_params, forced=req.force_migration)
        if a.accepted:
            self.counters["accepted"] += 1
            st = self.target_state()
            used = (st.used[0] + st.incoming_used[0], st.used[1] + st.incoming_used[1])
            return mpb.TaskMigrationResponse(acceptance=mpb.TaskMigrationAcceptanceResponse(
                host=self.host, capacity=wire.resources(*st.capacity), used=wire.resources(*used),
                sampled_unix_s=self.clock.now()))
        self.counters[f"rejected_{a.reason}"] += 1
        return mpb.TaskMigrationResponse(rejection=self._rejection(a))

    def _rejection(self, a: accept.Answer) -> mpb.TaskMigrationRejectionResponse:
        return mpb.TaskMigrationRejectionResponse(host=self.host, reason=REASON_PB[a.reason], detail=a.detail,
                                                  projected=wire.resources(*a.projected),
                                                  limit=wire.resources(*a.limit))

    async def process(self, req: mpb.TaskMigrationProcessRequest) -> mpb.TaskMigrationProcessResponse:
        if not req.migration_id or not req.src_host:
            raise InvalidArgument("migration_id and src_host must be set")
        d = self._demand(req.task)
        spec = spec_from_pb(req.spec)
        if spec.name != d.name:
            raise InvalidArgument(f"spec.name={spec.name!r} must equal task.name={d.name!r}")
        def final_check() -> None:     # runs under the node's admission lock: the first request wins
            if d.name in self.node.vms:
                ans = accept.Answer(False, accept.SAME_HOST, f"{self.host}: task {d.name} is already here")
            else:
                ans = accept.evaluate(self.target_state(), d, self.cfg.max_util, self.cfg.fit, gpa=self.gpa_params,
                                      forced=req.force_migration)
            if not ans.accepted:
                raise _Refused(ans)

        try:   # reserve (the node checks constraints and total capacity again)
            await self.node.prepare_incoming(spec, req.src_host, req.migration_id, True, d.used[0], d.used[1],
                                             precheck=final_check)
        except _Refused as r:
            self.counters["process_refused"] += 1
            return mpb.TaskMigrationProcessResponse(accepted=False, rejection=self._rejection(r.answer))
        self.counters["process_accepted"] += 1
        return mpb.TaskMigrationProcessResponse(accepted=True)

    def negotiations(self, limit: int = 0) -> mpb.ListNegotiationsResponse:
        recent = list(self.recent)[::-1]
        if limit:
            recent = recent[:limit]
        return mpb.ListNegotiationsResponse(host=self.host, negotiations=[n.pb for n in self.active.values()] + recent,
                                            counters=dict(self.counters))


class _Refused(Exception):
    def __init__(self, answer: accept.Answer) -> None:
        super().__init__(answer.detail)
        self.answer = answer


class SanServicer(mpbg.SanServicer):
    def __init__(self, san: SanAgent) -> None:
        self.san = san

    @handles_errors
    async def RequestTaskMigration(self, request, context):
        return self.san.answer(request)

    @handles_errors
    async def ProcessTaskMigration(self, request, context):
        return await self.san.process(request)

    @handles_errors
    async def NegotiateTask(self, request, context):
        return mpb.NegotiateTaskResponse(negotiation=await self.san.negotiate_now(request.name))

    @handles_errors
    async def ListNegotiations(self, request, context):
        return self.san.negotiations(request.limit)
