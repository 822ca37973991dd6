"""The Megha masters' Prometheus metrics (issue 15): one collector per controller process, with
``agent=<instance>`` on every series of each GM and LM it runs. Read at scrape time from their
public state (what ``cellctl gm view`` and ``cellctl queues`` show: ``get_view()``,
``list_queues()``, the user queues, the counters; ``queue_lengths()``, role and cluster of an LM);
the allocation-time histograms are fed by the GMs' record listeners, one record per placed task.

    cellbed_gm_queued_tasks{agent,user,state}             ready / parked
    cellbed_gm_running_tasks{agent,user}, cellbed_gm_usage_share{agent,user}
    cellbed_gm_view_staleness_seconds{agent,lm}           -1: never heard from
    cellbed_gm_allocation_seconds{agent,part}             histograms: total and Megha's four parts
    cellbed_gm_events_total{agent,event}, ...
    cellbed_lm_role{agent,lm,role}, cellbed_lm_epoch{agent}
    cellbed_lm_queue_length{agent,queue}                  validation (the LM's lock), events (to GMs)
    cellbed_lm_{cpu,memory}_{capacity,allocated}_{cores,bytes}{agent}, cellbed_lm_tasks{agent}
    cellbed_lm_events_total{agent,event}, ...
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from cellbed.runtime.prom import MIB, HistogramSet, OnLoop, StateCollector, counter_families, gauge
from cellbed.v1 import megha_pb2 as meghapb

if TYPE_CHECKING:
    from cellbed.metrics.rows import AllocationRow
    from cellbed.controller.megha.gm import GlobalMaster
    from cellbed.controller.megha.lm import LocalMaster

PARTS = {"total": "total_ms", "framework_queue": "framework_queue_ms", "processing": "processing_ms",
         "worker_queue": "worker_queue_ms", "communication": "communication_ms"}
ALLOCATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def metrics_address(agents: Mapping[str, str], names) -> str:
    """The address a controller process's exporter binds: the host part of the first of its
    agents' addresses (``[agents]`` of the config) in *names* order."""
    for n in names:
        if n in agents:
            return agents[n].rsplit(":", 1)[0].strip("[]")
    return "127.0.0.1"


class ControllerCollector(StateCollector):
    def __init__(self, gms: Mapping[str, "GlobalMaster"], lms: Mapping[str, "LocalMaster"],
                 read: OnLoop | None = None) -> None:
        super().__init__(read)
        self.gms, self.lms = gms, lms
        self.allocation = HistogramSet("cellbed_gm_allocation_seconds",
                                       "Allocation time of placed tasks (Megha eq. 1-2): total and its parts",
                                       ("agent", "part"), ALLOCATION_BUCKETS)
        for name, gm in gms.items():
            for part in PARTS:
                self.allocation.ensure((name, part))
            for rec in list(gm.records):
                self.on_record(name, rec)
            gm.record_listeners.append(lambda rec, g=name: self.on_record(g, rec))

    def on_record(self, gm: str, rec: "AllocationRow") -> None:
        """A placed task's allocation record (called on the GM's loop)."""
        for part, field in PARTS.items():
            self.allocation.observe((gm, part), getattr(rec, field) / 1000.0)

    def families(self) -> list:
        out: list = []
        for name, gm in sorted(self.gms.items()):
            out += gm_families(name, gm)
        for name, lm in sorted(self.lms.items()):
            out += lm_families(name, lm)
        if self.gms:
            out.append(self.allocation.family())
        return out


def gm_families(name: str, gm: "GlobalMaster") -> list:
    labels = {"agent": name}
    q = gm.queues
    queued = [((u, "ready"), len(q.ready[u])) for u in q.users] + [((u, "parked"), len(q.parked[u])) for u in q.users]
    lq = gm.list_queues()
    view = gm.get_view()
    return [
        gauge("cellbed_gm_queued_tasks", "Tasks in the GM's user queues (ready, or parked until the view changes)",
              labels, queued, extra=("user", "state")),
        gauge("cellbed_gm_running_tasks", "Running tasks per user, as the GM's view has them", labels,
              [((x.user,), x.running) for x in lq.queues], extra=("user",)),
        gauge("cellbed_gm_usage_share", "Dominant share of the cell's capacity used per user", labels,
              [((x.user,), x.usage_share) for x in lq.queues], extra=("user",)),
        gauge("cellbed_gm_tasks", "Tasks the GM holds that have not finished", labels, len(gm.tasks)),
        gauge("cellbed_gm_view_staleness_seconds", "Age of the GM's view of each LM (-1: never updated)", labels,
              [((v.lm,), v.staleness_s) for v in view.lms], extra=("lm",)),
        gauge("cellbed_gm_view_hosts", "Hosts in the GM's view of each LM", labels,
              [((v.lm,), v.hosts) for v in view.lms], extra=("lm",)),
        *counter_families("cellbed_gm", "The Global Master", labels, gm.counters),
    ]


def lm_families(name: str, lm: "LocalMaster") -> list:
    labels = {"agent": name}
    role = meghapb.LmRole.Name(lm.role).removeprefix("LM_ROLE_").lower()
    out = [
        gauge("cellbed_lm_role", "The LM instance's role (1 for the current one)", labels,
              [((lm.lm, role), 1.0)], extra=("lm", "role")),
        gauge("cellbed_lm_epoch", "The LM's epoch (bumped by every takeover)", labels, lm.epoch),
        gauge("cellbed_lm_queue_length", "What waits in the LM: requests for its validation lock, task events "
              "not yet acknowledged by their GMs", labels, [((k,), v) for k, v in sorted(lm.queue_lengths().items())],
              extra=("queue",)),
    ]
    c = lm.cluster
    if c is not None:
        out += [gauge("cellbed_lm_hosts", "Hosts in the LM's cluster", labels, len(c.hosts)),
                gauge("cellbed_lm_tasks", "Tasks in the LM's table", labels, len(c.tasks)),
                gauge("cellbed_lm_cpu_capacity_cores", "CPU capacity of the LM's hosts", labels,
                      float(c.total_cpu.sum())),
                gauge("cellbed_lm_cpu_allocated_cores", "CPU requested by the LM's tasks", labels,
                      float(c.used_cpu.sum())),
                gauge("cellbed_lm_memory_capacity_bytes", "Memory capacity of the LM's hosts", labels,
                      float(c.total_mem.sum()) * MIB),
                gauge("cellbed_lm_memory_allocated_bytes", "Memory requested by the LM's tasks", labels,
                      float(c.used_mem.sum()) * MIB)]
    return out + counter_families("cellbed_lm", "The Local Master", labels, lm.counters)
