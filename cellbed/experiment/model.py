"""The model cell behind ``cellctl run`` (``cell.kind = "model"``, any front-end) and the
model parts a real-cell twin shares: the scenario's workload source (the seeded generator, a trace,
or the Megha paper's jobs), the ModelCellParams a scenario resolves to, and :class:`ModelDriver`,
which runs the one model cell (:class:`cellbed.model.cell.ModelCell`) in virtual time."""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterator

from cellbed.controller.megha.workload import ArrivalConfig
from cellbed.daemon.san import SanConfig
from cellbed.domain import errors
from cellbed.experiment import policies
from cellbed.experiment.policies import PolicyRunFailed
from cellbed.experiment.profiling import ProfileWindow
from cellbed.experiment.progress import Progress, peak_rss_mib
from cellbed.experiment.results.files import DECISIONS, TASK_COLUMNS, TASKS
from cellbed.experiment.results.writer import ResultsWriter
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.scenario.policies import broker_params, policy_book
from cellbed.model.cell import ModelCell
from cellbed.model.megha import megha_cell
from cellbed.model.megha_run import JobsWorkload
from cellbed.model.megha_stream import CPU_SCALE_CORES, MEM_SCALE_MIB
from cellbed.model.params import (END_WITH_HOST_S, MASB_FRONTENDS, ModelCellParams, Summary,
                                  migration_calibration)
from cellbed.policy.migration.costfile import CalibrationFile
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime.clock import run_virtual
from cellbed.runtime.explain import ExplainLog
from cellbed.workload.generator import WorkloadGenerator
from cellbed.workload.trace import TraceReader

BROKERS = 3
"""Broker agents in a MASB model cell. MASB: one BA sufficed for 12.5k nodes; several make the
'randomly selected BA' of initial allocation meaningful. Recorded in the manifest."""

MEGHA_NODE_CPU = 16.0
MEGHA_NODE_MEM_MIB = 32768
"""The Megha front-ends' cell is homogeneous: every node is the GCD's commonest class (0.5, 0.5) of
a 32-core / 64 GiB largest machine. Requests are scaled by the same 32 cores / 64 GiB."""

def workload_source(sc: Scenario) -> tuple[Iterator, TraceReader | None]:
    """The scenario's event stream (the seeded generator, or the trace reader) and the reader,
    whose counts the manifest records once the run has read what it needs."""
    w = sc.workload
    if w.source == "generator":
        return iter(WorkloadGenerator(sc.generator_config())), None
    if w.source == "jobs":
        return jobs_workload(sc), None
    reader = TraceReader(w.trace.path, sc.trace_options())
    return iter(reader), reader


def jobs_workload(sc: Scenario) -> JobsWorkload:
    """``workload.source = "jobs"``: the Megha paper's Poisson jobs, their rate scaled to the cell."""
    j = sc.workload.jobs
    cfg = ArrivalConfig(seed=sc.run.seed, duration_s=j.arrivals_s, job_rate_per_s=j.job_rate_per_1k_nodes *
                        sc.cell.nodes / 1000.0, task_min_s=j.task_min_s, task_max_s=j.task_max_s).validate()
    return JobsWorkload(cfg, drain_s=sc.run.duration_s - j.arrivals_s)


def write_tasks(w: ResultsWriter, arrivals) -> None:
    """tasks.csv: every task of a jobs workload with its job, submission time and duration."""
    row = w.samples(TASKS, TASK_COLUMNS)
    for a in arrivals:
        row({"task": a.task.name, "job": a.job, "user": a.task.user, "arrival_s": a.time_s,
             "duration_s": a.task.duration_s, "cpu": a.task.request.cpu_cores, "mem_mib": a.task.request.mem_mib})


def workload_events(sc: Scenario) -> Iterator:
    """The scenario's event stream: the seeded generator, or the trace reader."""
    return workload_source(sc)[0]


# ---------------------------------------------------------------------------
# the model cell, any front-end
# ---------------------------------------------------------------------------

def _masb_params(sc: Scenario) -> ModelCellParams:
    p, s = sc.policy, sc.policy.san
    san = SanConfig(gpa_rho=p.gpa_rho, gpa_min_samples=p.gpa_min_samples,
        enabled=s.enabled, max_util=s.max_util, rus_threshold_pct=s.rus_threshold * 100.0,
        spike_policy=s.spike_policy, window_s=s.window_s, recommendation_expiry_s=s.recommendation_expiry_s,
        report_period_s=s.report_period_s, fit=p.fit, realloc_score=p.realloc_score,
        tabu_restarts=s.tabu_restarts, tabu_steps=s.tabu_steps, tabu_patience=s.tabu_patience,
        log_scs_rate=1.0 / s.scs_log_every if s.scs_log_every else 0.0,
        log_scoring_rate=1.0 / s.scoring_log_every if s.scoring_log_every else 0.0,
        log_target_rate=1.0 / s.scoring_log_every if s.scoring_log_every else 0.0,
    ).validate()
    broker = BrokerParams(**broker_params(sc))
    return ModelCellParams(
        nodes=sc.cell.nodes, brokers=BROKERS, seed=sc.run.seed, duration_s=sc.run.duration_s, tick_s=sc.run.tick_s,
        monitor_period_s=s.monitor_period_s, latency_s=sc.cell.network_delay_s, jitter_s=sc.cell.network_delay_s,
        frontend=p.frontend, san=san, broker=broker, sampling=sc.cell.sampling,
        retry_backoff=sc.cell.retry_backoff, arrival_window=sc.cell.arrival_window).validate()


