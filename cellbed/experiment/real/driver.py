"""The runner's real-cell driver: a single-box cell of namespace hosts with libvirt/QEMU guests,
driven live by the scenario's GCD-shaped stream (DESIGN §10.2 last bullet, §10.4; issue 5
acceptance 3).

What it does, in wall-clock time (every ``*_s`` of the scenario is simulated time and lasts
``*_s / workload.time_compression`` wall seconds):

1. ``cellbed.cell.cell.up`` a cell of ``cell.hosts`` hosts (with a broker and SAN when
   ``policy.frontend = masb`` or ``policy.san.enabled``); it is always torn down again
   (``cell.down``), also on an error, Ctrl-C or SIGTERM.
2. Reads the generator's stream for the run (a few hosts: it is small) and scales it down to
   what the box holds (:class:`ScaleDown`): only tasks that live at least
   ``workload.real.min_task_s`` become a VM (a ``task_fraction`` share of them), at most
   ``max_vms_per_host`` per host at once; each VM is small (``min_vm_mem_mib`` … 128 MiB, one
   vCPU) and stands for ``target_tasks_per_node / max_vms_per_host`` GCD tasks' worth of CPU, so a
   host full of VMs carries a GCD node's load. Constraints are dropped (the hosts carry only a
   ``host`` attribute). Tasks that do not become a VM are counted, not run.
3. Places each VM through the broker's AllocateTask (``masb``) or by best fit over the hosts'
   last reported requests (``bestfit``), retrying each tick while nothing has room; drives each
   VM's CPU load live with SetWorkload from the stream's usage records; stops it at its
   RemoveTask.
4. Every tick polls GetHostState (the tick row), ListMigrations (migrations.csv) and, with SAN,
   ListNegotiations (step-5 refusals, also in migrations.csv).

At the end every VM the runner believes live must be on exactly one host (lost / duplicated
are reported in ``run_completed``).

With ``policy.frontend = "central"`` and ``workload.source = "jobs"`` (the reference
architecture's experiment), the cell gets Megha's 1 GM × 1 LM instead of a broker, on hosts of the
jobs' node classes (:mod:`.jobs_plan`), and :class:`~cellbed.experiment.real.jobs.RealJobsRun`
submits the jobs' tasks to the GM, which places them with the scenario's T2 and R5 plugins.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import shutil
import tempfile
import time
from typing import Any

import numpy as np

from cellbed.cell import cell as cellmod
from cellbed.domain import errors
from cellbed.workload.realplan import ScaleDown
from cellbed.experiment import policies
from cellbed.experiment.policies import agent_key
from cellbed.cell.megha import DEFAULT_USER
from cellbed.experiment.real.jobs import RealJobsRun
from cellbed.experiment.real.jobs_plan import jobs_plan
from cellbed.experiment.real.policies import collect_now
from cellbed.experiment.real.run import MAX_VM_MEM_MIB, RealRun
from cellbed.experiment.results.files import DECISIONS
from cellbed.experiment.results.writer import ResultsWriter
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.scenario.policies import broker_params, policy_book, policy_table
from cellbed.workload.generator import WorkloadGenerator

log = logging.getLogger(__name__)

class RealCellDriver:
    kind = "real"

    def __init__(self, sc: Scenario) -> None:
        if sc.policy.frontend not in ("masb", "bestfit", "central"):
            raise errors.FailedPrecondition(f"policy.frontend={sc.policy.frontend!r}: a real cell runs masb, bestfit "
                                            "or central")
        if (sc.policy.frontend == "central") != (sc.workload.source == "jobs"):
            raise errors.FailedPrecondition(
                f"policy.frontend={sc.policy.frontend!r} with workload.source={sc.workload.source!r}: a real cell runs "
                "the jobs workload through central (Megha's GM and LM), the GCD stream through masb or bestfit")
        self.sc = sc
        self.comp = sc.workload.time_compression
        self.use_broker = sc.policy.frontend == "masb"
        self.use_san = sc.policy.san.enabled
        self.name = "r" + "".join(random.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
        self.book = policy_book(sc.policy, "isolate")     # the runner's own stages (best fit); plugins checked now
        self.policy = {**policy_table(sc.policy), "errors": "isolate"}     # every agent's [policy] table
        self.jobs = jobs_plan(sc, (DEFAULT_USER,)) if sc.workload.source == "jobs" else None
        if self.jobs is not None:
            errors.check_range("policy.megha.update_period_s / workload.time_compression", self._update_wall_s(),
                               0.1, 3600, "wall s")      # the LM's period, as cell up takes it
            self.san_cfg, self.scale, self.gen_cfg = None, None, None
            return
        self.gen_cfg = sc.generator_config()
        nodes = WorkloadGenerator(self.gen_cfg).nodes
        r = sc.workload.real
        c = sc.cell
        self.scale = ScaleDown(
            cpu_cores_per_unit=c.host_cpu_cores / float(np.mean([n.cpu for n in nodes])),
            mem_mib_per_unit=c.host_mem_mib / float(np.mean([n.mem for n in nodes])),
            tasks_per_vm=max(1.0, self.gen_cfg.target_tasks_per_node / r.max_vms_per_host),
            min_vm_mem_mib=r.min_vm_mem_mib, max_vm_mem_mib=max(r.min_vm_mem_mib, MAX_VM_MEM_MIB),
            dirty_mib_s_per_core=r.dirty_mib_s_per_core)
        if self.scale.min_vm_mem_mib * r.max_vms_per_host > c.host_mem_mib:
            raise errors.FailedPrecondition(
                f"workload.real.max_vms_per_host={r.max_vms_per_host} guests of at least "
                f"workload.real.min_vm_mem_mib={r.min_vm_mem_mib} MiB do not fit cell.host_mem_mib={c.host_mem_mib}")
        self.san_cfg = self._san_overrides() if (self.use_san or self.use_broker) else None

    # -- manifest -------------------------------------------------------------------------
    def _san_overrides(self) -> dict[str, Any]:
        p, s, k = self.sc.policy, self.sc.policy.san, self.comp
        return {"enabled": s.enabled, "max_util": s.max_util, "rus_threshold_pct": s.rus_threshold * 100.0,
                "spike_policy": s.spike_policy, "window_s": s.window_s / k,
                "recommendation_expiry_s": s.recommendation_expiry_s / k, "report_period_s": s.report_period_s / k,
                "fit": p.fit, "realloc_score": p.realloc_score, "gpa_rho": p.gpa_rho,
                "gpa_min_samples": p.gpa_min_samples, "tabu_restarts": s.tabu_restarts,
                "tabu_steps": s.tabu_steps, "tabu_patience": s.tabu_patience,
                "boot_grace_s": 15.0,
                "log_scs_rate": 1.0 / s.scs_log_every if s.scs_log_every else 0.0,
                "log_scoring_rate": 1.0 / s.scoring_log_every if s.scoring_log_every else 0.0,
                "log_target_rate": 1.0 / s.scoring_log_every if s.scoring_log_every else 0.0}

    def stages(self) -> dict[str, str]:
        if self.jobs is not None:
            return {"T11": "none: hosts do not fail during a run", "B1": self._jobs_cell()}
        r = self.sc.workload.real
        return {
            "T11": "none: hosts do not fail during a run",
            "B1": (f"real single-box cell of {self.sc.cell.hosts} namespace hosts ({self.sc.cell.host_cpu_cores:g} cores, "
                   f"{self.sc.cell.host_mem_mib} MiB each), time compression {self.comp:g}; tasks living ≥ "
                   f"{r.min_task_s:g} s become VMs ({r.task_fraction:g} of them, ≤ {r.max_vms_per_host} per host, "
                   f"{self.scale.min_vm_mem_mib}–{self.scale.max_vm_mem_mib} MiB, 1 vCPU, each carrying "
                   f"{self.scale.tasks_per_vm:.2f} GCD tasks' CPU); constraints dropped; the broker runs "
                   f"the scenario's parameters in wall-clock time"),
        }

    def _jobs_cell(self) -> str:
        j = self.jobs
        hosts = ", ".join(f"{c:g} cores / {m} MiB" for c, m in j.hosts)
        return (f"real single-box cell of {len(j.hosts)} namespace hosts ({hosts}), time compression {self.comp:g}; "
                f"Megha with 1 GM × 1 LM places (LM updates every {self._update_wall_s():g} wall s); the jobs' "
                f"tasks are idle VMs of ⌈request⌉ vCPUs, holding their request (memory × {j.mem_factor:g}, "
                f"{min(j.arrivals.mem_mib)}–{max(j.arrivals.mem_mib)} MiB) for their duration from their start; "
                "no job is constrained (real hosts carry no attributes)")

    def _update_wall_s(self) -> float:
        return self.sc.policy.megha.update_period_s / self.comp

    def extra(self) -> dict[str, Any]:
        c = self.sc.cell
        cell = {"name": self.name, "hosts": c.hosts, "subnet": c.subnet, "accel": c.accel, "time_compression": self.comp,
                "monitor_period_wall_s": self.sc.policy.san.monitor_period_s / self.comp,
                "tick_wall_s": self.sc.run.tick_s / self.comp, "san": self.san_cfg, "broker": self.use_broker}
        if self.jobs is None:
            cell.update(host_cpu_cores=c.host_cpu_cores, host_mem_mib=c.host_mem_mib,
                        scale_down=dataclasses.asdict(self.scale))
        else:
            cell["jobs"] = {"hosts": [list(h) for h in self.jobs.hosts], "mem_factor": self.jobs.mem_factor,
                            "mem_mib": list(self.jobs.arrivals.mem_mib), "megha_update_wall_s": self._update_wall_s()}
        return {"driver": self.kind, "real_cell": cell}

    # -- run ----------------------------------------------------------------------------------
    def run(self, w: ResultsWriter, progress) -> dict[str, Any]:
        c = self.sc.cell
        root = tempfile.mkdtemp(prefix="cellbed-run-")
        st = None
        removed: list[str] = []
        try:
            t0 = time.monotonic()
            jobs = self.jobs
            try:
                st = cellmod.up(self.name, c.hosts, accel=c.accel, subnet=c.subnet,
                                host_cpus=[h[0] for h in jobs.hosts] if jobs else [c.host_cpu_cores],
                                host_mem_mib=[h[1] for h in jobs.hosts] if jobs else [c.host_mem_mib], root=root,
                                monitor_period_s=self.sc.policy.san.monitor_period_s / self.comp, san=self.san_cfg,
                                policy=self.policy, broker_params=broker_params(self.sc) if self.use_broker else None,
                                explain=self.sc.run.explain,
                                megha={"gms": 1, "lms": 1, "update_period_s": self._update_wall_s()} if jobs else None)
            finally:
                if st is None:
                    removed = cellmod.down(self.name, root)     # up records before it creates
            w.event(0.0, "cell_up", cell=self.name, up_wall_s=round(time.monotonic() - t0, 2), accel=st["accel"],
                    accel_reason=st.get("accel_reason", ""), hosts=sorted(st["hosts"]), broker=st.get("broker", ""))
            summary = asyncio.run((RealJobsRun if jobs else RealRun)(self, st, w, progress).main())
            return summary
        finally:
            if st is not None:
                self._record_policies(st, w)
                self._keep_decisions(root, w)
                self._keep_logs(root, w)
                removed = cellmod.down(self.name, root)
                log.info("cell %s down: %d resources removed", self.name, len(removed))
            shutil.rmtree(root, ignore_errors=True)

    def _record_policies(self, st: dict, w: ResultsWriter) -> None:
        """What every agent loaded, and the runner's own stages (best fit's allocation)."""
        try:
            ids, stats, agents, missing = collect_now(st)
        except Exception as e:    # noqa: BLE001 - the cell may be half gone after a failure; say so
            log.warning("the agents' policies could not be collected: %s", e)
            return
        for i in self.book.identities():
            ids.append(i)
            agents.setdefault(agent_key(i), []).append("runner")
        stats.merge(self.book.env.stats)
        if not w.completed:
            policies.record(w, ids, stats, agents, mode="isolate")
            if missing:
                w.update_manifest(policy_agents_missing=missing)

    def _keep_decisions(self, root: str, w: ResultsWriter) -> None:
        """Every agent's explained decisions (decisions*.jsonl in its state) into the run's decisions.jsonl."""
        if w.completed:
            return
        n = 0
        with contextlib.suppress(OSError), open(w.path / DECISIONS, "w", encoding="utf-8") as out:
            for dirpath, _, files in sorted(os.walk(os.path.join(root, self.name))):
                for f in sorted(files):
                    if f.startswith("decisions") and f.endswith(".jsonl"):
                        with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as src:
                            for line in src:
                                if line.endswith("\n"):         # a torn last line is left out
                                    out.write(line)
                                    n += 1
        w.update_manifest(explained=n, explain_share=self.sc.run.explain)

    def _keep_logs(self, root: str, w: ResultsWriter) -> None:
        """Copy the node, broker and hostinit logs into the results folder before the cell goes."""
        dst = w.path / "cell-logs"
        src = os.path.join(root, self.name)
        with contextlib.suppress(OSError):
            for dirpath, _, files in os.walk(src):
                for f in files:
                    if f.endswith(".log") or f.endswith(".jsonl"):
                        rel = os.path.relpath(os.path.join(dirpath, f), src)
                        os.makedirs(dst / os.path.dirname(rel), exist_ok=True)
                        shutil.copyfile(os.path.join(dirpath, f), dst / rel)


