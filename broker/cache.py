"""The Broker Agent's node-state cache (DESIGN §7): one entry per node with the timestamp of
its measurement; entries older than ``node_expiry_s`` are invisible and then purged. Kept as
column arrays (capacity, used, requested) so that scoring thousands of nodes is one numpy
call; attributes are per-attribute columns for vectorised constraint matching."""
from __future__ import annotations

import numpy as np

from cellbed import wire
from cellbed.v1 import masb_pb2 as mpb
from cellbed.workload.events import Constraint, ConstraintOp


class NodeCache:
    def __init__(self, expiry_s: float = 300.0, initial: int = 1024) -> None:
        self.expiry_s = expiry_s
        self.index: dict[str, int] = {}
        self.hosts: list[str] = []
        self.reports: list[mpb.NodeReport | None] = []
        self.cap = np.zeros((initial, 2))
        self.used = np.zeros((initial, 2))
        self.req = np.zeros((initial, 2))
        self.prod = np.zeros((initial, 2))               # production requests (RUS rule)
        self.ts = np.full(initial, -np.inf)
        self.live = np.zeros(initial, dtype=bool)
        self.attrs: dict[str, np.ndarray] = {}       # attribute -> object column (None = absent)
        self.attr_of: list[dict] = []
        self.expired = 0

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
        for k, col in self.attrs.items():
            c = np.full(n, None, dtype=object)
            c[: len(col)] = col
            self.attrs[k] = c

    def update(self, r: mpb.NodeReport) -> bool:
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
        elif self.live[i] and self.ts[i] >= r.sampled_unix_s:
            return False
        self.reports[i] = r
        self.cap[i] = (r.capacity.cpu_cores, r.capacity.mem_mib)
        self.used[i] = (r.used.cpu_cores, r.used.mem_mib)
        self.req[i] = (r.requested.cpu_cores, r.requested.mem_mib)
        self.prod[i] = (r.prod_requested.cpu_cores, r.prod_requested.mem_mib)
        self.ts[i] = r.sampled_unix_s
        self.live[i] = True
        attrs = wire.attributes_from_pb(r.attributes)
        if attrs != self.attr_of[i]:
            for k in set(self.attr_of[i]) - set(attrs):
                self.attrs[k][i] = None
            for k, v in attrs.items():
                col = self.attrs.get(k)
                if col is None:
                    col = self.attrs[k] = np.full(len(self.cap), None, dtype=object)
                col[i] = v
            self.attr_of[i] = attrs
        return True

    def add_load(self, host: str, used: tuple[float, float], requested: tuple[float, float],
                 production: bool = False) -> None:
        """Account a placement the broker just made, until the node's next report."""
        i = self.index.get(host)
        if i is not None:
            self.used[i] += used
            self.req[i] += requested
            if production:
                self.prod[i] += requested

    def expire(self, now: float) -> list[str]:
        n = len(self.hosts)
        old = self.live[:n] & (self.ts[:n] < now - self.expiry_s)
        gone = [self.hosts[i] for i in np.flatnonzero(old)]
        self.live[:n][old] = False
        for i in np.flatnonzero(old):
            self.reports[i] = None
        self.expired += len(gone)
        return gone

    def fresh(self, now: float) -> np.ndarray:
        """Indices of entries measured within the expiry."""
        n = len(self.hosts)
        return np.flatnonzero(self.live[:n] & (self.ts[:n] >= now - self.expiry_s))

    def match(self, idx: np.ndarray, constraints: tuple[Constraint, ...]) -> np.ndarray:
        """Boolean mask over *idx*: every constraint holds (semantics of Constraint.matches)."""
        ok = np.ones(len(idx), dtype=bool)
        for c in constraints:
            col = self.attrs.get(c.attribute)
            vals = col[idx] if col is not None else np.full(len(idx), None, dtype=object)
            present = np.array([v is not None for v in vals], dtype=bool) if len(vals) else ok[:0]
            if c.op == ConstraintOp.EQUAL:
                ok &= present & (vals == c.value)
            elif c.op == ConstraintOp.NOT_EQUAL:
                ok &= ~present | (vals != c.value)
            else:
                ints = np.array([isinstance(v, int) and not isinstance(v, bool) for v in vals], dtype=bool)
                if not isinstance(c.value, int):
                    ok &= False
                    continue
                nums = np.array([v if isinstance(v, int) else 0 for v in vals], dtype=np.int64)
                cmp = nums < c.value if c.op == ConstraintOp.LESS_THAN else nums > c.value
                ok &= ints & cmp
        return ok

    def entries(self) -> list[mpb.NodeReport]:
        return [r for i, r in enumerate(self.reports) if r is not None and self.live[i]]
