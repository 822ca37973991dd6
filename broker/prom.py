"""The broker agent's Prometheus metrics (issue 15), read at scrape time from the BrokerAgent's
public state: its node cache (what ``cellctl broker cache`` lists) and its counters.

    cellbed_broker_cache_entries{agent}                       entries held (not yet purged)
    cellbed_broker_cache_fresh_entries{agent}                 ... measured within the expiry
    cellbed_broker_cache_entry_age_seconds{agent,node}        age of each node's measurement
    cellbed_broker_cache_oldest_entry_age_seconds{agent}
    cellbed_broker_cache_expiry_seconds{agent}
    cellbed_broker_events_total{agent,event}                  reports, syncs, candidate requests, ...
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from cellbed.runtime.prom import OnLoop, StateCollector, counter_families, gauge

if TYPE_CHECKING:
    from cellbed.broker.agent import BrokerAgent


class BrokerCollector(StateCollector):
    def __init__(self, agent: "BrokerAgent", read: OnLoop | None = None) -> None:
        super().__init__(read)
        self.agent = agent

    def families(self) -> list:
        a = self.agent
        labels = {"agent": a.name}
        now = a.clock.now()
        ages = sorted(((r.host,), max(0.0, now - r.sampled_unix_s)) for r in a.cache.entries())
        return [
            gauge("cellbed_broker_cache_entries", "Node entries in the broker's cache (not yet purged)", labels,
                  len(a.cache)),
            gauge("cellbed_broker_cache_fresh_entries", "Cache entries measured within the expiry", labels,
                  len(a.cache.fresh(now))),
            gauge("cellbed_broker_cache_entry_age_seconds", "Age of each node's cached measurement", labels, ages,
                  extra=("node",)),
            gauge("cellbed_broker_cache_oldest_entry_age_seconds", "Age of the oldest cached measurement (0: empty)",
                  labels, max((v for _, v in ages), default=0.0)),
            gauge("cellbed_broker_cache_expiry_seconds", "Entries older than this are invisible, then purged",
                  labels, a.params.node_expiry_s),
            *counter_families("cellbed_broker", "The broker agent", labels, a.counters),
        ]
