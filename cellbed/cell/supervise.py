"""A cell's supervisor of long-running agent processes (Megha's GMs and LMs, issue 15):
`python -m cellbed.cell.supervise SPECFILE`.

`cellctl cell up --megha` records this process in the cell's state (with its start time and
the path of its pids file) before starting it. It starts every process the spec names, in
order, records each one's identity (pid + start time) in the pids file as soon as it is
started, and restarts a process whenever it exits (backoff 0.5 s per consecutive quick exit,
at most 5 s), recording the new identity and counting the restart. On SIGTERM or SIGINT it
stops them all (SIGTERM, SIGKILL after 10 s) and exits.

It is the processes' parent, so it learns of an exit at once and reaps it; and it is the only
writer of its pids file, so nothing races with the cell's state file. `cell down`
(cellbed/cell/record.py) stops the supervisor first, then stops whatever the pids file still
names: after a crash of the supervisor its children are still found by identity, never by name.

SPECFILE (JSON): {"pids_file": PATH, "processes": [{"name": N, "argv": [...], "log": PATH}, ...]}
pids file (JSON): {"supervisor": IDENT, "processes": {N: IDENT}, "restarts": {N: count}}
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from cellbed.cell.procs import proc_identity

POLL_S = 0.25           # how often the supervisor looks at its children
STEADY_S = 10.0         # a process that ran this long resets its backoff
STOP_GRACE_S = 10.0     # SIGTERM to SIGKILL


def read_pids(path: str) -> dict:
    """The pids file, or an empty record if the supervisor never wrote one."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def backoff_s(quick_exits: int) -> float:
    """Delay before the restart after *quick_exits* consecutive exits within STEADY_S of a start."""
    return min(5.0, 0.5 * quick_exits)


class Supervisor:
    def __init__(self, spec: dict) -> None:
        self.pids_file = spec["pids_file"]
        self.specs = list(spec["processes"])
        self.procs: dict[str, subprocess.Popen] = {}
        self.started_at: dict[str, float] = {}
        self.due: dict[str, float] = {s["name"]: 0.0 for s in self.specs}
        self.quick: dict[str, int] = {s["name"]: 0 for s in self.specs}
        self.record = {"supervisor": proc_identity(os.getpid()), "processes": {},
                       "restarts": {s["name"]: 0 for s in self.specs}}
        self.stopping = False
        self._write()

    def _write(self) -> None:
        tmp = self.pids_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.record, f, indent=1)
        os.replace(tmp, self.pids_file)

    def _start(self, s: dict) -> None:
        with open(s["log"], "ab") as log:
            p = subprocess.Popen(s["argv"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs[s["name"]] = p
        self.started_at[s["name"]] = time.monotonic()
        self.record["processes"][s["name"]] = proc_identity(p.pid)
        self._write()

    def step(self) -> None:
        """Start what is due, note what exited (and when to restart it)."""
        now = time.monotonic()
        for s in self.specs:
            name = s["name"]
            p = self.procs.get(name)
            if p is not None and p.poll() is not None:
                del self.procs[name]
                ran = now - self.started_at[name]
                self.quick[name] = 0 if ran >= STEADY_S else self.quick[name] + 1
                self.due[name] = now + backoff_s(self.quick[name])
                self.record["restarts"][name] += 1
                print(f"{name} (pid {p.pid}) exited with {p.returncode} after {ran:.1f} s; restart "
                      f"#{self.record['restarts'][name]} in {backoff_s(self.quick[name]):.1f} s", flush=True)
            if name not in self.procs and now >= self.due[name] and not self.stopping:
                self._start(s)
                print(f"{name} started: pid {self.procs[name].pid}", flush=True)

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for name, p in self.procs.items():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
            print(f"{name} (pid {p.pid}) stopped: {p.returncode}", flush=True)
        self.procs.clear()

    def run(self) -> None:
        def on_term(_sig, _frm) -> None:
            self.stopping = True
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        while not self.stopping:
            self.step()
            time.sleep(POLL_S)    # the supervisor's polling period
        self.stop_all()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m cellbed.cell.supervise SPECFILE")
    with open(args[0]) as f:
        spec = json.load(f)
    Supervisor(spec).run()


if __name__ == "__main__":
    main()
