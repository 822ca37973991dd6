"""The experiment runner behind ``cellctl run SCENARIO.toml`` (DESIGN §10.4, §12; issue 5).

    result = run_scenario(load_scenario("scenarios/smoke.toml", ["run.seed=7"]), "results/smoke")

One scenario → one results folder: ``manifest.json`` (the scenario resolved, every stage's
policy, the cell parameters the runner chose, versions, git revision), ``events.jsonl``
(``run_started`` … ``run_completed`` with the summary), ``ticks.csv``, ``migrations.csv``,
``allocations.csv``, then ``report.md`` with its plots.

Dispatch (one driver per kind of cell; :data:`DRIVERS`):

* model cell, any front-end (``masb``, ``bestfit``, ``megha``, ``central``, ``sampling``): the one
  model cell :class:`cellbed.model.cell.ModelCell` in virtual time (the same agent code as a
  real cell, built by :mod:`cellbed.assembly`), fed by the scenario's generator or trace;
* real cell (any front-end the real cell supports): :mod:`cellbed.experiment.real.driver`.

A driver that cannot run a combination raises FailedPrecondition naming it, before anything
is written; so do trace files that are missing, empty, not gzip, truncated or have the wrong
column count (InvalidArgument naming the file and line: :func:`check_workload`). A trace run's
manifest gets a ``trace`` section once the run has read it: rows per table, every anomaly count
with the file and line of its first example, and what the reorder window did.  The run summary (``run_completed``) always has: tasks added/removed/live/pending,
lost and duplicated tasks, the agents' counters, wall time, simulated time per wall minute
and peak RSS.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from cellbed.controller.megha.workload import ArrivalConfig
from cellbed.daemon.san import SanConfig
from cellbed.domain import errors
from cellbed.experiment import policies
from cellbed.experiment.policies import PolicyRunFailed
from cellbed.experiment.profiling import ProfileWindow
from cellbed.experiment.progress import Progress, peak_rss_mib
from cellbed.experiment.real.driver import RealCellDriver
from cellbed.experiment.report.write import write_report
from cellbed.experiment.results.files import DECISIONS, TASK_COLUMNS, TASKS
from cellbed.experiment.results.writer import ResultsWriter, build_manifest, git_revision, runtime_versions
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.scenario.policies import broker_params, policy_book
from cellbed.experiment.twin.driver import TwinDriver
from cellbed.model.cell import ModelCell
from cellbed.model.megha import megha_cell
from cellbed.model.megha_run import JobsWorkload
from cellbed.model.megha_stream import CPU_SCALE_CORES, MEM_SCALE_MIB
from cellbed.model.params import (END_WITH_HOST_S, MASB_FRONTENDS, MEGHA_FRONTENDS, ModelCellParams, Summary,
                                  migration_calibration)
from cellbed.policy.migration.costfile import CalibrationFile
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime.clock import run_virtual
from cellbed.runtime.explain import ExplainLog
from cellbed.workload.generator import WorkloadGenerator
from cellbed.workload.trace import TraceReader
from cellbed.workload.trace_check import check_trace

__all__ = ["DRIVERS", "ModelDriver", "Progress", "RunResult", "model_cell_params", "run_scenario"]

REPO = Path(__file__).resolve().parents[2]

BROKERS = 3
"""Broker agents in a MASB model cell. MASB: one BA sufficed for 12.5k nodes; several make the
'randomly selected BA' of initial allocation meaningful. Recorded in the manifest."""

MEGHA_NODE_CPU = 16.0
MEGHA_NODE_MEM_MIB = 32768
"""The Megha front-ends' cell is homogeneous: every node is the GCD's commonest class (0.5, 0.5) of
a 32-core / 64 GiB largest machine. Requests are scaled by the same 32 cores / 64 GiB."""


def check_workload(sc: Scenario) -> None:
    """What can be refused before a run writes anything: a trace the reader cannot scale, and
    trace files that are missing, empty, not gzip, truncated or have the wrong column count
    (InvalidArgument naming the file, the line and the problem)."""
    w = sc.workload
    if w.source != "trace":
        return
    if w.multiplier != 1.0 or w.compaction != 0.0:
        raise errors.FailedPrecondition(
            f"workload.multiplier={w.multiplier:g} / workload.compaction={w.compaction:g}: the trace reader does "
            "not scale traces; use workload.source = 'generator', or 1.0 / 0.0 with a trace")
    check_trace(w.trace.path)


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


@dataclasses.dataclass
class RunResult:
    path: Path
    summary: dict
    report: Path | None


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

        events, reader = workload_source(sc)
        if isinstance(events, JobsWorkload):      # the jobs' tasks: what TRT, JMS, NJSL and JWT are computed from
            events = dataclasses.replace(events, on_tasks=lambda arr: write_tasks(w, arr))
        explain = ExplainLog(sc.run.explain, str(w.path / DECISIONS))
        cell = ModelCell(self.params, events, on_tick=on_tick, on_allocation=w.allocation,
                         on_migration=w.migration, policies=self.book, explain=explain)
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


# ---------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------

DRIVERS: dict[tuple[str, str], Callable[[Scenario], Any]] = {
    **{("model", fe): ModelDriver for fe in MASB_FRONTENDS + MEGHA_FRONTENDS},
    ("real", "masb"): RealCellDriver,
    ("real", "bestfit"): RealCellDriver,
    ("twin", "masb"): TwinDriver,
    ("twin", "bestfit"): TwinDriver,
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


def _sigterm_unwinds(w: ResultsWriter, model: bool):
    """In the main thread, on SIGTERM (returns the previous handler; None off the main thread):
    - a real cell unwinds: KeyboardInterrupt, so the cell comes down and events.jsonl gets
      run_failed;
    - a model cell holds nothing outside this process, so it does not unwind its agents (137k
      tasks took minutes): run_failed is written and the process exits at once, 128 + 15."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_term(signum, frame):  # noqa: ARG001
        if not model:
            raise KeyboardInterrupt(f"signal {signum}")
        _failed(w, KeyboardInterrupt(f"signal {signum}: the model cell was stopped without unwinding its agents "
                                     "(it holds nothing outside this process)"))
        sys.stderr.write(f"\ncellctl run: stopped by signal {signum}; {w.path} ends with run_failed\n")
        sys.stderr.flush()
        os._exit(128 + signum)
    prev = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_term)
    return prev


