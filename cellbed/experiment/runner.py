"""The experiment runner behind ``cellctl run SCENARIO.toml`` (DESIGN §10.4, §12; issue 5).

    result = run_scenario(load_scenario("scenarios/smoke.toml", ["run.seed=7"]), "results/smoke")

One scenario → one results folder: ``manifest.json`` (the scenario resolved, every stage's
policy, the cell parameters the runner chose, versions, git revision), ``events.jsonl``
(``run_started`` … ``run_completed`` with the summary), ``ticks.csv``, ``migrations.csv``,
``allocations.csv``, then ``report.md`` with its plots.

Dispatch (one driver per kind of cell and front-end; :data:`DRIVERS`):

* model cell, ``masb`` / ``bestfit``: :class:`cellbed.model.cell.ModelCell` in virtual time
  (the same NodeAgent, SanAgent and BrokerAgent code as a real cell), fed by the scenario's
  generator or trace;
* model cell, ``megha`` / ``central`` / ``sampling``: the Megha model cell
  (:mod:`cellbed.controller.megha.modelcell`), fed with the same GCD-shaped tasks;
* real cell (any front-end the real cell supports): :mod:`cellbed.experiment.realcell`.

A driver that cannot run a combination raises FailedPrecondition naming it, before anything
is written.  The run summary (``run_completed``) always has: tasks added/removed/live/pending,
lost and duplicated tasks, the agents' counters, wall time, simulated time per wall minute
and peak RSS.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import os
import resource
import signal
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TextIO

import numpy as np

from cellbed.domain import errors
from cellbed.experiment.results import (AllocationRow, MigrationRow, ResultsWriter, TickRow, build_manifest,
                                        git_revision, runtime_versions)
from cellbed.experiment.scenario import Scenario

log = logging.getLogger(__name__)

__all__ = ["DRIVERS", "Progress", "RunResult", "model_cell_params", "run_scenario"]

REPO = Path(__file__).resolve().parents[2]
MEGHA_FRONTENDS = ("megha", "central", "sampling")


# ---------------------------------------------------------------------------
# progress bar
# ---------------------------------------------------------------------------

class Progress:
    """A one-line, plain-text progress bar on *stream* (stderr): simulated time, the task count and
    the current overloaded share, plus simulated minutes per wall minute and an ETA.

    On a terminal the line is redrawn in place (at most every *min_interval_s*); elsewhere (CI
    logs, files) a line is printed at most every *log_interval_s* or at each 10 % step.
    """

    WIDTH = 24

    def __init__(self, stream: TextIO | None, duration_s: float, label: str = "", *,
                 min_interval_s: float = 0.5, log_interval_s: float = 30.0) -> None:
        self.stream = stream
        self.duration_s = duration_s
        self.label = label
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.min_interval_s = min_interval_s if self.tty else log_interval_s
        self.wall0 = time.perf_counter()
        self._last_draw = -math.inf
        self._last_decile = -1
        self._width = 0
        self._last_t = math.nan
        self.line = ""

    def render(self, t_s: float, tasks: int, overloaded_share: float, extra: str = "") -> str:
        f = min(1.0, max(0.0, t_s / self.duration_s)) if self.duration_s > 0 else 1.0
        fill = int(round(f * self.WIDTH))
        wall = time.perf_counter() - self.wall0
        rate = (t_s / 60.0) / (wall / 60.0) if wall > 0 else math.nan
        eta = (self.duration_s - t_s) / (t_s / wall) if t_s > 0 and wall > 0 else math.nan
        span = "h" if self.duration_s >= 3 * 3600 else "min"
        div = 3600.0 if span == "h" else 60.0
        parts = [f"{self.label} " if self.label else "",
                 f"[{'#' * fill}{'.' * (self.WIDTH - fill)}] {f * 100:3.0f}%",
                 f" {t_s / div:.1f}/{self.duration_s / div:.1f} {span} sim",
                 f" | {tasks:,} tasks | overloaded {overloaded_share * 100:.2f}%",
                 f" | {rate:.1f} sim-min/wall-min" if math.isfinite(rate) else "",
                 f" | ETA {_hms(eta)}" if math.isfinite(eta) else "",
                 f" | {extra}" if extra else ""]
        return "".join(parts)

    def update(self, t_s: float, tasks: int, overloaded_share: float, extra: str = "", *, force: bool = False) -> None:
        if self.stream is None or (force and t_s == self._last_t):
            return
        self._last_t = t_s
        now = time.perf_counter()
        decile = int(10 * t_s / self.duration_s) if self.duration_s > 0 else 10
        if not force and now - self._last_draw < self.min_interval_s and (self.tty or decile == self._last_decile):
            return
        self._last_draw, self._last_decile = now, decile
        self.line = self.render(t_s, tasks, overloaded_share, extra)
        if self.tty:
            pad = max(0, self._width - len(self.line))
            self.stream.write("\r" + self.line + " " * pad)
            self._width = len(self.line)
        else:
            self.stream.write(self.line + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A line of its own (the bar is redrawn after it on a terminal)."""
        if self.stream is None:
            return
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


