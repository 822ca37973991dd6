"""Per-stage timing (the reference architecture's TC metric): calls, time, hosts or tasks
examined, and errors, per (stage, policy). One table per process (a real agent) or per model
cell, shared by every agent of it; written to ``stages.csv`` and exported to Prometheus.

The hot path is :meth:`Acc.add`: two additions, a comparison and one histogram increment.
Durations go into buckets of a quarter octave (bucket width ~19 %), from which quantiles are
read as their bucket's upper bound."""
from __future__ import annotations

import dataclasses

SUB = 4                      # buckets per octave
NBUCKETS = 64 * SUB

STAGE_COLUMNS = ("stage", "policy", "calls", "errors", "examined", "total_s", "mean_us", "p50_us", "p95_us",
                 "p99_us", "max_us")


def bucket_of(ns: int) -> int:
    b = ns.bit_length()
    if b <= 3:
        return ns                        # 0..7 ns, exact
    return b * SUB + ((ns >> (b - 3)) & (SUB - 1))


def bucket_upper_ns(i: int) -> float:
    """The largest duration that falls in bucket *i*."""
    if i < 8:
        return float(i)
    b, sub = divmod(i, SUB)
    return float((((SUB + sub + 1) << (b - 3)) - 1))


class Acc:
    __slots__ = ("calls", "ns", "examined", "errors", "max_ns", "hist")

    def __init__(self) -> None:
        self.calls = self.ns = self.examined = self.errors = self.max_ns = 0
        self.hist = [0] * NBUCKETS

    def add(self, ns: int, examined: int) -> None:
        self.calls += 1
        self.ns += ns
        self.examined += examined
        if ns > self.max_ns:
            self.max_ns = ns
        self.hist[bucket_of(ns)] += 1

    def quantile_ns(self, q: float) -> float:
        if not self.calls:
            return 0.0
        want, seen = q * self.calls, 0
        for i, n in enumerate(self.hist):
            seen += n
            if n and seen >= want:
                return min(bucket_upper_ns(i), float(self.max_ns))
        return float(self.max_ns)

    def merge(self, other: "Acc") -> None:
        self.calls += other.calls
        self.ns += other.ns
        self.examined += other.examined
        self.errors += other.errors
        self.max_ns = max(self.max_ns, other.max_ns)
        self.hist = [a + b for a, b in zip(self.hist, other.hist)]


@dataclasses.dataclass(frozen=True)
class StageRow:
    stage: str
    policy: str
    calls: int
    errors: int
    examined: int
    total_s: float
    mean_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    max_us: float

    def csv(self) -> list:
        return [self.stage, self.policy, self.calls, self.errors, self.examined, f"{self.total_s:.6f}",
                f"{self.mean_us:.3f}", f"{self.p50_us:.3f}", f"{self.p95_us:.3f}", f"{self.p99_us:.3f}",
                f"{self.max_us:.3f}"]


class StageStats:
    """The table: (stage, policy) -> Acc."""

    def __init__(self) -> None:
        self.accs: dict[tuple[str, str], Acc] = {}

    def acc(self, stage: str, policy: str) -> Acc:
        key = (stage, policy)
        a = self.accs.get(key)
        if a is None:
            a = self.accs[key] = Acc()
        return a

    def rows(self) -> list[StageRow]:
        out = []
        for (stage, policy), a in sorted(self.accs.items()):
            out.append(StageRow(stage, policy, a.calls, a.errors, a.examined, a.ns / 1e9,
                                a.ns / a.calls / 1e3 if a.calls else 0.0, a.quantile_ns(0.5) / 1e3,
                                a.quantile_ns(0.95) / 1e3, a.quantile_ns(0.99) / 1e3, a.max_ns / 1e3))
        return out

    def merge(self, other: "StageStats") -> None:
        for (stage, policy), a in other.accs.items():
            self.acc(stage, policy).merge(a)

    def to_dict(self) -> dict:
        """A plain form that crosses a process boundary (a real agent's RPC, a sweep worker)."""
        return {f"{s}\t{p}": {"calls": a.calls, "ns": a.ns, "examined": a.examined, "errors": a.errors,
                              "max_ns": a.max_ns, "hist": {str(i): n for i, n in enumerate(a.hist) if n}}
                for (s, p), a in self.accs.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "StageStats":
        out = cls()
        for k, v in d.items():
            stage, policy = k.split("\t", 1)
            a = out.acc(stage, policy)
            a.calls, a.ns, a.examined = int(v["calls"]), int(v["ns"]), int(v["examined"])
            a.errors, a.max_ns = int(v["errors"]), int(v["max_ns"])
            for i, n in v.get("hist", {}).items():
                if 0 <= int(i) < NBUCKETS:
                    a.hist[int(i)] = int(n)
        return out
