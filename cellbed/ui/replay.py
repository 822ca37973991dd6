"""Hosts and VMs of a results folder at any time t, for the run view's time slider.

A real run's ``vms.csv`` says where each VM was at each tick: the replay is exact. A model run
keeps no per-host series, so the replay is rebuilt from what the folder has: each task's placement
(allocations.csv: host, start_s) and each succeeded migration (migrations.csv: src -> dst, done at
t_s + time_ms). Task ends are not in a results folder, so a model replay counts every VM placed
or moved onto a host up to t: an upper bound, which the page says.

Built once per run, on the first request (host detail is on demand); a query is one
``searchsorted`` and one ``bincount`` over the events before t.
"""
from __future__ import annotations

import bisect
import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VMS_CSV = "vms.csv"
_NUM = re.compile(r"(\d+)")


def natural(name: str) -> tuple:
    """n2 before n10."""
    return tuple(int(p) if p.isdigit() else p for p in _NUM.split(name))


@dataclass
class Replay:
    hosts: list[str]
    exact: bool
    note: str
    times: np.ndarray                       # event times, sorted
    host_idx: np.ndarray                    # host of each event
    delta: np.ndarray                       # +1 / -1 (model), or the count itself at a sample (exact)
    vm_moves: dict[str, list[tuple[float, str]]] = field(default_factory=dict)   # vm -> [(t, host)], sorted
    sample_times: np.ndarray | None = None  # exact: the ticks sampled

    @property
    def index(self) -> dict[str, int]:
        return {h: i for i, h in enumerate(self.hosts)}

    def counts_at(self, t: float) -> np.ndarray:
        if self.exact:
            return self._sample(t)
        k = int(np.searchsorted(self.times, t, side="right"))
        return np.bincount(self.host_idx[:k], weights=self.delta[:k], minlength=len(self.hosts)).astype(np.int64)

    def _sample(self, t: float) -> np.ndarray:
        assert self.sample_times is not None
        i = int(np.searchsorted(self.sample_times, t, side="right")) - 1
        out = np.zeros(len(self.hosts), dtype=np.int64)
        if i < 0:
            return out
        at = self.sample_times[i]
        lo, hi = np.searchsorted(self.times, at, side="left"), np.searchsorted(self.times, at, side="right")
        np.add.at(out, self.host_idx[lo:hi], 1)
        return out

    def host_at(self, vm: str, t: float) -> str:
        moves = self.vm_moves.get(vm, [])
        i = bisect.bisect_right(moves, (t, "\uffff")) - 1
        return moves[i][1] if i >= 0 else ""

    def vms_on(self, host: str, t: float) -> list[str]:
        if self.exact:
            assert self.sample_times is not None
            i = int(np.searchsorted(self.sample_times, t, side="right")) - 1
            if i < 0:
                return []
            at = self.sample_times[i]
            return sorted((vm for vm, moves in self.vm_moves.items() if (at, host) in moves), key=natural)
        return sorted((vm for vm, moves in self.vm_moves.items() if self.host_at(vm, t) == host), key=natural)


def _hosts(names: set[str], nodes: int) -> list[str]:
    """Every host name: the ones the files name, and for a model cell of *nodes* hosts named n<i>,
    the ones that never got a VM."""
    out = set(n for n in names if n)
    if nodes and all(re.fullmatch(r"n\d+", n) for n in out):
        out |= {f"n{i}" for i in range(nodes)}
    return sorted(out, key=natural)


def from_model(alloc: dict[str, np.ndarray], mig: dict[str, np.ndarray], nodes: int) -> Replay:
    """*alloc*: allocations.csv columns task, host, start_s, outcome; *mig*: migrations.csv columns
    t_s, vm, src, dst, outcome, time_ms."""
    placed = (alloc["outcome"] == "placed") & (alloc["host"] != "")
    a_task, a_host, a_t = alloc["task"][placed], alloc["host"][placed], alloc["start_s"][placed]
    ok = mig["outcome"] == "succeeded"
    dur = np.nan_to_num(mig["time_ms"][ok], nan=0.0) / 1000.0
    m_vm, m_src, m_dst, m_t = mig["vm"][ok], mig["src"][ok], mig["dst"][ok], mig["t_s"][ok] + dur
    hosts = _hosts(set(a_host.tolist()) | set(m_src.tolist()) | set(m_dst.tolist()), nodes)
    ix = {h: i for i, h in enumerate(hosts)}
    times = np.concatenate([a_t, m_t, m_t])
    host_idx = np.array([ix[h] for h in a_host.tolist()] + [ix[h] for h in m_src.tolist()]
                        + [ix[h] for h in m_dst.tolist()], dtype=np.int64)
    delta = np.concatenate([np.ones(len(a_t)), -np.ones(len(m_t)), np.ones(len(m_t))])
    order = np.argsort(times, kind="stable")
    moves: dict[str, list[tuple[float, str]]] = {}
    for task, h, t in zip(a_task.tolist(), a_host.tolist(), a_t.tolist()):
        moves.setdefault(task, []).append((t, h))
    for vm, h, t in zip(m_vm.tolist(), m_dst.tolist(), m_t.tolist()):
        moves.setdefault(vm, []).append((t, h))
    for v in moves.values():
        v.sort()
    note = ("VMs placed or moved onto each host up to t (a model run's results folder does not record task "
            "ends, so this is an upper bound)")
    return Replay(hosts, False, note, times[order], host_idx[order], delta[order], moves)


def from_vms_csv(path: Path, nodes_hint: list[str] = ()) -> Replay:
    """A real run's vms.csv: one row per VM per tick, with its host."""
    rows: list[tuple[float, str, str]] = []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            try:
                t = float(r["t_s"])
            except (KeyError, ValueError):
                continue
            if math.isfinite(t) and r.get("host"):
                rows.append((t, r["host"], r.get("vm", "")))
    hosts = _hosts({h for _, h, _ in rows} | set(nodes_hint), 0)
    ix = {h: i for i, h in enumerate(hosts)}
    rows.sort()
    times = np.array([t for t, _, _ in rows], dtype=np.float64)
    host_idx = np.array([ix[h] for _, h, _ in rows], dtype=np.int64)
    moves: dict[str, list[tuple[float, str]]] = {}
    for t, h, vm in rows:
        moves.setdefault(vm, []).append((t, h))
    return Replay(hosts, True, "VMs on each host at the last sample before t (vms.csv)", times, host_idx,
                  np.ones(len(rows)), moves, np.unique(times))
