"""Running a sweep's plan on Dask distributed (issue 16): a LocalCluster by default, or an
existing cluster (``--scheduler tcp://HOST:8786`` or ``tls://``).

Each run is one ``cellctl run`` **subprocess**, started by a Dask task
(cellbed/experiment/sweep/worker.py), not ``run_scenario`` inside the worker:

- a run's results are those of a plain ``cellctl run`` by construction (the same entry point, the
  same SIGTERM handling, which ends a stopped run's events.jsonl with run_failed);
- every run gets a fresh process: a model cell's peak RSS and wall time in its summary are its
  own, nothing leaks from one run into the next, a run that crashes or is killed by the OOM
  killer fails that run and not the worker, and matplotlib never runs in a worker thread;
- the Dask worker only waits, so its GIL does not matter. A LocalCluster still uses processes,
  one per slot (``threads_per_worker=1``), as many as the cores and the memory of the largest run
  allow (:func:`local_workers`).

Resume: before anything starts, every run's folder is classified (cellbed/experiment/sweep/plan.py
run_state): completed runs of the same resolved scenario are skipped, incomplete ones replaced,
completed ones of another scenario refused unless ``overwrite``, anything else refused. A failed
attempt is retried once (its folder, a previous run, is then replaced); the sweep goes on with the
others and reports the failures at the end. One sweep at a time per folder (flock on sweep.lock).

Stopping (SIGTERM, SIGINT): pending tasks are cancelled, each worker SIGTERMs the runs it started
and waits for them, the cluster closes; :class:`SweepOutcome` says which signal it was.

Every worker must see the sweep's folder and scenarios at the same paths (one box, or a shared
filesystem): a probe checks it on every worker before the first run.

A LocalCluster's scheduler and workers listen on 127.0.0.1 only, with mutual TLS from a temporary
CA (``Security.temporary()``): Dask runs whatever pickled code a client sends, so nobody else on
the box may connect. An existing cluster is reached as given: ``tls://`` with the CA, certificate
and key given (the cell's, for instance), or ``tcp://``, plaintext and unauthenticated.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import dask
import psutil
from distributed import Client, LocalCluster, as_completed
from distributed.security import Security

from cellbed.domain.errors import AlreadyExists, FailedPrecondition, InvalidArgument, Unavailable
from cellbed.experiment.results.folder import is_previous_run
from cellbed.experiment.scenario.file import load_scenario
from cellbed.experiment.sweep.plan import LOCK_FILE, LOGS_DIR, SWEEP_FILE, SWEEP_FORMAT, PlannedRun, SweepPlan, resolved, run_state
from cellbed.experiment.sweep.progress import SweepProgress, hms
from cellbed.experiment.sweep.worker import RunTask, execute_run, probe, running_runs, stop_runs

__all__ = ["SweepOutcome", "local_workers", "open_cluster", "run_sweep"]

ATTEMPTS = 2
POLL_S = 1.0
RUN_BASE_MIB, RUN_MIB_PER_NODE = 128, 0.8
"""A model run's memory: ~90 MiB at 100 nodes, 9.4 GiB at 12,500 (docs/results/scale-benchmark.md)."""


@dataclasses.dataclass
class SweepOutcome:
    name: str
    out: Path
    total: int
    skipped: int = 0
    ran: int = 0
    failed: list[dict] = dataclasses.field(default_factory=list)
    stopped: int = 0                     # the signal that stopped the sweep; 0: it was not stopped
    interrupted: list[str] = dataclasses.field(default_factory=list)
    cluster: str = ""
    workers: dict[str, dict] = dataclasses.field(default_factory=dict)
    runs: dict[str, dict] = dataclasses.field(default_factory=dict)   # key → the last attempt
    wall_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["out"] = str(self.out)
        return d


# ---------------------------------------------------------------------------
# the sweep's folder
# ---------------------------------------------------------------------------

