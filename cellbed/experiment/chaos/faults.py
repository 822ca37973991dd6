"""Fault injection on a real single-box cell (issue 12), with the real mechanisms and only on what
the cell recorded: SIGKILL of a process by the PID (and start time) its host recorded in
pids.json, of a VM's QEMU found in the host's recorded cgroup by its exact domain name, and
iproute2/tc inside the host's own network namespace. Nothing is acted on by name pattern.

Every injector returns a one-line description of what it did, for the campaign's history.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

from cellbed.cell import procs
from cellbed.domain import errors
from cellbed.runtime.cgroups import HostCgroup

def host_pids(sdir: str, host: str) -> dict:
    with open(os.path.join(sdir, host, "pids.json")) as f:
        return json.load(f)


def kill_recorded(sdir: str, host: str, key: str) -> str:
    """SIGKILL *host*'s recorded *key* process ("node" or "libvirtd"); its supervisor restarts it."""
    ident = host_pids(sdir, host).get(key)
    if ident is None or not procs.alive(ident):
        raise errors.FailedPrecondition(f"{host}: no live recorded {key} process to kill")
    procs.kill(ident)
    return f"SIGKILL {key} of {host} (pid {ident['pid']})"


def wait_restarted(sdir: str, host: str, key: str, old_pid: int, timeout_s: float = 60.0) -> dict:
    """Until *host*'s supervisor has recorded a new live *key* process."""
    deadline = time.monotonic() + timeout_s
    while True:
        ident = host_pids(sdir, host).get(key, {})
        if ident.get("pid") not in (None, old_pid) and procs.alive(ident):
            return ident
        if time.monotonic() > deadline:
            raise errors.DeadlineExceeded(f"{host}: {key} not restarted within {timeout_s:.0f} s")
        time.sleep(0.1)


def qemu_pid(state: dict, host: str, vm: str) -> int | None:
    """The QEMU of domain *vm* among the processes of *host*'s recorded cgroup."""
    cg = HostCgroup(f"cellbed/{state['name']}/{host}")
    for pid in sorted(cg.pids()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and b"qemu-system" in os.path.basename(argv[0]) and f"guest={vm},".encode() in b" ".join(argv):
            return pid
    return None


def kill_qemu(state: dict, host: str, vm: str) -> str:
    pid = qemu_pid(state, host, vm)
    if pid is None:
        raise errors.FailedPrecondition(f"{host}: no QEMU of {vm} in the host's cgroup")
    procs.kill(procs.proc_identity(pid))
    return f"SIGKILL QEMU of {vm} on {host} (pid {pid})"


def _ns(state: dict, host: str) -> str:
    return state["hosts"][host]["netns"]


def link(state: dict, host: str, up: bool) -> str:
    subprocess.run(["ip", "-n", _ns(state, host), "link", "set", "eth0", "up" if up else "down"], check=True)
    return f"link of {host} {'up' if up else 'down'}"


def netem_missing(state: dict) -> str:
    """Why ``tc netem`` cannot run on this kernel ("" if it can): probed on the first host's eth0,
    inside the cell's own namespace, and removed at once."""
    host = sorted(state["hosts"])[0]
    r = subprocess.run(["tc", "-n", _ns(state, host), "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", "1ms"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"tc netem is not available on this kernel ({r.stderr.strip() or r.returncode}; CONFIG_NET_SCH_NETEM)"
    netem(state, host, None)
    return ""


def throttle(state: dict, host: str, on: bool) -> str:
    """A token-bucket squeeze of the host's eth0 (tc tbf, 2 Mbit/s): real, and present on kernels without netem."""
    ns = _ns(state, host)
    if not on:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"], capture_output=True)
        return f"throttle on {host} removed"
    subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "2mbit", "burst", "32kbit",
                    "latency", "400ms"], check=True)
    return f"tbf 2mbit on {host}"


def netem(state: dict, host: str, spec: list[str] | None) -> str:
    """``tc netem`` on the host's eth0 inside its namespace (*spec*, e.g. ["loss", "30%"]); None removes it."""
    ns = _ns(state, host)
    if spec is None:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"], capture_output=True)
        return f"netem on {host} removed"
    subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "netem", *spec], check=True)
    return f"netem {' '.join(spec)} on {host}"
