"""A real-cell scenario's model twin (``cell.kind = "twin"``; ``cellctl compare``): the VMs the
real-cell runner would start (:mod:`cellbed.workload.realplan`), on model hosts of the real
hosts' capacity, with the same broker, SAN and node-agent code and settings, in virtual time.

The twin runs on the real cell's *wall-clock* axis: every period the real cell's agents run in
wall seconds (SAN's window, report and monitor periods divided by the time compression, the
broker's 300 s cache expiry, boot grace, migration and boot times) runs for the same seconds here.
Its rows are written back on the simulated axis (× ``time_compression``), as the real runner writes
its own, so that a twin's and a real run's results folders line up tick for tick.

What a real guest costs its host beyond its workload (QEMU's memory and CPU under TCG, the boot)
is a :class:`GuestOverhead`: ``cellctl compare`` fits it from the real run's per-VM samples
(``vms.csv``, :mod:`cellbed.experiment.twin.fit`); without one the twin's guests cost exactly their
workload and start at once. The migration cost model comes from ``migration.calibration``.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from cellbed.daemon.san import SanConfig
from cellbed.domain import errors
from cellbed.domain.overhead import GuestOverhead
from cellbed.experiment.progress import Progress, peak_rss_mib
from cellbed.experiment.real.driver import RealCellDriver
from cellbed.workload import realplan
from cellbed.workload.realplan import Plan
from cellbed.experiment.real.run import BOOTS_AT_ONCE
from cellbed.experiment.results.files import DECISIONS
from cellbed.experiment.results.writer import ResultsWriter
from cellbed.experiment import policies
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.scenario.policies import broker_params, policy_book
from cellbed.model.cell import ModelCell
from cellbed.model.params import ModelCellParams, migration_calibration
from cellbed.model.twin_front import TwinFront
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime.clock import run_virtual
from cellbed.runtime.explain import ExplainLog
from cellbed.workload import events as ev

LOOPBACK_LATENCY_S = 0.0002
"""One-way delay of an agent message between a single-box cell's namespaces (veth + bridge)."""
RETRY_PER_TICK = 8
"""Deferred placements the real-cell runner retries each tick."""


def twin_events(stream: list, plan: Plan, comp: float, hosts: int, cpu_cores: float, mem_mib: int) -> list:
    """The twin's event stream on the wall axis: the hosts join at 0, then every planned VM's
    AddTask, usage records and RemoveTask (at its simulated time / *comp*)."""
    out: list = [ev.AddNode(time_us=0, node_id=i + 1, cpu=cpu_cores, mem=float(mem_mib)) for i in range(hosts)]
    decisions = iter(plan.decisions)
    vm_run: dict[tuple[int, int], bool] = {}      # task -> its current run is a VM
    for t, e in stream:
        us = int(round(t / comp * 1e6))
        if isinstance(e, ev.AddTask):
            vm_run[e.task_key] = next(decisions) == "vm"
            if vm_run[e.task_key]:
                out.append(dataclasses.replace(e, time_us=us))
        elif isinstance(e, ev.TaskEvent) and vm_run.get(e.task_key):
            if isinstance(e, (ev.UpdateTaskUsedResources, ev.RemoveTask)):
                out.append(dataclasses.replace(e, time_us=us))
            if isinstance(e, ev.RemoveTask):
                vm_run[e.task_key] = False
    return out


