"""The model twin of a real jobs run (``policy.frontend = "central"``, ``workload.source =
"jobs"``; ``cellctl compare``): the same tasks (:mod:`cellbed.experiment.real.jobs_plan`) on
model hosts of the real hosts' capacities, through the same GM and LM code with the real cell's
settings, in virtual time.

It runs on the simulated axis, as the real run writes its rows: what the real cell does in wall
seconds is multiplied by ``workload.time_compression`` here (the GM's retry period and request
deadline, the LM's and the node's boot deadlines, a message's delay, a guest's boot); the LM's
update period is the scenario's ``policy.megha.update_period_s``, which the real cell runs divided
by the compression.
At most as many guests boot at once per host as the real LM lets (``max_starting_per_host``), each
for the boot time ``cellctl compare`` fits from the real run's ``vms.csv``; without a fit they
start at once.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from cellbed.cell.megha import GM_PARAMS, LM_PARAMS
from cellbed.controller.megha.params import GmParams, LmParams
from cellbed.daemon.config import NodeConfig
from cellbed.domain.overhead import GuestOverhead
from cellbed.experiment.model import ModelDriver
from cellbed.experiment.real.jobs_plan import jobs_plan
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.scenario.policies import policy_book
from cellbed.experiment.twin.driver import LOOPBACK_LATENCY_S
from cellbed.model.megha import megha_cell
from cellbed.model.megha_run import JobsWorkload
from cellbed.model.params import ModelCellParams


class CentralTwinDriver(ModelDriver):
    kind = "twin"

    def __init__(self, sc: Scenario, guest: GuestOverhead | None = None, link_mib_s: float | None = None) -> None:
        """*guest*: the real guests' overhead (its boot time is what matters here); *link_mib_s* is
        accepted for the same interface as the GCD twin's and unused (no task migrates)."""
        self.sc = sc
        self.comp = sc.workload.time_compression
        self.plan = jobs_plan(sc, ("u1",))
        self.guest = (guest or GuestOverhead()).validate()
        self.link_mib_s = link_mib_s
        self.calibration = None
        self.masb = False
        self.profile = None
        self.book = policy_book(sc.policy, "isolate")   # the real agents' policies: same table, same errors
        self.params = self._params()

    def fit(self, guest: GuestOverhead, link_mib_s: float | None) -> "CentralTwinDriver":
        self.guest, self.link_mib_s = guest.validate(), link_mib_s
        self.params = self._params()
        return self

    def _params(self) -> ModelCellParams:
        sc, k = self.sc, self.comp
        p = megha_cell(frontend="central", nodes=len(self.plan.hosts), seed=sc.run.seed, gms=1, lms=1,
                       latency_s=LOOPBACK_LATENCY_S * k, node_classes=self.plan.classes(), background_fill=0.0,
                       update_period_s=sc.policy.megha.update_period_s, monitor_period_s=sc.policy.san.monitor_period_s,
                       duration_s=sc.run.duration_s, tick_s=sc.run.tick_s)
        g = self.guest
        boot = dataclasses.replace(g, boot_s=g.boot_s * k)
        wait = min(NodeConfig.boot_timeout_s * k, 3600.0)
        return dataclasses.replace(p, guest=boot, boot_timeout_s=wait).validate()

    def cell_options(self) -> dict[str, Any]:
        """The real GM's and LM's settings on the simulated axis. A deadline beyond its parameter's
        range (past a compression of 30 for the GM's request and the node's boot wait, 15 for the
        LM's start) is that range's end: the twin then gives up sooner than the real cell would,
        only on what takes that long."""
        k = self.comp
        return {"gm_params": GmParams(fairness=False, lost_launch_check_s=0.0,
                                      retry_period_s=min(GM_PARAMS["retry_period_s"] * k, 3600.0),
                                      request_timeout_s=min(GM_PARAMS["request_timeout_s"] * k, 600.0)).validate(),
                "lm_params": LmParams(update_period_s=self.sc.policy.megha.update_period_s,
                                      max_starting_per_host=LM_PARAMS["max_starting_per_host"],
                                      start_timeout_s=min(LM_PARAMS["start_timeout_s"] * k, 3600.0)).validate()}

    def workload(self):
        j = self.sc.workload.jobs
        return JobsWorkload(self.plan.arrivals, drain_s=self.sc.run.duration_s - j.arrivals_s), None

    def stages(self) -> dict[str, str]:
        g, k = self.guest, self.comp
        hosts = ", ".join(f"{c:g} cores / {m} MiB" for c, m in self.plan.hosts)
        return {"B1": (f"model twin of a real jobs cell: {len(self.plan.hosts)} model hosts ({hosts}), Megha 1 GM × 1 LM "
                       f"with the real cell's settings on the simulated axis (time compression {k:g}); the same "
                       f"tasks; ≤ {LM_PARAMS['max_starting_per_host']} guests boot at once per host, each in "
                       f"{g.boot_s * k:g} simulated s ({g.boot_s:g} wall s)")}

    def extra(self) -> dict[str, Any]:
        out = super().extra()
        out["driver"] = self.kind
        out["twin"] = {"hosts": [list(h) for h in self.plan.hosts], "time_compression": self.comp,
                       "guest_overhead": dataclasses.asdict(self.guest), "link_mib_s": self.link_mib_s,
                       "mem_mib": list(self.plan.arrivals.mem_mib)}
        return out