def prepare_out(out: Path, name: str) -> None:
    """A new or empty folder, or the folder of sweep *name* (to resume it); refused otherwise."""
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {out}: is a file; give a new or empty folder, or a sweep's folder")
    if out.is_dir() and any(out.iterdir()):
        try:
            prev = json.loads((out / SWEEP_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            prev = None
        if not isinstance(prev, dict) or prev.get("format") != SWEEP_FORMAT:
            raise FailedPrecondition(f"--out {out}: holds files but no {SWEEP_FILE}; give a new or empty folder, "
                                     "or a sweep's folder to resume it")
        if prev.get("name") != name:
            raise FailedPrecondition(f"--out {out}: holds sweep {prev.get('name')!r}, not {name!r}; give another --out")
    out.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise FailedPrecondition(f"--out {out}: another sweep is running there (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def classify(plan: SweepPlan, out: Path, overwrite: bool) -> dict[str, str]:
    """Every run's state (sweep.run_state); refuses foreign folders, and stale runs without *overwrite*."""
    states, stale = {}, []
    for r in plan.runs:
        st, why = run_state(r.folder(out), r.scenario_hash)
        if st == "foreign":
            raise FailedPrecondition(f"{why}; the sweep writes run {r.key} there: move it away")
        if st == "stale":
            stale.append(r)
        states[r.key] = st
    if stale and not overwrite:
        r = stale[0]
        _, why = run_state(r.folder(out), r.scenario_hash, resolved(load_scenario(r.scenario, r.overrides)))
        raise AlreadyExists(f"{why}; {len(stale)} such run(s): give --overwrite to replace them, or another --out")
    return states


def write_sweep_file(out: Path, plan: SweepPlan, last: dict[str, Any]) -> None:
    tmp = out / (SWEEP_FILE + ".tmp")
    tmp.write_text(json.dumps({**plan.as_json(), "last": last}, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, out / SWEEP_FILE)


# ---------------------------------------------------------------------------
# the cluster
# ---------------------------------------------------------------------------

def run_mib(nodes: int) -> int:
    return int(RUN_BASE_MIB + RUN_MIB_PER_NODE * nodes)


def local_workers(nodes: list[int], workers: int | None = None, mem_per_run_mib: int | None = None,
                  cores: int | None = None, available_mib: float | None = None) -> tuple[int, str]:
    """How many worker processes a LocalCluster gets for runs of *nodes* nodes: one per core,
    fewer if 80 % of the memory available does not hold that many of the largest run, never more
    than the runs; *workers* overrides. Returns (n, why)."""
    if workers:
        return workers, "--workers"
    cores = cores or len(os.sched_getaffinity(0))
    avail = available_mib if available_mib is not None else psutil.virtual_memory().available / 2**20
    per = mem_per_run_mib or run_mib(max(nodes, default=0))
    by_mem = max(1, int(avail * 0.8 // per))
    n = max(1, min(cores, by_mem, len(nodes) or 1))
    return n, (f"{cores} cores, {avail / 1024:.1f} GiB available, ~{per} MiB per run"
               + (f": memory for {by_mem}" if by_mem < cores else ""))


@contextlib.contextmanager
def _workers_ignore_sigint() -> Iterator[None]:
    """While the LocalCluster starts its processes: SIGINT ignored, which they inherit, so that a
    Ctrl-C at the terminal (sent to the whole process group) reaches only the sweep, which stops
    the runs and the cluster in order."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, prev)


@contextlib.contextmanager
def open_cluster(scheduler: str | None, n_workers: int, security: Security | None,
                 connect_timeout_s: float = 30.0, workers_timeout_s: float = 60.0) -> Iterator[tuple[Client, str]]:
    """A Client: of a new LocalCluster (*n_workers* processes, one thread each, loopback, mutual
    TLS), or of the cluster at *scheduler*. Closes what it opened."""
    if scheduler is None:
        # Its scheduler runs in this process: its INFO lines would drown the progress (-v keeps them).
        # Dask's HTTP servers (metrics, task pages) serve nothing here, on a loopback port of their own.
        dlog = logging.getLogger("distributed")
        level = dlog.level
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            dlog.setLevel(logging.ERROR)
        # the scheduler's and the workers' scratch space is this sweep's own, removed with the
        # cluster (Dask's default, /tmp/dask-scratch-space, is shared and outlives them)
        scratch = tempfile.mkdtemp(prefix="cellbed-sweep-dask-")
        try:
            with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": [],
                                  "temporary-directory": scratch}):      # the scheduler's, in this process
                with _workers_ignore_sigint():
                    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                           dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                           security=Security.temporary(), memory_limit=0, silence_logs=logging.ERROR,
                                           local_directory=scratch)
                with cluster, Client(cluster, set_as_default=False) as client:
                    yield client, f"a LocalCluster of {n_workers} worker process{'es' if n_workers > 1 else ''}"
        finally:
            dlog.setLevel(level)
            shutil.rmtree(scratch, ignore_errors=True)
        return
    try:
        client = Client(scheduler, security=security, timeout=connect_timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise Unavailable(f"--scheduler {scheduler}: cannot connect ({str(e).splitlines()[0][:300]})") from None
    try:
        try:
            client.wait_for_workers(1, timeout=workers_timeout_s)
        except (OSError, TimeoutError):
            raise Unavailable(f"--scheduler {scheduler}: no worker joined within {workers_timeout_s:g} s") from None
        yield client, f"the Dask cluster at {scheduler}"
    finally:
        client.close()


def probe_workers(client: Client, out: Path, token: str, plan: SweepPlan) -> dict[str, dict]:
    files = sorted({str(r.scenario) for r in plan.runs})
    seen = client.run(probe, str(out / SWEEP_FILE), token, files, on_error="return")
    for addr, v in sorted(seen.items()):
        if isinstance(v, BaseException):
            raise FailedPrecondition(f"Dask worker {addr} cannot run the sweep ({type(v).__name__}: {v}); "
                                     "install this Cellbed in the workers' Python")
        if not v["sees_out"]:
            raise FailedPrecondition(f"Dask worker {addr} ({v['host']}) does not see {out / SWEEP_FILE}: every "
                                     "worker must see the sweep's folder at the same path (one box, or a shared "
                                     "filesystem)")
        if v["missing"]:
            raise FailedPrecondition(f"Dask worker {addr} ({v['host']}) does not see the scenario {v['missing'][0]}")
    return {a: {k: v[k] for k in ("host", "python", "cellbed", "cpus")} for a, v in seen.items()}


def poll_running(client: Client, token: str) -> dict[str, float] | None:
    """Every worker's running runs of *token*: key → start (None if the poll failed)."""
    try:
        per = client.run(running_runs, token, on_error="return")
    except (OSError, TimeoutError):
        return None
    return {k: t for v in per.values() if isinstance(v, dict) for k, t in v.items()}


def _result(f) -> dict[str, Any]:
    try:
        return f.result()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:   # noqa: BLE001 - the task itself failed in Dask: a worker died, the run was cancelled
        return {"status": "failed", "rc": None, "wall_s": 0.0, "worker": "?",
                "tail": f"{type(e).__name__}: {e}".splitlines()[0][:600]}


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------

class SweepLoop:
    def __init__(self, plan: SweepPlan, out: Path, outcome: SweepOutcome, token: str, report: bool) -> None:
        self.plan, self.out, self.outcome, self.token, self.report = plan, out, outcome, token, report
        self.futures: dict[Any, tuple[PlannedRun, int]] = {}
        self.ac: as_completed | None = None
        self.prog: SweepProgress | None = None

    def task(self, run: PlannedRun, attempt: int) -> RunTask:
        folder = run.folder(self.out)
        log = self.out / LOGS_DIR / (run.key + (".log" if attempt == 1 else ".retry.log"))
        return RunTask(token=self.token, key=run.key, scenario=str(run.scenario), overrides=run.overrides,
                       folder=str(folder), log=str(log), overwrite=is_previous_run(folder), report=self.report,
                       attempt=attempt, cwd=str(self.out))

    def submit(self, client: Client, run: PlannedRun, attempt: int) -> None:
        t = self.task(run, attempt)
        f = client.submit(execute_run, t, key=f"cellbed-sweep-{self.token[:12]}-{attempt}-{run.key}", pure=False)
        self.futures[f] = (run, attempt)
        self.ac.add(f)

    def handle(self, client: Client, f) -> None:
        run, attempt = self.futures.pop(f)
        res = _result(f)
        if res["status"] == "ok":
            st, why = run_state(run.folder(self.out), run.scenario_hash)
            if st != "done":
                res = {**res, "status": "failed", "tail": f"exit 0, but the folder is not complete ({why or st})"}
        self.outcome.runs[run.key] = res
        if res["status"] == "ok":
            self.outcome.ran += 1
            self.prog.finished(run.key, res["wall_s"])
            return
        if res["status"] == "stopped":
            return
        final = attempt >= ATTEMPTS
        self.prog.attempt_failed(run.key, final)
        rc = f"exit {res['rc']}" if res.get("rc") is not None else "no exit code"
        log = self.task(run, attempt).log
        self.prog.message(f"sweep {self.plan.spec.name}: {run.key} failed (attempt {attempt}/{ATTEMPTS}, {rc}): "
                          f"{res.get('tail', '')[-300:]}; " + (f"log {log}" if final else "retrying"))
        if final:
            self.outcome.failed.append({"key": run.key, "rc": res.get("rc"), "log": log, "tail": res.get("tail", "")})
        else:
            self.submit(client, run, attempt + 1)

    def loop(self, client: Client, todo: list[PlannedRun], stop: threading.Event) -> None:
        self.ac = as_completed(loop=client.loop)
        for r in todo:
            self.submit(client, r, 1)
        next_poll = 0.0
        while self.futures and not stop.is_set():
            for f in (self.ac.next_batch(block=False) if self.ac.has_ready() else []):
                self.handle(client, f)
            if time.monotonic() >= next_poll and self.futures:
                running = poll_running(client, self.token)
                if running is not None:
                    inflight = {r.key for r, _ in self.futures.values()}
                    self.prog.set_running({k: t for k, t in running.items() if k in inflight})
                next_poll = time.monotonic() + POLL_S
            self.prog.draw()
            stop.wait(0.2)          # the loop's period; a signal sets *stop* and ends the wait


def run_sweep(plan: SweepPlan, out: str | Path, *, scheduler: str | None = None, security: Security | None = None,
              workers: int | None = None, mem_per_run_mib: int | None = None, overwrite: bool = False,
              report: bool = True, stream: TextIO | None = sys.stderr) -> SweepOutcome:
    """Run every run of *plan* not already done into *out* (see the module docstring)."""
    t0 = time.monotonic()
    out = Path(out).resolve()
    name = plan.spec.name
    prepare_out(out, name)
    with locked(out):
        states = classify(plan, out, overwrite)
        todo = [r for r in plan.runs if states[r.key] != "done"]
        outcome = SweepOutcome(name=name, out=out, total=len(plan.runs), skipped=len(plan.runs) - len(todo))
        token = uuid.uuid4().hex
        last: dict[str, Any] = {"token": token, "started_unix_s": time.time(), "pid": os.getpid(),
                                "to_run": [r.key for r in todo]}
        write_sweep_file(out, plan, last)
        stop, got = threading.Event(), []

        def on_signal(signum, frame):  # noqa: ARG001
            got.append(signum)
            stop.set()
        main = threading.current_thread() is threading.main_thread()
        prev = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)} if main else {}
        sw = SweepLoop(plan, out, outcome, token, report)
        try:
            if todo:
                n, why = local_workers([r.nodes for r in todo], workers, mem_per_run_mib)
                with open_cluster(scheduler, n, security) as (client, desc):
                    outcome.cluster = desc if scheduler else f"{desc} ({why})"
                    outcome.workers = probe_workers(client, out, token, plan)
                    slots = max(1, sum(client.nthreads().values()))
                    sw.prog = SweepProgress(stream, name, len(plan.runs), outcome.skipped, slots=slots)
                    sw.prog.message(f"sweep {name}: {len(todo)} of {len(plan.runs)} runs to do ({outcome.skipped} "
                                    f"already done) on {outcome.cluster}, {slots} at a time")
                    sw.loop(client, todo, stop)
                    if stop.is_set():
                        outcome.stopped = got[0] if got else signal.SIGTERM
                        sw.prog.message(f"sweep {name}: signal {outcome.stopped}: stopping the runs in progress")
                        inflight = [r for r, _ in sw.futures.values()]
                        stop_all(client, list(sw.futures), token)
                        for r in inflight:        # a run may have completed as the signal came
                            if run_state(r.folder(out), r.scenario_hash)[0] == "done":
                                outcome.ran += 1
                                outcome.runs[r.key] = {"key": r.key, "status": "ok", "note": "completed as the sweep stopped"}
                            elif r.folder(out).exists():
                                outcome.interrupted.append(r.key)
                    sw.prog.close()
        finally:
            for s, h in prev.items():
                signal.signal(s, h)
            outcome.wall_s = round(time.monotonic() - t0, 3)
            write_sweep_file(out, plan, {**last, **outcome.as_json(), "finished_unix_s": time.time(),
                                         "wall": hms(outcome.wall_s)})
    return outcome


def stop_all(client: Client, futures: list, token: str) -> list[str]:
    """Cancel what has not started, and stop what runs, on every worker."""
    client.cancel(futures)
    try:
        per = client.run(stop_runs, token, on_error="return")
    except (OSError, TimeoutError):
        return []
    return sorted(k for v in per.values() if isinstance(v, list) for k in v)