class TwinDriver:
    kind = "twin"

    def __init__(self, sc: Scenario, guest: GuestOverhead | None = None, link_mib_s: float | None = None) -> None:
        """*guest*: the real guests' overhead; *link_mib_s*: the migration link's measured rate on
        the real cell (replaces the calibration's); both fitted by cellctl compare."""
        if sc.policy.frontend not in ("masb", "bestfit"):
            raise errors.FailedPrecondition(f"policy.frontend={sc.policy.frontend!r}: the real-cell twin runs masb "
                                            "or bestfit, as the real runner does")
        self.sc = sc
        self.real = RealCellDriver(sc)          # the scale-down and SAN settings (nothing is started)
        self.comp = sc.workload.time_compression
        self.guest = (guest or GuestOverhead()).validate()
        self.link_mib_s = link_mib_s
        self.calibration = migration_calibration(sc.migration.calibration)
        self.book = policy_book(sc.policy, "isolate")   # the real agents' policies: same table, same errors
        self.params = self._params()

    def fit(self, guest: GuestOverhead, link_mib_s: float | None) -> "TwinDriver":
        """The real cell's fitted environment (cellctl compare), applied to this driver."""
        self.guest, self.link_mib_s = guest.validate(), link_mib_s
        self.params = self._params()
        return self

    def _params(self) -> ModelCellParams:
        sc, k = self.sc, self.comp
        san = SanConfig(**(self.real.san_cfg or {"enabled": False})).validate()
        p = ModelCellParams(frontend=sc.policy.frontend, nodes=sc.cell.hosts, seed=sc.run.seed, latency_s=LOOPBACK_LATENCY_S,
                            jitter_s=LOOPBACK_LATENCY_S, monitor_period_s=sc.policy.san.monitor_period_s / k,
                            duration_s=sc.run.duration_s / k, tick_s=sc.run.tick_s / k, brokers=1,
                            cpu_scale_cores=1.0, mem_scale_mib=1.0, san=san, broker=BrokerParams(**broker_params(sc)),
                            retry_per_tick=RETRY_PER_TICK, guest=self.guest)
        if self.calibration is not None:
            p = dataclasses.replace(p, cost=self.calibration.params)
        if self.link_mib_s is not None:
            p = dataclasses.replace(p, cost=dataclasses.replace(p.cost, bandwidth_mib_s=self.link_mib_s))
        return p.validate()

    def stages(self) -> dict[str, str]:
        g = self.guest
        return {"T11": "none: hosts do not fail during a run",
                "B1": (f"model twin of a real cell: {self.sc.cell.hosts} model hosts of {self.sc.cell.host_cpu_cores:g} "
                       f"cores / {self.sc.cell.host_mem_mib} MiB, the real runner's VMs, one broker with the "
                       f"scenario's parameters, SAN with the real cell's wall-clock periods; guests "
                       f"cost {g.cpu_base_cores:g} + {g.cpu_gain:g} × load cores and {g.mem_base_mib:g} + "
                       f"{g.mem_gain:g} × guest memory MiB, boot in {g.boot_s:g} s at {g.boot_cpu_cores:g} cores, ≤ {BOOTS_AT_ONCE} at once")}

    def extra(self) -> dict[str, Any]:
        c = self.sc.cell
        return {"driver": self.kind, "twin": {
            "hosts": c.hosts, "host_cpu_cores": c.host_cpu_cores, "host_mem_mib": c.host_mem_mib,
            "time_compression": self.comp, "scale_down": dataclasses.asdict(self.real.scale),
            "guest_overhead": dataclasses.asdict(self.guest), "link_mib_s": self.link_mib_s, "san": self.real.san_cfg,
            "boots_at_once": BOOTS_AT_ONCE, "retry_per_tick": RETRY_PER_TICK,
            "latency_s": LOOPBACK_LATENCY_S}}

    def run(self, w: ResultsWriter, progress: Progress) -> dict[str, Any]:
        sc, k = self.sc, self.comp
        stream = realplan.read_stream(self.real.gen_cfg, sc.run.duration_s)
        r = sc.workload.real
        plan = realplan.plan(stream, self.real.scale, hosts=sc.cell.hosts, max_vms_per_host=r.max_vms_per_host,
                             min_task_s=r.min_task_s, task_fraction=r.task_fraction, seed=sc.run.seed)
        events = twin_events(stream, plan, k, sc.cell.hosts, sc.cell.host_cpu_cores, sc.cell.host_mem_mib)
        last = {"tasks": 0, "over": 0.0}

        def sim(wall_s: float) -> float:       # the twin's wall axis -> the simulated axis (µs: no float dust)
            return round(wall_s * k, 6)

        def on_tick(t) -> None:
            t = dataclasses.replace(t, t_s=sim(t.t_s))
            w.tick(t)
            last.update(tasks=t.tasks_running, over=t.overloaded / t.nodes if t.nodes else 0.0)
            progress.update(t.t_s, t.tasks_running, last["over"])

        def on_migration(m) -> None:
            w.migration(dataclasses.replace(m, t_s=sim(m.t_s)))

        def on_allocation(a) -> None:
            w.allocation(dataclasses.replace(a, arrival_s=sim(a.arrival_s), start_s=sim(a.start_s)))

        explain = ExplainLog(sc.run.explain, str(w.path / DECISIONS))
        cell = ModelCell(self.params, events, on_tick=on_tick, on_allocation=on_allocation, on_migration=on_migration,
                         front=TwinFront, vms={v.name: v for v in plan.vms}, scale=self.real.scale,
                         ticks_from_samples=True, boots_at_once=BOOTS_AT_ONCE,
                         max_vms_per_host=r.max_vms_per_host, policies=self.book, explain=explain)
        wall0 = time.perf_counter()
        try:
            s = run_virtual(cell.run())
        finally:
            policies.record(w, self.book.identities(), self.book.env.stats, mode=self.book.env.mode)
            explain.close()
            w.update_manifest(explained=explain.written, explain_share=sc.run.explain)
        wall = time.perf_counter() - wall0
        progress.update(sc.run.duration_s, last["tasks"], last["over"], force=True)
        progress.close()
        for row in cell.frontend.unplaced():
            on_allocation(row)
        c = plan.counts()
        return {"ok": not s.lost and not s.duplicated, "driver": self.kind, "simulated_s": sc.run.duration_s,
                "wall_s": round(wall, 3), "peak_rss_mib": round(peak_rss_mib(), 1), "nodes": len(cell.hosts),
                "tasks": {"added": len(plan.decisions), "vms_created": c["vm"], "not_vm_short": c["short"],
                          "not_vm_fraction": c["fraction"], "not_vm_box_full": c["box_full"],
                          "live": s.tasks_live, "pending": s.tasks_pending, "lost": len(s.lost),
                          "duplicated": len(s.duplicated), "lost_sample": sorted(s.lost)[:20],
                          "duplicated_sample": sorted(s.duplicated)[:20]},
                "migrations": len(s.migrations), "san": dict(sorted(s.counters.items())),
                "broker": dict(sorted(s.broker_counters.items())),
                "cell": dict(sorted(cell.frontend.counters.items()))}
