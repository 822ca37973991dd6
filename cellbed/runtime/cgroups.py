"""Host capacity as cgroups: CPU quota and memory limit on one emulated host's processes.

Handles cgroup v1 (separate cpu, cpuacct and memory hierarchies, as on this project's
machines) and v2 (one unified hierarchy). A HostCgroup only ever touches the one relative
path it was given, which its creator records; nothing is swept by name.
"""
from __future__ import annotations

import dataclasses
import errno
import os
import signal
import time

CFS_PERIOD_US = 100_000


def _mounts(proc_mounts: str = "/proc/mounts") -> tuple[dict[str, str], str | None]:
    """Return ({v1 controller: mount point}, v2 mount point or None)."""
    v1: dict[str, str] = {}
    v2 = None
    with open(proc_mounts) as f:
        for line in f:
            dev, mnt, fstype, opts, *_ = line.split()
            if fstype == "cgroup2":
                v2 = mnt
            elif fstype == "cgroup":
                for o in opts.split(","):
                    if o in ("cpu", "cpuacct", "memory"):
                        v1[o] = mnt
    return v1, v2


@dataclasses.dataclass
class HostCgroup:
    """The cgroup(s) of one emulated host, at *rel* below each hierarchy's root."""

    rel: str

    def __post_init__(self) -> None:
        v1, v2 = _mounts()
        if {"cpu", "memory"} <= v1.keys():
            self.version = 1
            self.paths = {c: os.path.join(v1[c], self.rel) for c in ("cpu", "cpuacct", "memory") if c in v1}
        elif v2:
            self.version = 2
            self.paths = {"unified": os.path.join(v2, self.rel)}
        else:
            raise RuntimeError("no usable cgroup hierarchy (need v1 cpu+memory or v2)")

    # -- lifecycle ---------------------------------------------------------------
    def create(self, cpu_cores: float, mem_limit_mib: int) -> list[str]:
        """Create the cgroup(s) and set the limits; return the directories created."""
        made = []
        if self.version == 2:
            self._enable_v2_controllers()
        for p in dict.fromkeys(self.paths.values()):
            if not os.path.isdir(p):
                os.makedirs(p)
                made.append(p)
        quota = max(1000, int(cpu_cores * CFS_PERIOD_US))
        mem = int(mem_limit_mib) * 1024 * 1024
        if self.version == 1:
            self._write("cpu", "cpu.cfs_period_us", str(CFS_PERIOD_US))
            self._write("cpu", "cpu.cfs_quota_us", str(quota))
            self._write("memory", "memory.limit_in_bytes", str(mem))
        else:
            self._write("unified", "cpu.max", f"{quota} {CFS_PERIOD_US}")
            self._write("unified", "memory.max", str(mem))
        return made

    def _enable_v2_controllers(self) -> None:
        root = self.paths["unified"][: -len(self.rel)].rstrip("/")
        parts = self.rel.strip("/").split("/")
        cur = root
        for part in parts:
            try:
                with open(os.path.join(cur, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu +memory")
            except OSError:
                pass
            cur = os.path.join(cur, part)
            os.makedirs(cur, exist_ok=True)

    def add_pid(self, pid: int) -> None:
        for p in dict.fromkeys(self.paths.values()):
            with open(os.path.join(p, "cgroup.procs"), "w") as f:
                f.write(str(pid))

    def pids(self) -> set[int]:
        out: set[int] = set()
        for p in dict.fromkeys(self.paths.values()):
            try:
                with open(os.path.join(p, "cgroup.procs")) as f:
                    out.update(int(x) for x in f.read().split())
            except FileNotFoundError:
                pass
        return out

    def exists(self) -> bool:
        return any(os.path.isdir(p) for p in self.paths.values())

    def kill_and_remove(self, timeout_s: float = 10.0) -> list[int]:
        """SIGKILL every process inside this cgroup (they were all started inside it, by us),
        wait for them to leave, then remove the directories. Returns the PIDs killed."""
        killed = sorted(self.pids())
        for pid in killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the kernel's view until the processes are reaped
        for p in dict.fromkeys(self.paths.values()):
            # Leaf first; the parent folders (cellbed/<cell>) are removed if empty.
            try:
                os.rmdir(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                raise RuntimeError(f"cgroup {p} still busy: pids {sorted(self.pids())}") from e
        return killed

    # -- measurement --------------------------------------------------------------
    def cpu_usage_ns(self) -> int | None:
        try:
            if self.version == 1:
                return int(self._read("cpuacct", "cpuacct.usage"))
            for line in self._read("unified", "cpu.stat").splitlines():
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) * 1000
        except (OSError, KeyError, ValueError):
            return None
        return None

    def mem_usage_bytes(self) -> int | None:
        try:
            if self.version == 1:
                return int(self._read("memory", "memory.usage_in_bytes"))
            return int(self._read("unified", "memory.current"))
        except (OSError, KeyError, ValueError):
            return None

    def _write(self, ctl: str, name: str, value: str) -> None:
        with open(os.path.join(self.paths[ctl], name), "w") as f:
            f.write(value)

    def _read(self, ctl: str, name: str) -> str:
        with open(os.path.join(self.paths[ctl], name)) as f:
            return f.read().strip()


def remove_empty_parents(rel: str, levels: int) -> None:
    """Remove up to *levels* empty parent folders of *rel* in every hierarchy (the
    cellbed/<cell> folders that the cell created above its hosts)."""
    v1, v2 = _mounts()
    roots = set(v1.values()) | ({v2} if v2 else set())
    for root in roots:
        cur = os.path.dirname(rel.strip("/"))
        for _ in range(levels):
            if not cur:
                break
            try:
                os.rmdir(os.path.join(root, cur))
            except OSError:
                break
            cur = os.path.dirname(cur)