def _hms(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def peak_rss_mib() -> float:
    """Peak resident set of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------

class TickAlloc:
    """Allocation times of the tasks placed since the last tick → the tick's p50/p99."""

    def __init__(self) -> None:
        self.ms: list[float] = []

    def add(self, total_ms: float) -> None:
        self.ms.append(total_ms)

    def take(self) -> tuple[float, float]:
        if not self.ms:
            return math.nan, math.nan
        p50, p99 = np.percentile(self.ms, (50.0, 99.0))
        self.ms.clear()
        return float(p50), float(p99)


_OUTCOME = {"succeeded": "succeeded", "refused": "refused"}


def migration_row(d: dict) -> MigrationRow:
    """A model cell's migration dict → MigrationRow (aborted/verification_failed/failed → failed)."""
    def f(x: Any) -> float:
        try:
            v = float(x)
        except (TypeError, ValueError):
            return math.nan
        return v if math.isfinite(v) and v >= 0 else math.nan
    return MigrationRow(t_s=float(d["t_s"]), vm=str(d["vm"]), src=str(d["src"]), dst=str(d["dst"]),
                        outcome=_OUTCOME.get(str(d["outcome"]), "failed"), forced=bool(d.get("forced", False)),
                        san_id=str(d.get("san_id", "")), time_ms=f(d.get("time_ms")),
                        downtime_ms=f(d.get("downtime_ms")), bytes=max(0, int(d.get("bytes") or 0)))


def allocation_row(d: dict) -> AllocationRow:
    keys = AllocationRow.__dataclass_fields__
    return AllocationRow(**{k: d[k] for k in keys})


def workload_events(sc: Scenario) -> Iterator:
    """The scenario's event stream: the seeded generator, or the trace reader."""
    w = sc.workload
    if w.source == "generator":
        from cellbed.workload.generator import WorkloadGenerator
        return iter(WorkloadGenerator(sc.generator_config()))
    if w.multiplier != 1.0 or w.compaction != 0.0:
        raise errors.FailedPrecondition(
            f"workload.multiplier={w.multiplier:g} / workload.compaction={w.compaction:g}: the trace reader does "
            "not scale traces; use workload.source = 'generator', or 1.0 / 0.0 with a trace")
    from cellbed.workload.trace import read_trace
    return read_trace(w.trace.path, sc.trace_options())


@dataclasses.dataclass
class RunResult:
    path: Path
    summary: dict
    report: Path | None


# ---------------------------------------------------------------------------
# model cell: MASB and best fit
# ---------------------------------------------------------------------------

BROKERS = 3
"""Broker agents in a MASB model cell. MASB: one BA sufficed for 12.5k nodes; several make the
'randomly selected BA' of initial allocation meaningful. Recorded in the manifest."""


def model_cell_params(sc: Scenario):
    """The ModelCellParams of a masb/bestfit model-cell scenario (every knob from the scenario)."""
    from cellbed.policy.masb.broker_select import BrokerParams
    from cellbed.daemon.san import SanConfig
    from cellbed.model.cell import ModelCellParams
    from cellbed.policy.scores.gpa import GpaParams

    p, s = sc.policy, sc.policy.san
    if p.fit == "gpa" and (p.gpa_rho != GpaParams.rho or p.gpa_min_samples != GpaParams.min_samples):
        raise errors.FailedPrecondition(
            f"policy.gpa_rho={p.gpa_rho:g} / policy.gpa_min_samples={p.gpa_min_samples}: the node agents use "
            f"GPA's defaults (ϱ = {GpaParams.rho:g}, {GpaParams.min_samples} samples); other values are not wired "
            "through yet")
    san = SanConfig(
        enabled=s.enabled, max_util=s.max_util, rus_threshold_pct=s.rus_threshold * 100.0,
        spike_policy=s.spike_policy, window_s=s.window_s, recommendation_expiry_s=s.recommendation_expiry_s,
        report_period_s=s.report_period_s, fit=p.fit, realloc_score=p.realloc_score,
        tabu_restarts=s.tabu_restarts, tabu_steps=s.tabu_steps, tabu_patience=s.tabu_patience,
        log_scs_rate=1.0 / s.scs_log_every if s.scs_log_every else 0.0,
        log_scoring_rate=1.0 / s.scoring_log_every if s.scoring_log_every else 0.0,
        log_target_rate=1.0 / s.scoring_log_every if s.scoring_log_every else 0.0,
    ).validate()
    broker = BrokerParams(candidate_count=s.candidate_count, realloc_scan_limit=s.realloc_scan_limit,
                          initial_scan_limit=s.initial_scan_limit, node_expiry_s=s.node_expiry_s,
                          realloc_score=p.realloc_score, initial_score=p.initial_score, max_util=s.max_util)
    return ModelCellParams(
        nodes=sc.cell.nodes, brokers=BROKERS, seed=sc.run.seed, duration_s=sc.run.duration_s, tick_s=sc.run.tick_s,
        monitor_period_s=s.monitor_period_s, latency_s=sc.cell.network_delay_s, jitter_s=sc.cell.network_delay_s,
        frontend=p.frontend, san=san, broker=broker)


def _plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return x


class ModelMasbDriver:
    """masb / bestfit on the MASB model cell, in virtual time."""

    kind = "model-masb"

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.params = model_cell_params(sc)
        self.profile = None     # a ProfileWindow, set by run_scenario(profile=...)

    def stages(self) -> dict[str, str]:
        p = self.params
        return {
            "T11": "no node churn unless the workload emits it; tasks of a removed node are not requeued",
            "B1": f"model cell: {BROKERS} broker agents syncing pairwise; NodeAgents report every "
                  f"{p.san.report_period_s:g} s, sample every {p.monitor_period_s:g} s; messages take "
                  f"{p.latency_s * 1000:g} ms + U(0, {p.jitter_s * 1000:g}) ms one way",
        }

    def extra(self) -> dict[str, Any]:
        return {"driver": self.kind, "model_cell": _plain(self.params)}

    def run(self, w: ResultsWriter, progress: Progress) -> dict[str, Any]:
        from cellbed.model.cell import ModelCell
        from cellbed.runtime import run_virtual

        sc = self.sc
        alloc = TickAlloc()
        last = {"tasks": 0, "over": 0.0}

        def on_alloc(d: dict) -> None:
            w.allocation(allocation_row(d))
            alloc.add(d["total_ms"])

        def on_mig(d: dict) -> None:
            w.migration(migration_row(d))

        def on_tick(t) -> None:
            p50, p99 = alloc.take()
            w.tick(TickRow(t_s=t.t_s, nodes=t.nodes, idle=t.idle, overloaded=t.overloaded, sta=t.sta, ta=t.ta,
                           pa=t.pa, da=t.da, used_cpu=t.used_cpu, used_mem=t.used_mem, req_cpu=t.req_cpu,
                           req_mem=t.req_mem, tasks_running=t.tasks_running, tasks_pending=t.tasks_pending,
                           migrations_attempted=t.migrations_attempted, migrations_succeeded=t.migrations_succeeded,
                           migrations_refused=t.migrations_refused, migrations_failed=t.migrations_failed,
                           bytes_moved=t.bytes_moved, alloc_p50_ms=p50, alloc_p99_ms=p99))
            share = t.overloaded / t.nodes if t.nodes else 0.0
            last.update(tasks=t.tasks_running, over=share)
            progress.update(t.t_s, t.tasks_running, share)
            if self.profile is not None:
                self.profile.on_tick(t.t_s)

        cell = ModelCell(self.params, events=workload_events(sc), on_tick=on_tick, on_allocation=on_alloc,
                         on_migration=on_mig)
        wall0 = time.perf_counter()
        cpu0 = time.process_time()
        s = run_virtual(cell.run())
        if self.profile is not None:
            self.profile.close(sc.run.duration_s)
        wall = time.perf_counter() - wall0
        progress.update(sc.run.duration_s, last["tasks"], last["over"], force=True)
        progress.close()
        # tasks still waiting for a placement: one "pending" row each
        end = sc.run.duration_s
        pending = 0
        for name, spec in cell.pending.items():
            if name not in cell.live:
                continue
            t_arr, attempts = cell.arrival.get(name, (end, 0))
            w.allocation(AllocationRow(task=name, user=spec.user, frontend=self.params.frontend, arrival_s=t_arr,
                                       start_s=math.nan, host="", framework_queue_ms=math.nan,
                                       processing_ms=math.nan, worker_queue_ms=math.nan, communication_ms=math.nan,
                                       total_ms=math.nan, attempts=attempts, outcome="pending"))
            pending += 1
        sim = sc.run.duration_s
        return {
            "ok": not s.lost and not s.duplicated,
            "driver": self.kind,
            "simulated_s": sim,
            "wall_s": round(wall, 3),
            "cpu_s": round(time.process_time() - cpu0, 3),
            "sim_min_per_wall_min": round(sim / wall, 3) if wall > 0 else None,
            "peak_rss_mib": round(peak_rss_mib(), 1),
            "nodes": len(cell.hosts),
            "tasks": {"added": s.tasks_added, "removed": s.tasks_removed, "live": s.tasks_live,
                      "pending": s.tasks_pending, "pending_rows": pending, "lost": len(s.lost),
                      "duplicated": len(s.duplicated), "lost_sample": sorted(s.lost)[:20],
                      "duplicated_sample": sorted(s.duplicated)[:20]},
            "san": dict(sorted(s.counters.items())),
            "broker": dict(sorted(s.broker_counters.items())),
            "cell": dict(sorted(cell.counters.items())),
            "network": s.net,
        }


# ---------------------------------------------------------------------------
# model cell: Megha, central, sampling
# ---------------------------------------------------------------------------

MEGHA_NODE_CPU = 16.0
MEGHA_NODE_MEM_MIB = 32768
"""The Megha model cell is homogeneous: every node is the GCD's commonest class (0.5, 0.5) of a
32-core / 64 GiB largest machine. Requests are scaled by the same 32 cores / 64 GiB."""
CPU_SCALE_CORES = 32.0
MEM_SCALE_MIB = 65536.0


def _megha_modelcell():
    """The Megha model-cell module, or FailedPrecondition if it is not there."""
    try:
        from cellbed.controller.megha import modelcell
    except ImportError as e:  # pragma: no cover - depends on the tree
        raise errors.FailedPrecondition(
            f"the Megha model cell (cellbed.controller.megha.modelcell) is not available: {e}") from None
    return modelcell


class ModelMeghaDriver:
    """megha / central / sampling on the Megha model cell, fed with the scenario's GCD-shaped tasks.

    The task stream is read up to run.duration_s: each AddTask becomes a MeghaTask whose duration
    is its RemoveTask time minus its arrival (tasks still running at the end run to the end).
    Tasks of the warm start (the generator's first instant) are placed directly on the nodes
    before the clock starts, round-robin by free room, so the cell is warm as in the GCD and
    only later arrivals go through the front-end (Megha measures arrivals, not a cold fill).
    """

    kind = "model-megha"

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.mc = _megha_modelcell()
        p = sc.policy
        shares = tuple((f"q{i + 1}", float(x)) for i, x in enumerate(p.megha.shares))
        self.cfg = self.mc.ModelCellConfig(
            frontend=p.frontend, nodes=sc.cell.nodes, node_cpu=MEGHA_NODE_CPU, node_mem_mib=MEGHA_NODE_MEM_MIB,
            gms=1 if p.frontend == "central" else p.megha.gms, lms=1 if p.frontend == "central" else p.megha.lms,
            latency_s=sc.cell.network_delay_s, update_period_s=p.megha.update_period_s, probes=p.sampling.probes,
            shares=shares, queue_gm=tuple(p.megha.queue_gm), fairness=bool(shares), seed=sc.run.seed,
            monitor_period_s=sc.policy.san.monitor_period_s).validate()
        if p.san.enabled:
            raise errors.FailedPrecondition(
                f"policy.san.enabled = true with policy.frontend = {p.frontend!r}: the Megha model cell runs no "
                "SAN; set policy.san.enabled = false")

    def stages(self) -> dict[str, str]:
        return {"T11": "none (no node churn in the Megha model cell)",
                "B1": f"Megha model cell: {self.cfg.nodes} homogeneous nodes of {MEGHA_NODE_CPU:g} cores / "
                      f"{MEGHA_NODE_MEM_MIB} MiB; the generator's warm-start tasks pre-placed, later arrivals "
                      "through the front-end; tasks hold their requests and use no CPU (the Megha model "
                      "measures placement, so used CPU in ticks.csv is 0 and ASR reflects memory only)"}

    def extra(self) -> dict[str, Any]:
        return {"driver": self.kind, "megha_cell": _plain(self.cfg)}

    def _tasks(self, users: tuple[str, ...]):
        """(warm, arrivals): MeghaTasks from the scenario's stream."""
        from cellbed.domain import wire
        from cellbed.v1 import megha_pb2 as mpb, node_pb2 as npb
        from cellbed.workload import events as ev

        dur = self.sc.run.duration_s
        adds: dict[tuple[int, int], tuple[float, Any]] = {}
        ends: dict[tuple[int, int], float] = {}
        t0 = None
        for e in workload_events(self.sc):
            if t0 is None:
                t0 = e.time_us
            t = (e.time_us - t0) / 1e6
            if t > dur:
                break
            if isinstance(e, ev.AddTask):
                adds[e.task_key] = (t, e)
            elif isinstance(e, ev.RemoveTask) and e.task_key in adds:
                ends[e.task_key] = t
        warm, arr = [], []
        for k, (t, e) in adds.items():
            u = users[zlib.crc32(e.user.encode()) % len(users)]      # stable across processes
            task = mpb.MeghaTask(
                name=f"t{e.job_id}-{e.task_index}", user=u,
                request=wire.resources(max(1e-3, e.cpu_request * CPU_SCALE_CORES),
                                       max(1, int(round(e.mem_request * MEM_SCALE_MIB)))),
                constraints=wire.constraints_pb(e.constraints),
                duration_s=max(1e-3, ends.get(k, dur) - t), workload=npb.Workload(cpu_load=0.0))
            (warm if t == 0.0 else arr).append((t, task))
        return warm, arr

    def run(self, w: ResultsWriter, progress: Progress) -> dict[str, Any]:
        from cellbed.policy.scores.asr import AsrClass, classify
        from cellbed.runtime import run_virtual

        mc, sc = self.mc, self.sc
        cell = mc.ModelCell(self.cfg)
        warm, arr = self._tasks(self.cfg.users)
        arrivals = [mc.Arrival(t, task, i) for i, (t, task) in enumerate(arr)]
        alloc = TickAlloc()
        counts = collections.Counter()
        wall0 = time.perf_counter()
        cpu0 = time.process_time()

        def on_record(r) -> None:
            if r.outcome != "placed":
                return
            counts["placed"] += 1
            row = AllocationRow(task=r.task, user=r.user, frontend=r.frontend, arrival_s=r.arrival_s - epoch[0],
                                start_s=r.start_s - epoch[0], host=r.host, framework_queue_ms=r.framework_queue_ms,
                                processing_ms=r.processing_ms, worker_queue_ms=r.worker_queue_ms,
                                communication_ms=r.communication_ms, total_ms=r.total_ms, attempts=r.attempts,
                                outcome="placed")
            w.allocation(row)
            alloc.add(r.total_ms)

        epoch = [0.0]

        ticks = [0]

        def sample() -> None:
            ticks[0] += 1
            k = ticks[0]
            if True:
                hosts = cell.hosts
                cap = np.array([(h.agent.cfg.cpu_cores, h.agent.cfg.mem_mib) for h in hosts], dtype=float)
                used = np.array([h.agent.used() for h in hosts], dtype=float)
                req = np.array([h.agent._allocated()[::-1] for h in hosts], dtype=float)
                cnt = np.array([len(h.agent.vms) for h in hosts])
                codes = classify(100.0 * used / cap, cnt)
                c = np.bincount(codes.astype(int), minlength=6)
                p50, p99 = alloc.take()
                pend = len(cell.frontend.unstarted())
                t = TickRow(t_s=k * sc.run.tick_s, nodes=len(hosts), idle=int(c[AsrClass.IDLE]),
                            overloaded=int(c[AsrClass.OVERLOADED]), sta=int(c[AsrClass.STA]), ta=int(c[AsrClass.TA]),
                            pa=int(c[AsrClass.PA]), da=int(c[AsrClass.DA]),
                            used_cpu=float(used[:, 0].sum() / cap[:, 0].sum()),
                            used_mem=float(used[:, 1].sum() / cap[:, 1].sum()),
                            req_cpu=float(req[:, 0].sum() / cap[:, 0].sum()),
                            req_mem=float(req[:, 1].sum() / cap[:, 1].sum()), tasks_running=int(cnt.sum()),
                            tasks_pending=pend, alloc_p50_ms=p50, alloc_p99_ms=p99)
                w.tick(t)
                progress.update(t.t_s, t.tasks_running, t.overloaded / max(1, t.nodes))

        async def ticker():
            while True:
                await cell.clock.sleep(sc.run.tick_s)
                sample()

        async def main():
            await cell.build()
            try:
                await self._prefill(cell, warm)
                epoch[0] = cell.clock.now()
                cell.frontend.on_record(on_record)
                tk = asyncio.ensure_future(ticker())
                res = await cell.run(arrivals, drain_s=0.0, stop_at_s=sc.run.duration_s)
                tk.cancel()
                await asyncio.gather(tk, return_exceptions=True)
                while (ticks[0] + 1) * sc.run.tick_s <= sc.run.duration_s + 1e-6:
                    sample()        # the run stopped at duration_s, before the last tick's timer fired
                cell.check_no_double_allocation()
                return res
            finally:
                await cell.close()

        res = run_virtual(main())
        wall = time.perf_counter() - wall0
        progress.close()
        placed = {r.task for r in res.records if r.outcome == "placed"}
        pending = 0
        for r in res.records:
            if r.outcome != "placed" and r.task not in placed:
                w.allocation(AllocationRow(task=r.task, user=r.user, frontend=r.frontend, arrival_s=max(0.0, r.arrival_s),
                                           start_s=math.nan, host="", framework_queue_ms=math.nan,
                                           processing_ms=math.nan, worker_queue_ms=math.nan,
                                           communication_ms=math.nan, total_ms=math.nan, attempts=r.attempts,
                                           outcome="pending" if r.outcome == "pending" else "rejected"))
                pending += 1
        sim = sc.run.duration_s
        return {
            "ok": True, "driver": self.kind, "simulated_s": sim, "wall_s": round(wall, 3),
            "cpu_s": round(time.process_time() - cpu0, 3),
            "sim_min_per_wall_min": round(sim / wall, 3) if wall > 0 else None,
            "peak_rss_mib": round(peak_rss_mib(), 1), "nodes": self.cfg.nodes,
            "tasks": {"added": len(warm) + len(arr), "prefilled": len(warm) - self.prefill_dropped,
                      "prefill_dropped": self.prefill_dropped, "arrivals": len(arr),
                      "placed": len(placed), "pending": pending, "lost": 0, "duplicated": 0},
            "frontend": dict(sorted(res.counters.items())), "lm": dict(sorted(res.lm_counters.items())),
            "messages": res.messages,
        }

    async def _prefill(self, cell, warm: list) -> None:
        """Place the warm-start tasks directly (best effort, most free CPU first), not through the
        front-end; tasks that fit nowhere are dropped and counted."""
        hosts = cell.hosts
        free = np.array([[h.agent.cfg.cpu_cores, h.agent.cfg.mem_mib] for h in hosts], dtype=float)
        attrs = [cell.attributes[h.name] for h in hosts]
        from cellbed.domain.constraints import constraints_match
        from cellbed.domain import wire
        lm_of = {h: lm for lm, hs in cell.lm_hosts.items() for h in hs}
        by_host = {wk.host: wk for wk in cell.workers}
        dropped = 0
        starts = []
        for _, task in warm:
            need = np.array([task.request.cpu_cores, task.request.mem_mib])
            ok = (free >= need).all(axis=1)
            cons = wire.constraints_from_pb(task.constraints) if task.constraints else ()
            if cons:
                ok &= np.fromiter((constraints_match(cons, a) for a in attrs), dtype=bool, count=len(attrs))
            if not ok.any():
                dropped += 1
                continue
            i = int(np.argmax(np.where(ok, free[:, 0] / free[:, 0].max(), -1)))
            free[i] -= need
            h = hosts[i].name
            starts.append(by_host[h].place_direct(task) if cell.workers else cell.lms[lm_of[h]].place_direct(task, h))
        for k in range(0, len(starts), 2000):
            for r in await asyncio.gather(*starts[k:k + 2000], return_exceptions=True):
                if isinstance(r, errors.FailedPrecondition):
                    dropped += 1
                elif isinstance(r, BaseException):
                    raise r
        self.prefill_dropped = dropped


# ---------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------

def _real_driver(sc: Scenario):
    from cellbed.experiment.realcell import RealCellDriver
    return RealCellDriver(sc)


DRIVERS: dict[tuple[str, str], Callable[[Scenario], Any]] = {
    ("model", "masb"): ModelMasbDriver,
    ("model", "bestfit"): ModelMasbDriver,
    ("model", "megha"): ModelMeghaDriver,
    ("model", "central"): ModelMeghaDriver,
    ("model", "sampling"): ModelMeghaDriver,
    ("real", "masb"): _real_driver,
    ("real", "bestfit"): _real_driver,
}
"""(cell.kind, policy.frontend) → driver factory. A combination not listed is refused with
FailedPrecondition naming it; add a driver here to support it."""


def driver_for(sc: Scenario):
    key = (sc.cell.kind, sc.policy.frontend)
    f = DRIVERS.get(key)
    if f is None:
        ok = ", ".join(fe for k, fe in DRIVERS if k == sc.cell.kind)
        raise errors.FailedPrecondition(
            f"policy.frontend={sc.policy.frontend!r} cannot run on cell.kind={sc.cell.kind!r} yet "
            f"(supported there: {ok})")
    return f(sc)


def _sigterm_unwinds():
    """In the main thread: make SIGTERM raise KeyboardInterrupt, so a stopped run unwinds (a real cell
    comes down, events.jsonl gets run_failed). Returns the previous handler (None off the main thread)."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_term(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signum}")
    prev = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_term)
    return prev


def run_scenario(sc: Scenario, out: str | Path, *, progress: TextIO | None = sys.stderr, overwrite: bool = False,
                 report: bool = True, repo: str | Path | None = None,
                 profile: tuple[float, float] | None = None) -> RunResult:
    """Run *sc* and write its results folder *out* (see the module docstring).
    *profile* (from_s, to_s): cProfile that window of simulated time (model MASB cells only).

    Raises FailedPrecondition (before writing anything) for a combination no driver runs.  If the
    run fails, events.jsonl ends with ``run_failed`` and the folder stays incomplete.
    """
    drv = driver_for(sc)
    if profile is not None:
        if not isinstance(drv, ModelMasbDriver):
            raise errors.FailedPrecondition(
                f"--profile: only model cells with policy.frontend masb or bestfit can be profiled by window "
                f"(this scenario runs the {drv.kind} driver)")
        from cellbed.experiment.profiling import ProfileWindow
        drv.profile = ProfileWindow(profile[0], profile[1], out)
    manifest = build_manifest(sc, git_revision=git_revision(repo or REPO), versions=runtime_versions(),
                              stages=drv.stages(), extra=drv.extra())
    bar = Progress(progress, sc.run.duration_s, sc.run.name)
    w = ResultsWriter(out, manifest, overwrite=overwrite)
    prev = _sigterm_unwinds()
    try:
        w.event(0.0, "run_started", name=sc.run.name, driver=drv.kind, cell=sc.cell.kind,
                frontend=sc.policy.frontend, duration_s=sc.run.duration_s, seed=sc.run.seed, pid=os.getpid())
        summary = drv.run(w, bar)
        w.complete(summary, t_s=sc.run.duration_s)
    except BaseException as e:
        bar.close()
        if not w.completed:
            try:
                w.event(w._last_t_s, "run_failed", error=type(e).__name__, detail=str(e)[:2000])
            except Exception:  # noqa: BLE001 - the writer may itself be the problem
                pass
        w.close()
        raise
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
    md = None
    if report:
        from cellbed.experiment.report import write_report
        md = write_report([w.path])
    return RunResult(Path(w.path), summary, md)
