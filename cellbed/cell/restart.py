"""Killing and restarting a cell-level process that no supervisor restarts (the MASB broker and
mosquitto; issue 12's faults): by the identity the cell recorded, and again from the command line
and log it recorded, after which the record names the new process. Nothing is found by name."""
from __future__ import annotations

import os
import subprocess

from cellbed.cell import procs
from cellbed.cell.record import Recorder, load_state, state_dir
from cellbed.domain import errors


def _resource(name: str, root: str, proc: str) -> tuple[dict, dict]:
    st = load_state(name, root)
    if st is None:
        raise errors.FailedPrecondition(f"cell {name!r} is not up")
    for res in st["resources"]:
        if res.get("kind") == "process" and res.get("name") == proc:
            return st, res
    raise errors.NotFound(f"cell {name!r} recorded no {proc} process")


def kill(name: str, root: str, proc: str) -> str:
    _, res = _resource(name, root, proc)
    if not procs.alive(res):
        raise errors.FailedPrecondition(f"the recorded {proc} of cell {name!r} is not running")
    procs.kill(res)
    return f"SIGKILL {proc} (pid {res['pid']})"


def restart(name: str, root: str, proc: str) -> dict:
    """Start *proc* again from its recorded command, unless it runs; the cell's record follows."""
    st, res = _resource(name, root, proc)
    if procs.alive(res):
        return res
    if "argv" not in res:
        raise errors.FailedPrecondition(f"{proc} of cell {name!r} was recorded without its command: recreate the cell")
    with open(res["log"], "ab") as log:
        p = subprocess.Popen(res["argv"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    res.update(procs.proc_identity(p.pid))
    Recorder(os.path.join(state_dir(name, root), "cell.json"), st)     # writes the state back, atomically
    return res
