"""A cell's state file and its teardown: `up` records every resource before creating it
(`Recorder`), and `down` removes exactly those, newest first. It is idempotent and works
after a crash; nothing is ever swept by name or pattern."""
from __future__ import annotations

import json
import os
import shutil

from cellbed.cell import procs
from cellbed.cell.iproute import ip, link_exists, netns_exists
from cellbed.cell.supervise import read_pids
from cellbed.runtime.cgroups import HostCgroup, remove_empty_parents

DEFAULT_STATE_ROOT = os.environ.get("CELLBED_STATE_ROOT", "/var/lib/cellbed/cells")


def state_dir(name: str, root: str = DEFAULT_STATE_ROOT) -> str:
    return os.path.join(root, name)


def load_state(name: str, root: str = DEFAULT_STATE_ROOT) -> dict | None:
    try:
        with open(os.path.join(state_dir(name, root), "cell.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


class Recorder:
    """The cell's state file; every resource is appended before it is created."""

    def __init__(self, path: str, state: dict) -> None:
        self.path, self.state = path, state
        self.flush()

    def flush(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, self.path)

    def add(self, **res) -> dict:
        self.state["resources"].append(res)
        self.flush()
        return res


def _host_pids(hdir: str) -> dict:
    try:
        with open(os.path.join(hdir, "pids.json")) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _remove_process(res: dict, removed: list[str]) -> None:
    if "pids_file" in res:   # a supervisor (cellbed/cell/supervise.py): it first, then what it left running
        if "pid" in res and procs.stop(res, timeout_s=30):
            removed.append(f"process {res['name']} {res['pid']}")
        for name, ident in read_pids(res["pids_file"]).get("processes", {}).items():
            if procs.stop(ident, timeout_s=10):
                removed.append(f"process {name} {ident['pid']}")
        return
    if "host_dir" in res:
        hp = _host_pids(res["host_dir"])
        if "hostinit" in hp and procs.stop(hp["hostinit"], timeout_s=40):  # orderly: domains, libvirtd
            removed.append(f"process {res['name']} hostinit {hp['hostinit']['pid']}")
        for key in ("node", "libvirtd", "sshd"):
            if key in hp and procs.kill(hp[key]):
                removed.append(f"process {res['name']} {key} {hp[key]['pid']}")
    if "pid" in res and procs.stop(res, timeout_s=10):
        removed.append(f"process {res['name']} {res['pid']}")


def down(name: str = "default", root: str = DEFAULT_STATE_ROOT) -> list[str]:
    """Remove exactly what `up` recorded, newest first. Returns what was removed."""
    st = load_state(name, root)
    if st is None:
        return []
    removed: list[str] = []
    for res in reversed(st["resources"]):
        kind = res["kind"]
        if kind == "process":
            _remove_process(res, removed)
        elif kind == "cgroup":
            cg = HostCgroup(res["rel"])
            if cg.exists():
                killed = cg.kill_and_remove()
                removed.append(f"cgroup {res['rel']}" + (f" (killed {killed})" if killed else ""))
                remove_empty_parents(res["rel"], 2)
        elif kind == "link":
            if link_exists(res["name"]):
                ip("link", "del", res["name"])
                removed.append(f"link {res['name']}")
        elif kind == "netns":
            if netns_exists(res["name"]):
                ip("netns", "del", res["name"])
                removed.append(f"netns {res['name']}")
        elif kind == "dir":
            if os.path.isdir(res["path"]):
                shutil.rmtree(res["path"])
                removed.append(f"dir {res['path']}")
    return removed