def _megha_params(sc: Scenario) -> ModelCellParams:
    p = sc.policy
    if p.san.enabled:
        raise errors.FailedPrecondition(
            f"policy.san.enabled = true with policy.frontend = {p.frontend!r}: the Megha front-ends run no "
            "SAN; set policy.san.enabled = false")
    shares = tuple((f"q{i + 1}", float(x)) for i, x in enumerate(p.megha.shares))
    central = p.frontend == "central"
    j = sc.workload.jobs
    jobs = {"node_cpu": j.node_cpu, "node_mem_mib": j.node_mem_mib, "background_fill": j.fill,
            "node_classes": tuple((float(k), float(c), int(m)) for k, c, m in j.node_classes),
            "background_s": (5.0, 2 * j.arrivals_s)} if sc.workload.source == "jobs" else \
        {"node_cpu": MEGHA_NODE_CPU, "node_mem_mib": MEGHA_NODE_MEM_MIB}
    return megha_cell(
        frontend=p.frontend, nodes=sc.cell.nodes, **jobs,
        gms=1 if central else p.megha.gms, lms=1 if central else p.megha.lms, latency_s=sc.cell.network_delay_s,
        update_period_s=p.megha.update_period_s, probes=p.sampling.probes, shares=shares,
        queue_gm=tuple(p.megha.queue_gm), fairness=bool(shares), seed=sc.run.seed,
        monitor_period_s=sc.policy.san.monitor_period_s, duration_s=sc.run.duration_s,
        tick_s=sc.run.tick_s, machines="stream" if sc.workload.source == "trace" else "homogeneous").validate()


def model_cell_params(sc: Scenario, calibration: CalibrationFile | None = None) -> ModelCellParams:
    """The ModelCellParams of a model-cell scenario (every knob from the scenario; the migration
    cost from *calibration*, else from the file that ``migration.calibration`` names)."""
    p = _masb_params(sc) if sc.policy.frontend in MASB_FRONTENDS else _megha_params(sc)
    cal = calibration or migration_calibration(sc.migration.calibration)
    return dataclasses.replace(p, cost=cal.params) if cal is not None else p


def _plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return x


