"""The Broker Agent's node-state cache (DESIGN §7): one entry per node with the timestamp of
its measurement; entries older than ``node_expiry_s`` are invisible and then purged. Kept as
column arrays (capacity, used, requested) so that scoring thousands of nodes is one numpy
call; attributes are per-attribute columns for vectorised constraint matching."""
from __future__ import annotations

import hashlib
import struct

import numpy as np

from cellbed.domain import wire
from cellbed.v1 import masb_pb2 as masbpb
from cellbed.domain.constraints import Constraint, ConstraintOp


class NodeCache:
    def __init__(self, expiry_s: float = 300.0, initial: int = 1024) -> None:
        self.expiry_s = expiry_s
        self.index: dict[str, int] = {}
        self.hosts: list[str] = []
        self.reports: list[masbpb.NodeReport | None] = []
        self.cap = np.zeros((initial, 2))
        self.used = np.zeros((initial, 2))
        self.req = np.zeros((initial, 2))
        self.prod = np.zeros((initial, 2))               # production requests (RUS rule)
        self.ts = np.full(initial, -np.inf)
        self.live = np.zeros(initial, dtype=bool)
        # attribute -> value codes (-1 = absent) and integer values (NaN = absent or not an integer)
        self.codes: dict[str, np.ndarray] = {}
        self.nums: dict[str, np.ndarray] = {}
        self.codebook: dict[str, dict] = {}
        self.attr_of: list[dict] = []
        self.expired = 0
        self.digest = 0                                  # see entry_digest
        self._hkey: list[int] = []                       # per entry: its host's 64-bit key
        self._dig: list[int] = []                        # per entry: its part of the digest (0: not live)

    def __len__(self) -> int:
        return int(self.live[: len(self.hosts)].sum())

    def _grow(self) -> None:
        n = len(self.cap) * 2
        for name in ("cap", "used", "req", "prod"):
            a = getattr(self, name)
            b = np.zeros((n, 2))
            b[: len(a)] = a
            setattr(self, name, b)
        ts = np.full(n, -np.inf)
        ts[: len(self.ts)] = self.ts
        self.ts = ts
        live = np.zeros(n, dtype=bool)
        live[: len(self.live)] = self.live
        self.live = live
        for k in self.codes:
            c = np.full(n, -1, dtype=np.int32)
            c[: len(self.codes[k])] = self.codes[k]
            self.codes[k] = c
            x = np.full(n, np.nan)
            x[: len(self.nums[k])] = self.nums[k]
            self.nums[k] = x

    def update(self, r: masbpb.NodeReport) -> bool:
        """Store *r* unless the cache holds a newer measurement of that node. True if stored."""
        i = self.index.get(r.host)
        if i is None:
            i = len(self.hosts)
            if i >= len(self.cap):
                self._grow()
            self.index[r.host] = i
            self.hosts.append(r.host)
            self.reports.append(None)
            self.attr_of.append({})
            self._hkey.append(host_key(r.host))
            self._dig.append(0)
        elif self.live[i] and self.ts[i] >= r.sampled_unix_s:
            return False
        d = entry_digest(self._hkey[i], r.sampled_unix_s)
        self.digest = (self.digest - self._dig[i] + d) & _MASK
        self._dig[i] = d
        prev = self.reports[i]
        self.reports[i] = r
        self.cap[i] = (r.capacity.cpu_cores, r.capacity.mem_mib)
        self.used[i] = (r.used.cpu_cores, r.used.mem_mib)
        self.req[i] = (r.requested.cpu_cores, r.requested.mem_mib)
        self.prod[i] = (r.prod_requested.cpu_cores, r.prod_requested.mem_mib)
        self.ts[i] = r.sampled_unix_s
        self.live[i] = True
        if prev is not None and prev.attributes == r.attributes:
            return True                   # attributes rarely change: skip decoding them
        attrs = wire.attributes_from_pb(r.attributes)
        if attrs != self.attr_of[i]:
            for k in set(self.attr_of[i]) - set(attrs):
                self.codes[k][i] = -1
                self.nums[k][i] = np.nan
            for k, v in attrs.items():
                if k not in self.codes:
                    self.codes[k] = np.full(len(self.cap), -1, dtype=np.int32)
                    self.nums[k] = np.full(len(self.cap), np.nan)
                    self.codebook[k] = {}
                book = self.codebook[k]
                self.codes[k][i] = book.setdefault(v, len(book))
                self.nums[k][i] = float(v) if isinstance(v, int) and not isinstance(v, bool) else np.nan
            self.attr_of[i] = attrs
        return True

    def add_load(self, host: str, used: tuple[float, float], requested: tuple[float, float],
                 production: bool = False) -> float | None:
        """Account a placement the broker is making, until the node's next report. Returns the
        timestamp of the entry it was added to (for :meth:`undo_load`), None for unknown hosts."""
        i = self.index.get(host)
        if i is None:
            return None
        self.used[i] += used
        self.req[i] += requested
        if production:
            self.prod[i] += requested
        return float(self.ts[i])

    def undo_load(self, host: str, used: tuple[float, float], requested: tuple[float, float],
                  production: bool, added_at: float | None) -> bool:
        """Take back an :meth:`add_load` whose placement failed, unless a newer report has
        replaced the entry since (it never held the load then). True if taken back."""
        i = self.index.get(host)
        if i is None or added_at is None or float(self.ts[i]) != added_at:
            return False
        self.used[i] -= used
        self.req[i] -= requested
        if production:
            self.prod[i] -= requested
        np.maximum(self.used[i], 0.0, out=self.used[i])
        np.maximum(self.req[i], 0.0, out=self.req[i])
        np.maximum(self.prod[i], 0.0, out=self.prod[i])
        return True

    def expire(self, now: float) -> list[str]:
        n = len(self.hosts)
        old = self.live[:n] & (self.ts[:n] < now - self.expiry_s)
        gone = [self.hosts[i] for i in np.flatnonzero(old)]
        self.live[:n][old] = False
        for i in np.flatnonzero(old):
            self.reports[i] = None
            self.digest = (self.digest - self._dig[i]) & _MASK
            self._dig[i] = 0
        self.expired += len(gone)
        return gone

    def fresh(self, now: float) -> np.ndarray:
        """Indices of entries measured within the expiry."""
        n = len(self.hosts)
        return np.flatnonzero(self.live[:n] & (self.ts[:n] >= now - self.expiry_s))

    def match(self, idx: np.ndarray, constraints: tuple[Constraint, ...]) -> np.ndarray:
        """Boolean mask over *idx*: every constraint holds (semantics of Constraint.matches),
        on integer columns: value codes for = and ≠, integer values for < and >."""
        ok = np.ones(len(idx), dtype=bool)
        for c in constraints:
            codes = self.codes.get(c.attribute)
            if codes is None:                  # no node has it
                if c.op != ConstraintOp.NOT_EQUAL:
                    ok[:] = False
                continue
            col = codes[idx]
            if c.op in (ConstraintOp.EQUAL, ConstraintOp.NOT_EQUAL):
                code = self.codebook[c.attribute].get(c.value, -2)
                ok &= (col == code) if c.op == ConstraintOp.EQUAL else (col != code)
            elif not isinstance(c.value, int) or isinstance(c.value, bool):
                ok[:] = False
            else:
                nums = self.nums[c.attribute][idx]
                with np.errstate(invalid="ignore"):
                    ok &= (nums < c.value) if c.op == ConstraintOp.LESS_THAN else (nums > c.value)
        return ok

    def first_matching(self, pool: np.ndarray, constraints: tuple[Constraint, ...], limit: int,
                       extra=None) -> tuple[np.ndarray, int]:
        """The first *limit* entries of *pool* (already shuffled) that match, and how many of the
        pool were examined. Matching is done chunk by chunk, so a scan limit far below the
        cache size costs a fraction of a full pass. *extra(idx) -> bool mask* adds a test."""
        if not constraints and extra is None:
            return pool[:limit], min(len(pool), limit)
        out, seen, step = [], 0, max(64, 2 * limit)
        found = 0
        while seen < len(pool) and found < limit:
            sub = pool[seen:seen + step]
            m = self.match(sub, constraints)
            if extra is not None:
                m &= extra(sub)
            hit = sub[m]
            out.append(hit[: limit - found])
            found += len(out[-1])
            seen += len(sub)
            step *= 2
        return (np.concatenate(out) if out else pool[:0]), seen

    def holds(self, r: masbpb.NodeReport) -> bool:
        """This very report (every field equal) is the live entry of its node. (Every report here
        passed the broker's checks before it was stored.)"""
        i = self.index.get(r.host)
        if i is None or not self.live[i]:
            return False
        mine = self.reports[i]
        return mine is not None and mine == r

    def in_sync(self, digest: int, count: int) -> bool:
        """A peer's entries (their digest and number) are this cache's live (host, time) set, as
        far as a 64-bit digest can tell: a pairwise sync between the two would change nothing."""
        return digest != 0 and digest == self.digest and count == len(self)

    def entries(self) -> list[masbpb.NodeReport]:
        return [r for i, r in enumerate(self.reports) if r is not None and self.live[i]]


_MASK = (1 << 64) - 1


def host_key(host: str) -> int:
    """A host name's 64-bit key, the same in every process (not Python's salted hash)."""
    return int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest(), "little")


def entry_digest(hkey: int, sampled_unix_s: float) -> int:
    """One live entry's part of NodeCache.digest: splitmix64's finaliser over the host's key and
    the bits of its measurement time. The digest is their sum modulo 2**64, so it follows every
    store and expiry in O(1) and does not depend on the order entries arrived in."""
    z = (hkey ^ struct.unpack("<Q", struct.pack("<d", sampled_unix_s))[0]) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) or 1
