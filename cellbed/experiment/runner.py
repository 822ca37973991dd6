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
from pathlib import Path
from typing import Any, Callable, TextIO

from cellbed.domain import errors
from cellbed.experiment.model import ModelDriver, model_cell_params
from cellbed.experiment.profiling import ProfileWindow
from cellbed.experiment.progress import Progress
from cellbed.experiment.real.driver import RealCellDriver
from cellbed.experiment.report.write import write_report
from cellbed.experiment.results.writer import ResultsWriter, build_manifest, git_revision, runtime_versions
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.twin.central import CentralTwinDriver
from cellbed.experiment.twin.driver import TwinDriver
from cellbed.model.params import MASB_FRONTENDS, MEGHA_FRONTENDS, migration_calibration
from cellbed.workload.trace_check import check_trace

__all__ = ["DRIVERS", "ModelDriver", "Progress", "RunResult", "model_cell_params", "run_scenario"]

REPO = Path(__file__).resolve().parents[2]


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


@dataclasses.dataclass
class RunResult:
    path: Path
    summary: dict
    report: Path | None


# ---------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------

DRIVERS: dict[tuple[str, str], Callable[[Scenario], Any]] = {
    **{("model", fe): ModelDriver for fe in MASB_FRONTENDS + MEGHA_FRONTENDS},
    ("real", "masb"): RealCellDriver,
    ("real", "bestfit"): RealCellDriver,
    ("real", "central"): RealCellDriver,
    ("twin", "masb"): TwinDriver,
    ("twin", "bestfit"): TwinDriver,
    ("twin", "central"): CentralTwinDriver,
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
