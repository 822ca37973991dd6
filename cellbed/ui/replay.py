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

import csv
import math
import re
from dataclasses import dataclass
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
    times: np.ndarray                       # count events, sorted by time
    host_idx: np.ndarray                    # their host
    delta: np.ndarray                       # +1 / -1 (model); 1 per VM sample (exact)
    vms: np.ndarray                         # VM names, by VM id
    loc_vm: np.ndarray                      # where-is events (placement, arrival, sample), by (VM id, time)
    loc_t: np.ndarray
    loc_host: np.ndarray
    sample_times: np.ndarray | None = None  # exact: the ticks sampled

    @property
    def index(self) -> dict[str, int]:
        return {h: i for i, h in enumerate(self.hosts)}

    def _at(self, t: float) -> float:
        """The time whose state is shown at t: t itself, or (exact) the last sample at or before t."""
        if self.sample_times is None:
            return t
        i = int(np.searchsorted(self.sample_times, t, side="right")) - 1
        return float(self.sample_times[i]) if i >= 0 else -math.inf

    def counts_at(self, t: float) -> np.ndarray:
        at = self._at(t)
        lo = int(np.searchsorted(self.times, at, side="left")) if self.exact else 0
        hi = int(np.searchsorted(self.times, at, side="right"))
        return np.bincount(self.host_idx[lo:hi], weights=self.delta[lo:hi], minlength=len(self.hosts)).astype(np.int64)

    def vms_on(self, host: str, t: float) -> list[str]:
        """The VMs whose last where-is event at or before t puts them on *host*."""
        at = self._at(t)
        h = self.index.get(host, -1)
        keep = self.loc_t <= at
        vm, where = self.loc_vm[keep], self.loc_host[keep]
        if self.exact:
            ts = self.loc_t[keep]
            last = ts == at
        else:
            last = np.r_[vm[1:] != vm[:-1], True] if vm.size else np.zeros(0, dtype=bool)
        return sorted(self.vms[vm[last & (where == h)]].tolist(), key=natural)


def _encode(names: np.ndarray, codes: dict[str, int]) -> np.ndarray:
    return np.fromiter((codes.setdefault(n, len(codes)) for n in names.tolist()), dtype=np.int64, count=len(names))


def _hosts(names: set[str], nodes: int) -> list[str]:
    """Every host name: the ones the files name, and for a model cell of *nodes* hosts named n<i>,
    the ones that never got a VM."""
    out = set(n for n in names if n)
    if nodes and all(re.fullmatch(r"n\d+", n) for n in out):
        out |= {f"n{i}" for i in range(nodes)}
    return sorted(out, key=natural)


def _build(hosts_seen: dict[str, int], nodes: int, host_codes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The hosts in natural order, and *host_codes* (codes of *hosts_seen*) mapped to their index."""
    hosts = _hosts(set(hosts_seen), nodes)
    pos = {h: i for i, h in enumerate(hosts)}
    remap = np.array([pos[h] for h in hosts_seen], dtype=np.int64)
    return hosts, remap[host_codes] if host_codes.size else host_codes


def from_model(alloc: dict[str, np.ndarray], mig: dict[str, np.ndarray], nodes: int) -> Replay:
    """*alloc*: allocations.csv columns task, host, start_s, outcome; *mig*: migrations.csv columns
    t_s, vm, src, dst, outcome, time_ms."""
    placed = (alloc["outcome"] == "placed") & (alloc["host"] != "")
    a_task, a_host, a_t = alloc["task"][placed], alloc["host"][placed], alloc["start_s"][placed]
    ok = mig["outcome"] == "succeeded"
    m_t = mig["t_s"][ok] + np.nan_to_num(mig["time_ms"][ok], nan=0.0) / 1000.0
    hc: dict[str, int] = {}
    codes = _encode(np.concatenate([a_host, mig["src"][ok], mig["dst"][ok]]), hc)
    hosts, idx = _build(hc, nodes, codes)
    na, nm = len(a_t), len(m_t)
    src, dst = idx[na:na + nm], idx[na + nm:]
    times = np.concatenate([a_t, m_t, m_t])
    order = np.argsort(times, kind="stable")
    delta = np.concatenate([np.ones(na), -np.ones(nm), np.ones(nm)])
    vc: dict[str, int] = {}
    vm = _encode(np.concatenate([a_task, mig["vm"][ok]]), vc)
    loc_t, loc_host = np.concatenate([a_t, m_t]), np.concatenate([idx[:na], dst])
    lo = np.lexsort((loc_t, vm))
    note = ("VMs placed or moved onto each host up to t (a model run's results folder does not record task "
            "ends, so this is an upper bound)")
    return Replay(hosts, False, note, times[order], np.concatenate([idx[:na], src, dst])[order], delta[order],
                  np.array(list(vc), dtype=object), vm[lo], loc_t[lo], loc_host[lo])


def from_vms_csv(path: Path) -> Replay:
    """A real run's vms.csv: one row per VM per tick, with its host."""
    t_l, h_l, v_l = [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            try:
                t = float(r["t_s"])
            except (KeyError, ValueError):
                continue
            if math.isfinite(t) and r.get("host"):
                t_l.append(t)
                h_l.append(r["host"])
                v_l.append(r.get("vm", ""))
    t = np.array(t_l, dtype=np.float64)
    hc: dict[str, int] = {}
    hosts, idx = _build(hc, 0, _encode(np.array(h_l, dtype=object), hc))
    vc: dict[str, int] = {}
    vm = _encode(np.array(v_l, dtype=object), vc)
    order = np.argsort(t, kind="stable")
    lo = np.lexsort((t, vm))
    return Replay(hosts, True, "VMs on each host at the last sample before t (vms.csv)", t[order], idx[order],
                  np.ones(len(t)), np.array(list(vc), dtype=object), vm[lo], t[lo], idx[lo], np.unique(t))