class ModelDriver:
    """Any front-end on the one model cell, in virtual time."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.calibration = migration_calibration(sc.migration.calibration)
        self.params = model_cell_params(sc, self.calibration)
        self.masb = sc.policy.frontend in MASB_FRONTENDS
        self.kind = "model-masb" if self.masb else "model-megha"
        self.profile: ProfileWindow | None = None
        self.book = policy_book(sc.policy)        # a bad plugin is refused here, before anything is written

    def stages(self) -> dict[str, str]:
        p = self.params
        churn = ("a node that leaves the cell (RemoveNode) stops at once: a task on it that the trace ends "
                 f"within {END_WITH_HOST_S:g} s ends with it, with the trace's reason; every other task the model "
                 "had placed there waits for a new placement (counted as displaced); a node that comes back is a "
                 "new, empty host")
        if self.masb:
            return {
                "T11": churn,
                "B1": f"model cell: {BROKERS} broker agents syncing pairwise; NodeAgents report every "
                      f"{p.san.report_period_s:g} s, sample every {p.monitor_period_s:g} s; messages take "
                      f"{p.latency_s * 1000:g} ms + U(0, {p.jitter_s * 1000:g}) ms one way"}
        cells = (f"the trace's machines (capacity × {CPU_SCALE_CORES:g} cores / {MEM_SCALE_MIB:g} MiB, "
                 "their attributes; machines added later join when the trace adds them)"
                 if p.megha.machines == "stream" else
                 f"{p.nodes} homogeneous nodes of {p.megha.node_cpu:g} cores / {p.megha.node_mem_mib} MiB")
        if self.sc.workload.source == "jobs":
            return {"B1": f"model cell, {p.frontend}: {cells}, each started {p.megha.background_fill:.0%} full on "
                          "average by background tasks placed directly; the Poisson jobs' tasks through the "
                          "front-end; a task holds its request for its duration from its start"}
        return {"T11": churn.replace("waits for a new placement", "goes back to the front-end for the rest of its "
                                     "duration"),
                "B1": f"model cell, {p.frontend}: {cells}; the stream's warm-start tasks pre-placed, later arrivals "
                      "through the front-end; tasks hold their requests and use no CPU (the Megha model "
                      "measures placement, so used CPU in ticks.csv is 0 and ASR reflects memory only)"}

    def extra(self) -> dict[str, Any]:
        return {"driver": self.kind, "model_cell": _plain(self.params)}

    def workload(self) -> tuple[Iterator, TraceReader | None]:
        """The run's events (and the trace reader, if any): the scenario's source."""
        return workload_source(self.sc)

    def cell_options(self) -> dict[str, Any]:
        """The front-end's options (ModelCell's *frontend_options*); none: its defaults."""
        return {}

    def run(self, w: ResultsWriter, progress: Progress) -> dict[str, Any]:
        sc = self.sc
        last = {"tasks": 0, "over": 0.0}

        fatal = self.book.env.fatal

        def on_tick(t) -> None:
            if fatal:                   # strict: a plugin failed; the rows so far stay, the run ends
                raise PolicyRunFailed(fatal[0])
            w.tick(t)
            share = t.overloaded / t.nodes if t.nodes else 0.0
            last.update(tasks=t.tasks_running, over=share)
            progress.update(t.t_s, t.tasks_running, share)
            if self.profile is not None:
                self.profile.on_tick(t.t_s)

        events, reader = self.workload()
        if isinstance(events, JobsWorkload):      # the jobs' tasks: what TRT, JMS, NJSL and JWT are computed from
            events = dataclasses.replace(events, on_tasks=lambda arr: write_tasks(w, arr))
        explain = ExplainLog(sc.run.explain, str(w.path / DECISIONS))
        cell = ModelCell(self.params, events, on_tick=on_tick, on_allocation=w.allocation,
                         on_migration=w.migration, policies=self.book, explain=explain, **self.cell_options())
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            s = run_virtual(cell.run())
            if fatal:
                raise PolicyRunFailed(fatal[0])
        finally:
            if reader is not None:       # what was read, also when the run failed part-way
                w.update_manifest(trace=reader.report())
            policies.record(w, self.book.identities(), self.book.env.stats, mode=self.book.env.mode)
            explain.close()
            w.update_manifest(explained=explain.written, explain_share=sc.run.explain)
        if self.profile is not None:
            self.profile.close(sc.run.duration_s)
        wall = time.perf_counter() - wall0
        end = sc.run.duration_s if self.masb else min(sc.run.duration_s, s.extra["virtual_s"])   # jobs: may end early
        progress.update(end, last["tasks"], last["over"], force=True)
        progress.close()
        pending = 0
        if self.masb:
            for row in cell.frontend.unplaced():
                w.allocation(row)
                pending += 1
        sim = end
        out = {"ok": not s.lost and not s.duplicated, "driver": self.kind, "simulated_s": sim,
               "wall_s": round(wall, 3), "cpu_s": round(time.process_time() - cpu0, 3),
               "sim_min_per_wall_min": round(sim / wall, 3) if wall > 0 else None,
               "peak_rss_mib": round(peak_rss_mib(), 1), "nodes": len(cell.hosts)}
        out.update(self._masb_summary(s, cell, pending) if self.masb else self._megha_summary(s))
        if reader is not None:
            out["trace_anomalies"] = {k: v["count"] for k, v in reader.report()["anomalies"].items()}
        return out

    @staticmethod
    def _masb_summary(s: Summary, cell: ModelCell, pending: int) -> dict[str, Any]:
        return {"tasks": {"added": s.tasks_added, "removed": s.tasks_removed, "live": s.tasks_live,
                          "pending": s.tasks_pending, "pending_rows": pending, "lost": len(s.lost),
                          "duplicated": len(s.duplicated), "lost_sample": sorted(s.lost)[:20],
                          "duplicated_sample": sorted(s.duplicated)[:20]},
                "san": dict(sorted(s.counters.items())), "broker": dict(sorted(s.broker_counters.items())),
                "cell": dict(sorted(cell.frontend.counters.items())), "network": s.net}

    @staticmethod
    def _megha_summary(s: Summary) -> dict[str, Any]:
        x = s.extra
        return {"tasks": {"added": s.tasks_added, "prefilled": x["prefilled"],
                          "prefill_dropped": x["prefill_dropped"], "arrivals": x["arrivals"],
                          "placed": x["placed"], "pending": x["pending_rows"], "lost": 0, "duplicated": 0},
                "stream": x.get("stream", {}),
                "frontend": s.counters, "lm": x["lm"], "messages": x["messages"]}
