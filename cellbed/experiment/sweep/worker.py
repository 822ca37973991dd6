"""What a sweep's Dask workers run (cellbed/experiment/sweep/run.py submits it): one attempt of
one run as a ``cellctl run`` child process, the list of runs alive on this worker, stopping them,
and a probe of what this worker sees.

Each worker process keeps its children in a registry (by sweep invocation and run key), so that
the client can ask which runs are running and stop them (Dask cannot interrupt a running task).
The child dies with the worker thread that started it (PR_SET_PDEATHSIG, checked against a worker
that died before the call) and runs in its own session: a Ctrl-C at the terminal reaches only the
sweep, which stops its runs itself, each with SIGTERM (the runner then ends events.jsonl with
run_failed). ``python -P``: the child's folder (the sweep's) is not put on sys.path.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from distributed import get_worker

import cellbed

__all__ = ["RunTask", "execute_run", "probe", "running_runs", "stop_runs"]

CHILD = ("import ctypes, os, signal, sys\n"
         "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"      # PR_SET_PDEATHSIG
         "if os.getppid() != int(sys.argv[1]):\n"
         "    sys.exit(128 + signal.SIGTERM)\n"                               # the worker died before prctl
         "from cellbed.cli.main import main\n"
         "main(sys.argv[2:])\n")
STOP_WAIT_S = 60.0


@dataclasses.dataclass(frozen=True)
class RunTask:
    """What a worker needs to run one attempt of one run."""

    token: str                 # the sweep invocation
    key: str                   # <stem>/<point>/seed-<n>
    scenario: str
    overrides: tuple[str, ...]
    folder: str
    log: str
    overwrite: bool            # the folder holds a previous run (a failed or stopped attempt)
    report: bool
    attempt: int
    cwd: str

    def argv(self) -> list[str]:
        a = ["run", self.scenario, "--out", self.folder, "--quiet"]
        for o in self.overrides:
            a += ["--set", o]
        return a + (["--overwrite"] if self.overwrite else []) + ([] if self.report else ["--no-report"])


_LOCK = threading.Lock()
_RUNNING: dict[str, dict[str, tuple[subprocess.Popen, float]]] = {}     # token → key → (child, start)
_STOPPED: set[str] = set()


def tail(path: str | Path, limit: int = 600) -> str:
    """The last lines of a log, joined with ' | ', at most *limit* characters."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " | ".join(x.strip() for x in text.splitlines() if x.strip())[-limit:]


def _where() -> str:
    try:
        return get_worker().address
    except ValueError:                           # not in a Dask worker (a direct call)
        return f"pid {os.getpid()}"


def execute_run(task: RunTask) -> dict[str, Any]:
    """One attempt: ``cellctl run`` as a child process; its output goes to ``task.log``."""
    t0 = time.time()
    base = {"key": task.key, "attempt": task.attempt, "worker": _where(), "host": socket.gethostname()}
    Path(task.log).parent.mkdir(parents=True, exist_ok=True)
    with open(task.log, "wb") as out:
        with _LOCK:
            if task.token in _STOPPED:
                return {**base, "status": "stopped", "rc": None, "wall_s": 0.0}
            child = subprocess.Popen([sys.executable, "-P", "-c", CHILD, str(os.getpid()), *task.argv()],
                                     stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=task.cwd,
                                     start_new_session=True)
            _RUNNING.setdefault(task.token, {})[task.key] = (child, t0)
        try:
            rc = child.wait()
        finally:
            with _LOCK:
                _RUNNING.get(task.token, {}).pop(task.key, None)
    status = "ok" if rc == 0 else ("stopped" if task.token in _STOPPED else "failed")
    return {**base, "status": status, "rc": rc, "wall_s": round(time.time() - t0, 3), "pid": child.pid,
            "tail": "" if rc == 0 else tail(task.log)}


def running_runs(token: str) -> dict[str, float]:
    """The runs of sweep *token* whose child is alive on this worker: key → start (unix s)."""
    with _LOCK:
        return {k: t0 for k, (p, t0) in _RUNNING.get(token, {}).items() if p.poll() is None}


def stop_runs(token: str, wait_s: float = STOP_WAIT_S) -> list[str]:
    """SIGTERM every run of sweep *token* on this worker and wait for them (SIGKILL after
    *wait_s*); no later task of the sweep starts here. Returns the keys stopped."""
    with _LOCK:
        _STOPPED.add(token)
        kids = dict(_RUNNING.get(token, {}))
    for p, _ in kids.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    for p, _ in kids.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return sorted(kids)


def probe(sweep_file: str, token: str, files: list[str]) -> dict[str, Any]:
    """What a worker sees: the sweep's file of this invocation, and the scenario files."""
    try:
        sees = token in Path(sweep_file).read_text(encoding="utf-8")
    except OSError:
        sees = False
    return {"host": socket.gethostname(), "python": sys.executable, "cellbed": os.path.dirname(cellbed.__file__),
            "sees_out": sees, "missing": [f for f in files if not os.path.isfile(f)], "cpus": os.cpu_count()}
