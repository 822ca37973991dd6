"""broker/prom.py: the broker's collector on a BrokerAgent built by cellbed.assembly (virtual time):
cache size, freshness, entry ages and the broker's counters."""
from __future__ import annotations

import pytest

from cellbed import assembly
from cellbed.broker.prom import BrokerCollector
from cellbed.domain import wire
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime import run_virtual
from cellbed.v1 import masb_pb2 as masbpb
from tests.unit.promtools import scrape, series, value


def report(host: str, sampled: float) -> masbpb.NodeReport:
    return masbpb.NodeReport(host=host, capacity=wire.resources(4.0, 8192), used=wire.resources(1.0, 1024),
                             requested=wire.resources(1.0, 1024), sampled_unix_s=sampled)


def test_cache_size_freshness_and_entry_ages():
    ages = {"h1": 5.0, "h2": 20.0, "h3": 100.0}        # h3 is older than the expiry (60 s), not yet purged

    async def main():
        env = assembly.model_env(1)
        await env.clock.sleep(1000.0)
        b, _ = assembly.build_broker(env, "ba1", params=BrokerParams(node_expiry_s=60.0), peers=[], cell="c")
        c = BrokerCollector(b)
        _, empty = scrape(c)
        now = env.clock.now()
        for h, age in ages.items():
            b.on_report("t", report(h, now - age))
        b.on_report("t", report("h1", now - 50.0))     # older than what the cache holds: not stored
        _, s = scrape(c)
        return empty, s
    empty, s = run_virtual(main())
    assert value(empty, "cellbed_broker_cache_entries", agent="ba1") == 0
    assert value(empty, "cellbed_broker_cache_oldest_entry_age_seconds", agent="ba1") == 0
    assert series(empty, "cellbed_broker_cache_entry_age_seconds") == []
    assert value(s, "cellbed_broker_cache_entries", agent="ba1") == 3
    assert value(s, "cellbed_broker_cache_fresh_entries", agent="ba1") == 2
    for h, age in ages.items():
        assert value(s, "cellbed_broker_cache_entry_age_seconds", agent="ba1", node=h) == pytest.approx(age)
    assert value(s, "cellbed_broker_cache_oldest_entry_age_seconds", agent="ba1") == pytest.approx(100.0)
    assert value(s, "cellbed_broker_cache_expiry_seconds", agent="ba1") == 60.0
    assert value(s, "cellbed_broker_events_total", agent="ba1", event="reports") == 4
    assert value(s, "cellbed_broker_events_total", agent="ba1", event="reports_stored") == 3
