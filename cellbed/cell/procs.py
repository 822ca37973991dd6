"""Process identity: a PID plus its start time, so a recorded process is never confused
with a later process that happens to reuse the PID."""
from __future__ import annotations

import os
import signal
import time


def start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(data.rsplit(")", 1)[1].split()[19])


def proc_identity(pid: int) -> dict:
    return {"pid": pid, "start": start_time(pid)}


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return ""


def alive(ident: dict) -> bool:
    """The recorded process still runs: same PID and start time, and not a zombie (a killed child
    of some other process, not yet reaped by it, is dead although /proc still lists it)."""
    st = start_time(ident["pid"])
    return st is not None and st == ident.get("start") and _state(ident["pid"]) not in ("Z", "X", "")


def stop(ident: dict, timeout_s: float = 10.0) -> bool:
    """SIGTERM the recorded process, SIGKILL after *timeout_s*. False if it was gone already."""
    if not alive(ident):
        return False
    pid = ident["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(ident) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.05)
    if alive(ident):
        os.kill(pid, signal.SIGKILL)
        while alive(ident) and time.monotonic() < deadline + 5:
            _reap(pid)
            time.sleep(0.05)
    return True


def kill(ident: dict) -> bool:
    if not alive(ident):
        return False
    os.kill(ident["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(ident) and time.monotonic() < deadline:
        _reap(ident["pid"])
        time.sleep(0.02)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