def _failed(w: ResultsWriter, e: BaseException) -> None:
    if not w.completed:
        try:
            w.event(w.last_t_s, "run_failed", error=type(e).__name__, detail=str(e)[:2000])
        except Exception:  # noqa: BLE001 - the writer may itself be the problem
            pass
    w.close()


def run_scenario(sc: Scenario, out: str | Path, *, progress: TextIO | None = sys.stderr, overwrite: bool = False,
                 report: bool = True, repo: str | Path | None = None,
                 profile: tuple[float, float] | None = None, driver: Any = None) -> RunResult:
    """Run *sc* and write its results folder *out* (see the module docstring).
    *profile* (from_s, to_s): cProfile that window of simulated time (model cells only).
    *driver*: one built by the caller (``cellctl compare``'s twin, with its fitted guest overhead).

    Raises FailedPrecondition (before writing anything) for a combination no driver runs.  If the
    run fails, events.jsonl ends with ``run_failed`` and the folder stays incomplete.
    """
    drv = driver if driver is not None else driver_for(sc)
    check_workload(sc)
    if profile is not None:
        if not isinstance(drv, ModelDriver):
            raise errors.FailedPrecondition(
                f"--profile: only model cells can be profiled by window (this scenario runs the {drv.kind} driver)")
        drv.profile = ProfileWindow(profile[0], profile[1], out)
    cal = getattr(drv, "calibration", None) or migration_calibration(sc.migration.calibration)
    manifest = build_manifest(sc, git_revision=git_revision(repo or REPO), versions=runtime_versions(),
                              stages=drv.stages(), extra=drv.extra(),
                              migration_calibration=cal.record() if cal is not None else None)
    if sc.workload.source == "jobs":      # ends once every task has started: soon after the last arrival
        bar = Progress(progress, min(sc.run.duration_s, sc.workload.jobs.arrivals_s), sc.run.name,
                       past_end="arrivals over: placing the last tasks")
    else:
        bar = Progress(progress, sc.run.duration_s, sc.run.name)
    w = ResultsWriter(out, manifest, overwrite=overwrite)
    prev = _sigterm_unwinds(w, isinstance(drv, ModelDriver))
    try:
        w.event(0.0, "run_started", name=sc.run.name, driver=drv.kind, cell=sc.cell.kind,
                frontend=sc.policy.frontend, duration_s=sc.run.duration_s, seed=sc.run.seed, pid=os.getpid())
        summary = drv.run(w, bar)
        w.complete(summary, t_s=sc.run.duration_s)
    except BaseException as e:
        bar.close()
        _failed(w, e)
        raise
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
    md = write_report([w.path]) if report else None
    return RunResult(Path(w.path), summary, md)
