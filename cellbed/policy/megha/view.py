"""A GM's eventually consistent view of the LMs (seed 001 §IV-A) and its match over it:
internal partitions round-robin, then external partitions round-robin across LMs
(§IV-B3, IV-B4). Pure: the agent feeds it LmState messages and asks it for decisions.

The view of one LM holds the static host list (names, capacity, attributes: fetched once per
hosts digest), the owner of every host's node N, and N's free resources. Periodic updates
and failed replies carry a full state; successful replies carry a delta of the hosts they
changed. Every host remembers the LM version of its value, so an older message never
overwrites a newer one (messages may arrive out of order).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from cellbed.policy.megha.match import EPS, HostBits, PartitionBits, match_partition
from cellbed.domain.constraints import AttrValue, Constraint


@dataclasses.dataclass
class Choice:
    kind: str          # "launch" (internal partition) or "repartition" (external)
    lm: str
    host: str
    host_index: int
    scanned: int       # nodes whose bits were scanned


class LmView:
    def __init__(self, name: str) -> None:
        self.name = name
        self.instance = ""
        self.epoch = 0
        self.version = 0                 # of the newest full state applied
        self.updated_unix_s = 0.0        # sent time of the newest state applied (full or delta)
        self.full_unix_s = 0.0           # sent time of the newest full state applied
        self.digest = ""
        self.hosts: list[str] = []
        self.bits: HostBits | None = None
        self.total_cpu = np.zeros(0)
        self.total_mem = np.zeros(0)
        self.gms: list[str] = []
        self.owner = np.zeros(0, dtype=np.int64)
        self.free_cpu = np.zeros(0)
        self.free_mem = np.zeros(0)
        self.host_ver = np.zeros(0, dtype=np.int64)
        self.usage: dict[str, tuple[float, float, int]] = {}
        self.logical: dict[str, int] = {}
        self.capacity = (0.0, 0.0)
        self._parts: dict[str, PartitionBits] = {}
        self._ext: dict[str, PartitionBits] = {}
        self.pending_full = None         # a full state that arrived before its hosts were known

    @property
    def ready(self) -> bool:
        return self.bits is not None and self.free_cpu.size == len(self.hosts) and self.version > 0

    def set_hosts(self, digest: str, names: Sequence[str], cpu: Sequence[float], mem: Sequence[float],
                  attributes: Sequence[Mapping[str, AttrValue]]) -> None:
        self.digest = digest
        self.hosts = list(names)
        self.total_cpu = np.asarray(cpu, dtype=float)
        self.total_mem = np.asarray(mem, dtype=float)
        self.bits = HostBits(attributes)
        n = len(self.hosts)
        self.free_cpu, self.free_mem = np.zeros(n), np.zeros(n)
        self.owner = np.zeros(n, dtype=np.int64)
        self.host_ver = np.full(n, -1, dtype=np.int64)
        self.version = 0
        self._parts.clear()
        self._ext.clear()

    def partition(self, gm: str) -> PartitionBits:
        """GM *gm*'s partition of this LM (the hosts whose node N it owns)."""
        p = self._parts.get(gm)
        if p is None:
            gi = self.gms.index(gm) if gm in self.gms else -1
            p = self._parts[gm] = PartitionBits(self.bits, np.flatnonzero(self.owner == gi))
        return p

    def external(self, gm: str) -> PartitionBits:
        """Every other GM's partition of this LM, in host order."""
        p = self._ext.get(gm)
        if p is None:
            gi = self.gms.index(gm) if gm in self.gms else -1
            p = self._ext[gm] = PartitionBits(self.bits, np.flatnonzero(self.owner != gi))
        return p

    def apply(self, st) -> str:
        """Apply an LmState. Returns "applied", "stale" (older epoch), "need_hosts" (unknown
        digest: the caller fetches GetHosts and calls apply again) or "ignored"."""
        if st.epoch < self.epoch:
            return "stale"
        if st.hosts_digest != self.digest or self.bits is None:
            if st.full:
                self.pending_full = st
            return "need_hosts"
        n = len(self.hosts)
        v = int(st.version)
        if st.full:
            if len(st.free_cpu_cores) != n or len(st.owner) != n:
                return "ignored"
            owner = np.asarray(st.owner, dtype=np.int64)
            gms = list(st.gms)
            if gms != self.gms or not np.array_equal(owner, self.owner):
                self.gms, self.owner = gms, owner
                self._parts.clear()
                self._ext.clear()
            newer = (v >= self.host_ver) | (st.epoch > self.epoch)
            self.free_cpu[newer] = np.asarray(st.free_cpu_cores, dtype=float)[newer]
            self.free_mem[newer] = np.asarray(st.free_mem_mib, dtype=float)[newer]
            self.host_ver[newer] = v
            if v >= self.version or st.epoch > self.epoch:
                self.version = v
                self.usage = {u.user: (u.used.cpu_cores, u.used.mem_mib, u.tasks) for u in st.usage}
                self.logical = dict(zip(gms, st.logical_nodes))
                self.capacity = (st.capacity.cpu_cores, st.capacity.mem_mib)
                self.full_unix_s = max(self.full_unix_s, st.sent_unix_s)
        else:
            if not self.ready:
                return "ignored"
            idx = np.asarray(st.host_index, dtype=np.int64)
            if idx.size and (idx.max() >= n or len(st.free_cpu_cores) != idx.size):
                return "ignored"
            newer = v > self.host_ver[idx]
            sel = idx[newer]
            self.free_cpu[sel] = np.asarray(st.free_cpu_cores, dtype=float)[newer]
            self.free_mem[sel] = np.asarray(st.free_mem_mib, dtype=float)[newer]
            self.host_ver[sel] = v
            if v >= self.version:
                self.usage = {u.user: (u.used.cpu_cores, u.used.mem_mib, u.tasks) for u in st.usage}
                if st.logical_nodes:
                    self.logical = dict(zip(self.gms, st.logical_nodes))
        self.epoch = max(self.epoch, int(st.epoch))
        if st.instance:
            self.instance = st.instance
        self.updated_unix_s = max(self.updated_unix_s, st.sent_unix_s)
        return "applied"

    def reserve(self, h: int, cpu: float, mem: float) -> None:
        """Take a placement into account before the LM's next state says so."""
        self.free_cpu[h] -= cpu
        self.free_mem[h] -= mem


