"""The policy stages' Prometheus metrics, for every agent process's exporter:

    cellbed_policy_stage_seconds{agent,stage,policy}   histogram of one call's duration
    cellbed_policy_stage_examined_total{agent,stage,policy}   hosts or tasks the calls examined
    cellbed_policy_errors_total{agent,stage,policy}    calls refused: the policy raised, hung, broke its contract

The histogram's buckets are octaves from 1 µs to 16 s, summed from the stage table's finer ones.
"""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from cellbed.runtime.plugins.stats import StageStats, bucket_upper_ns
from cellbed.runtime.prom import OnLoop, StateCollector

OCTAVES_NS = [1_000 << k for k in range(25)]      # 1 µs .. ~16.8 s


def prom_buckets(hist: list[int]) -> list[tuple[str, int]]:
    """Cumulative (le seconds, count) from the fine histogram (a fine bucket counts in the first
    octave bound at or above its upper bound)."""
    counts = [0] * (len(OCTAVES_NS) + 1)
    for i, n in enumerate(hist):
        if n:
            up = bucket_upper_ns(i)
            k = next((j for j, b in enumerate(OCTAVES_NS) if up <= b), len(OCTAVES_NS))
            counts[k] += n
    out, acc = [], 0
    for b, c in zip(OCTAVES_NS + [None], counts):
        acc += c
        out.append(("+Inf" if b is None else floatToGoString(b / 1e9), acc))
    return out


class PolicyCollector(StateCollector):
    def __init__(self, agent: str, stats: StageStats, read: OnLoop | None = None) -> None:
        super().__init__(read)
        self.agent = agent
        self.stats = stats

    def families(self) -> list:
        h = HistogramMetricFamily("cellbed_policy_stage_seconds", "Duration of one call of a policy stage",
                                  labels=["agent", "stage", "policy"])
        ex = CounterMetricFamily("cellbed_policy_stage_examined", "Hosts or tasks the stage's calls examined",
                                 labels=["agent", "stage", "policy"])
        err = CounterMetricFamily("cellbed_policy_errors", "Policy calls refused: the policy raised, hung or "
                                  "broke its contract; that decision was not taken", labels=["agent", "stage", "policy"])
        for (stage, policy), a in sorted(self.stats.accs.items()):
            labels = [self.agent, stage, policy]
            h.add_metric(labels, prom_buckets(a.hist), a.ns / 1e9)
            ex.add_metric(labels, a.examined)
            err.add_metric(labels, a.errors)
        return [h, ex, err]

