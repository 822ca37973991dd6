"""The node daemon's Prometheus metrics (issue 15), read at scrape time from the NodeAgent's public
state (``view()``, ``allocated()``/``used()``, ``migrating``, ``records``, ``host_sample``) and the
SanAgent's (``counters``, ``active``): what ``cellctl nodes``, ``cellctl migrations`` and
``cellctl san`` show.

    cellbed_host_{cpu,memory}_{capacity,requested,used}_{cores,bytes}{host}
    cellbed_host_vms{host,vm_state}                 running, paused, shutoff, crashed, other,
                                                    migrating_out, migrating_in (reservations)
    cellbed_migrations_total{host,outcome}          source-side records, the history file included
    cellbed_migration_{duration_seconds,downtime_seconds,transferred_bytes}{host}
                                                    histograms of succeeded migrations (libvirt's
                                                    time_elapsed, downtime, data_total)
    cellbed_san_negotiations_total{host,outcome}    SAN rounds by how they ended
    cellbed_san_events_total{host,event}, ...       the SAN's other counters
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from cellbed.domain.vm import DomState
from cellbed.runtime.prom import MIB, HistogramSet, OnLoop, StateCollector, counter, counter_families, gauge
from cellbed.v1 import node_pb2 as npb

if TYPE_CHECKING:
    from cellbed.daemon.agent import NodeAgent
    from cellbed.daemon.san.agent import SanAgent

VM_STATES = tuple(s.value for s in DomState) + ("migrating_out", "migrating_in")
OUTCOMES = {v: npb.MigrationOutcome.Name(v).removeprefix("MIGRATION_OUTCOME_").lower()
            for v in npb.MigrationOutcome.values() if v != npb.MIGRATION_OUTCOME_UNSPECIFIED}
SAN_OUTCOMES = ("migrated", "gave-up", "failed", "cancelled")     # NegotiationLedger.finish's states

DURATION_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
DOWNTIME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
BYTES_BUCKETS = tuple(float(2 ** k * MIB) for k in range(4, 15))    # 16 MiB .. 16 GiB


class MigrationHistograms:
    """Histograms over a NodeAgent's migration records (an append-only list): each scrape adds
    the records that arrived since the last one."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seen = 0
        self.outcomes: dict[str, int] = dict.fromkeys(OUTCOMES.values(), 0)
        self.duration = HistogramSet("cellbed_migration_duration_seconds",
                                     "Succeeded live migrations: libvirt's total job time", ("host",), DURATION_BUCKETS)
        self.downtime = HistogramSet("cellbed_migration_downtime_seconds",
                                     "Succeeded live migrations: the guest's downtime", ("host",), DOWNTIME_BUCKETS)
        self.transferred = HistogramSet("cellbed_migration_transferred_bytes",
                                        "Succeeded live migrations: bytes sent (data_total)", ("host",), BYTES_BUCKETS)

    def update(self, host: str, records: list) -> None:
        if len(records) < self.seen:        # not append-only after all: count again from the start
            self.reset()
        for h in (self.duration, self.downtime, self.transferred):
            h.ensure((host,))
        for r in records[self.seen:]:
            name = OUTCOMES.get(r.outcome, "unspecified")
            self.outcomes[name] = self.outcomes.get(name, 0) + 1
            if r.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED:
                self.duration.observe((host,), r.time_elapsed_ms / 1000.0)
                self.downtime.observe((host,), r.downtime_ms / 1000.0)
                self.transferred.observe((host,), float(r.data_total_bytes))
        self.seen = len(records)

    def families(self, labels: dict) -> list:
        return [counter("cellbed_migrations", "Live migrations started on this host (the source), by outcome",
                        labels, [((k,), v) for k, v in sorted(self.outcomes.items())], extra=("outcome",)),
                self.duration.family(), self.downtime.family(), self.transferred.family()]


