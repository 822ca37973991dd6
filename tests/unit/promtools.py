"""Helpers of the Prometheus tests: a collector's exposition, parsed back the way Prometheus reads it."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families


def exposition(*collectors) -> str:
    reg = CollectorRegistry(auto_describe=False)
    for c in collectors:
        reg.register(c)
    return generate_latest(reg).decode()


def parse(text: str) -> tuple[dict, dict]:
    """(families by name -> type, samples by (sample name, frozenset of labels) -> value)."""
    types, samples = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return types, samples


def scrape(*collectors) -> tuple[dict, dict]:
    return parse(exposition(*collectors))


def value(samples: dict, name: str, **labels) -> float:
    key = (name, frozenset((k, str(v)) for k, v in labels.items()))
    if key not in samples:
        have = sorted(dict(lb) for n, lb in samples if n == name)
        raise AssertionError(f"no sample {name}{labels}; {name} has {have}")
    return samples[key]


def series(samples: dict, name: str) -> list[dict]:
    return [dict(lb) for n, lb in samples if n == name]
