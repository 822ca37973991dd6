"""Constraint bit-vectors and the GM's match (seed 001 §IV-B, Algorithm 1).

For every partition the GM keeps one bit-vector per constraint, one bit per node: "node
satisfies the constraint". A task's candidates are the AND of the vectors of its
constraints; the match is the first candidate (in partition order) whose free resources
cover the request (eq. 6). The vectors are numpy bool arrays (one byte per node, so the AND
runs word-wide); they depend only on the hosts' static attributes and are computed once per
(partition, constraint), the first time a task asks for that constraint.

Paper erratum (digest F.9): Algorithm 1 sizes the candidate vector by the number of
constraints; it is one bit per node of the partition.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from cellbed.domain.constraints import AttrValue, Constraint
from cellbed.policy.api.records import Hosts

# Resource comparisons tolerate float noise from sums of many requests (cores, MiB).
EPS = 1e-9


class HostBits:
    """The static attributes of one LM's hosts, as per-constraint bit-vectors over all its hosts."""

    def __init__(self, attributes: Sequence[Mapping[str, AttrValue]]) -> None:
        self.attributes = [dict(a) for a in attributes]
        self.n = len(self.attributes)
        self.known: frozenset[str] = frozenset(k for a in self.attributes for k in a)
        self._vec: dict[Constraint, np.ndarray] = {}
        self.ones = np.ones(self.n, dtype=bool)

    def vector(self, c: Constraint) -> np.ndarray:
        v = self._vec.get(c)
        if v is None:
            v = self._vec[c] = np.fromiter((c.matches(a) for a in self.attributes), dtype=bool, count=self.n)
        return v

    def mask(self, constraints: Iterable[Constraint]) -> np.ndarray:
        """AND of the constraints' vectors over every host (a fresh array)."""
        out = self.ones.copy()
        for c in constraints:
            out &= self.vector(c)
        return out


class PartitionBits:
    """One partition's bit-vectors: the LM-wide vectors restricted to the partition's hosts."""

    def __init__(self, bits: HostBits, hosts: np.ndarray) -> None:
        self.bits = bits
        self.hosts = np.asarray(hosts, dtype=np.int64)        # indices into the LM's hosts, in order
        self._vec: dict[Constraint, np.ndarray] = {}
        self.ones = np.ones(self.hosts.size, dtype=bool)

    def __len__(self) -> int:
        return int(self.hosts.size)

    def vector(self, c: Constraint) -> np.ndarray:
        v = self._vec.get(c)
        if v is None:
            v = self._vec[c] = self.bits.vector(c)[self.hosts]
        return v

    def candidates(self, constraints: Sequence[Constraint]) -> np.ndarray:
        """Bitwise AND of the task's constraint vectors (all ones for an unconstrained task)."""
        if not constraints:
            return self.ones
        it = iter(constraints)
        out = self.vector(next(it)).copy()
        for c in it:
            np.logical_and(out, self.vector(c), out=out)
        return out


def first_fit(candidates: np.ndarray, free_cpu: np.ndarray, free_mem: np.ndarray,
              req_cpu: float, req_mem: float) -> int:
    """Position of the first candidate whose free CPU (cores) and memory (MiB) cover the
    request, or -1. The arrays are aligned with *candidates*."""
    ok = candidates & (free_cpu >= req_cpu - EPS) & (free_mem >= req_mem - EPS)
    if not ok.size:
        return -1
    i = int(ok.argmax())      # the first True: the scan of Algorithm 1, word-wide
    return i if ok[i] else -1


def match_partition(part: PartitionBits, constraints: Sequence[Constraint], free_cpu: np.ndarray,
                    free_mem: np.ndarray, req_cpu: float, req_mem: float, total_cpu: np.ndarray | None = None,
                    total_mem: np.ndarray | None = None, allocate: Callable | None = None, rng: Any = None,
                    observe: Callable | None = None) -> int:
    """Algorithm 1 on one partition. *free_cpu*/*free_mem* (and the totals) are per LM host;
    returns the LM host index of the match, or -1. The hosts whose constraints match and whose
    free resources cover the request are offered (R3, R4); *allocate* (the ``allocation`` stage,
    R5) picks one of them: first fit when none is given. *observe(hosts, offered, free_cpu, free_mem,
    chosen)* sees the decision (an explanation)."""
    if not len(part):
        return -1
    h = part.hosts
    if allocate is None:
        i = first_fit(part.candidates(constraints), free_cpu[h], free_mem[h], req_cpu, req_mem)
        return int(h[i]) if i >= 0 else -1
    fc, fm = free_cpu[h], free_mem[h]
    offered = part.candidates(constraints) & (fc >= req_cpu - EPS) & (fm >= req_mem - EPS)
    if not offered.any():          # nothing to choose from: no call (a partition scan, not a decision)
        return -1
    hosts = Hosts(offered, np.column_stack((fc, fm)), np.column_stack((total_cpu[h], total_mem[h])))
    i = allocate(hosts, np.array([req_cpu, req_mem]), rng)
    if observe is not None:                      # an explained decision: what was offered, what was chosen
        observe(h, offered, fc, fm, i)
    return int(h[i]) if i >= 0 else -1