class NodeCollector(StateCollector):
    """One node daemon: its host, its VMs, its migrations and (MASB) its SAN agent."""

    def __init__(self, node: "NodeAgent", san: "SanAgent | None" = None, read: OnLoop | None = None) -> None:
        super().__init__(read)
        self.node = node
        self.san = san
        self.migrations = MigrationHistograms()

    def families(self) -> list:
        node, view = self.node, self.node.view()
        labels = {"host": view.host}
        cap_cpu, cap_mem = view.capacity
        req_cpu, req_mem = node.allocated()
        used_cpu, used_mem = node.used()
        out = [
            gauge("cellbed_host_cpu_capacity_cores", "CPU capacity offered to guests", labels, cap_cpu),
            gauge("cellbed_host_cpu_requested_cores", "CPU requested by the VMs here and on their way in",
                  labels, req_cpu),
            gauge("cellbed_host_cpu_used_cores", "CPU used by the VMs (cpu-time deltas), incoming included",
                  labels, used_cpu),
            gauge("cellbed_host_memory_capacity_bytes", "Memory capacity offered to guests", labels, cap_mem * MIB),
            gauge("cellbed_host_memory_requested_bytes", "Memory requested by the VMs here and on their way in",
                  labels, req_mem * MIB),
            gauge("cellbed_host_memory_used_bytes", "Memory used by the VMs (QEMU RSS), incoming included",
                  labels, used_mem * MIB),
            gauge("cellbed_host_vms", "VMs on this host by state (migrating_in: reservations of incoming VMs)",
                  labels, [((s,), n) for s, n in self.vm_states().items()], extra=("vm_state",)),
        ]
        s = node.host_sample
        if node.cfg.cgroup:
            out += [gauge("cellbed_host_cgroup_cpu_used_cores", "CPU used by the host's cgroup (libvirtd, QEMU), "
                          "at the last sample", labels, s.cgroup_cpu_cores),
                    gauge("cellbed_host_cgroup_memory_used_bytes", "Memory of the host's cgroup at the last sample",
                          labels, s.cgroup_mem_mib * MIB)]
        out.append(gauge("cellbed_host_info", "The host's hypervisor", labels,
                         [((s.accel or node.hv.accel, s.qemu_version, s.libvirt_version), 1.0)],
                         extra=("accel", "qemu_version", "libvirt_version")))
        self.migrations.update(view.host, node.records)
        out += self.migrations.families(labels)
        out.append(gauge("cellbed_migrations_in_progress", "Live migrations under way, by direction", labels,
                         [(("out",), len(node.migrating)), (("in",), len(view.incoming))], extra=("direction",)))
        if node.telemetry is not None:
            out += [counter("cellbed_mqtt_published_messages", "State and event messages sent to MQTT", labels,
                            node.telemetry.published),
                    counter("cellbed_mqtt_dropped_messages", "Messages dropped while MQTT was slow or away", labels,
                            node.telemetry.dropped)]
        if self.san is not None:
            out += san_families(self.san, labels)
        return out

    def vm_states(self) -> dict[str, int]:
        view = self.node.view()
        n = dict.fromkeys(VM_STATES, 0)
        for e in list(view.vms.values()):
            k = "migrating_out" if e.migrating_out else e.state.value
            n[k] = n.get(k, 0) + 1
        n["migrating_in"] = len(view.incoming)
        return n


def san_families(san: "SanAgent", labels: dict) -> list:
    c = dict(san.counters)
    ends = dict.fromkeys(SAN_OUTCOMES, 0)
    rest = {}
    for k, v in c.items():
        if k.startswith("sans_") and k != "sans_started":
            ends[k[5:]] = v
        elif k != "sans_started":
            rest[k] = v
    return [counter("cellbed_san_negotiations", "SAN rounds (one per task) that ended, by outcome", labels,
                    [((k,), v) for k, v in sorted(ends.items())], extra=("outcome",)),
            counter("cellbed_san_negotiations_started", "SAN rounds started", labels, c.get("sans_started", 0)),
            gauge("cellbed_san_negotiations_active", "SAN rounds under way", labels, len(san.active)),
            *counter_families("cellbed_san", "The SAN agent", labels, rest)]