def _seen(observe: Callable | None, v: "LmView") -> Callable | None:
    return None if observe is None else (lambda *a: observe(v, *a))


class View:
    """The views of every LM, plus the GM's round-robin positions."""

    def __init__(self, gm: str, lms: Sequence[str], allocate: Callable | None = None, rng: Any = None) -> None:
        """*allocate*: the ``allocation`` stage's policy (R5) that picks a host within a partition
        (first fit, Megha's Algorithm 1, when none is given); *rng* is handed to it."""
        self.gm = gm
        self.allocate = allocate
        self.rng = rng
        self.lms: dict[str, LmView] = {n: LmView(n) for n in lms}
        self.order = list(lms)
        self._rr_internal = 0
        self._rr_external = 0

    def __getitem__(self, lm: str) -> LmView:
        return self.lms[lm]

    @property
    def ready(self) -> list[LmView]:
        return [v for v in self.lms.values() if v.ready]

    def known_attributes(self) -> frozenset[str]:
        out: set[str] = set()
        for v in self.lms.values():
            if v.bits is not None:
                out |= v.bits.known
        return frozenset(out)

    def largest_host(self) -> tuple[float, float, str, str]:
        """(cores, MiB, host with most cores, host with most MiB) over every known host."""
        best_c, best_m, hc, hm = 0.0, 0.0, "", ""
        for v in self.lms.values():
            if v.total_cpu.size:
                i, j = int(v.total_cpu.argmax()), int(v.total_mem.argmax())
                if v.total_cpu[i] > best_c:
                    best_c, hc = float(v.total_cpu[i]), v.hosts[i]
                if v.total_mem[j] > best_m:
                    best_m, hm = float(v.total_mem[j]), v.hosts[j]
        return best_c, best_m, hc, hm

    def capacity(self) -> tuple[float, float]:
        c = m = 0.0
        for v in self.lms.values():
            c += float(v.total_cpu.sum())
            m += float(v.total_mem.sum())
        return c, m

    def usage(self) -> dict[str, tuple[float, float, int]]:
        """Per user: (cores, MiB, tasks) summed over every LM's last state."""
        out: dict[str, list[float]] = {}
        for v in self.lms.values():
            for u, (c, m, n) in v.usage.items():
                a = out.setdefault(u, [0.0, 0.0, 0])
                a[0] += c
                a[1] += m
                a[2] += n
        return {u: (a[0], a[1], int(a[2])) for u, a in out.items()}

    # --- match (Fig. 2) --------------------------------------------------------------------
    def match(self, constraints: Sequence[Constraint], cpu: float, mem: float,
              external: bool = True, observe: Callable | None = None) -> tuple[Choice | None, int]:
        """Internal partitions round-robin over LMs, then (if *external*) the other GMs'
        partitions round-robin over LMs. Advances the round-robin positions. Returns the
        choice (or None) and the number of nodes scanned. *observe(lm_view, hosts, offered, free_cpu,
        free_mem, chosen)* sees each partition's decision (an explanation)."""
        order = [self.lms[n] for n in self.order]
        k = len(order)
        scanned = 0
        for j in range(k):
            v = order[(self._rr_internal + j) % k]
            if not v.ready:
                continue
            part = v.partition(self.gm)
            scanned += len(part)
            h = match_partition(part, constraints, v.free_cpu, v.free_mem, cpu, mem, v.total_cpu, v.total_mem,
                                self.allocate, self.rng, _seen(observe, v))
            if h >= 0:
                self._rr_internal = (self._rr_internal + j + 1) % k
                return Choice("launch", v.name, v.hosts[h], h, scanned), scanned
        self._rr_internal = (self._rr_internal + 1) % max(k, 1)
        if not external:
            return None, scanned
        for j in range(k):
            v = order[(self._rr_external + j) % k]
            if not v.ready:
                continue
            part = v.external(self.gm)
            scanned += len(part)
            h = match_partition(part, constraints, v.free_cpu, v.free_mem, cpu, mem, v.total_cpu, v.total_mem,
                                self.allocate, self.rng, _seen(observe, v))
            if h >= 0:
                self._rr_external = (self._rr_external + j + 1) % k
                return Choice("repartition", v.name, v.hosts[h], h, scanned), scanned
        self._rr_external = (self._rr_external + 1) % max(k, 1)
        return None, scanned

    def why_not(self, constraints: Sequence[Constraint], cpu: float, mem: float) -> str:
        """Why nothing matches, with the numbers (for the task's visible status)."""
        n = matching = 0
        best_c = best_m = 0.0
        fits_total = 0
        for v in self.lms.values():
            if not v.ready:
                continue
            mask = v.bits.mask(constraints)
            n += len(v.hosts)
            matching += int(mask.sum())
            if mask.any():
                best_c = max(best_c, float(v.free_cpu[mask].max()))
                best_m = max(best_m, float(v.free_mem[mask].max()))
                fits_total += int((mask & (v.total_cpu >= cpu - EPS) & (v.total_mem >= mem - EPS)).sum())
        if not matching:
            return f"no host satisfies the constraints (0 of {n} hosts)"
        if not fits_total:
            return f"{matching} of {n} hosts satisfy the constraints, but none is big enough for {cpu:.3f} cores / {mem:.0f} MiB"
        return (f"waiting for room: {matching} of {n} hosts satisfy the constraints; the most free on them is "
                f"{best_c:.3f} cores / {best_m:.0f} MiB, the task needs {cpu:.3f} cores / {mem:.0f} MiB")
