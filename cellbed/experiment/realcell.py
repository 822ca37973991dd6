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
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import math
import os
import random
import shutil
import tempfile
import time
from typing import Any

import numpy as np

from cellbed.domain import errors
from cellbed.domain.vm import max_wss_mib
from cellbed.experiment.results import AllocationRow, MigrationRow, ResultsWriter, TickRow
from cellbed.experiment.scenario import Scenario

log = logging.getLogger(__name__)

MAX_VM_MEM_MIB = 128
"""Guests are small: at most this much memory each (the box runs a dozen of them under TCG)."""
RPC_TIMEOUT_S = 30.0
START_TIMEOUT_S = 240.0
BOOTS_AT_ONCE = 2
"""Placements (each a guest boot) in flight at once: a TCG boot is CPU-bound, and a dozen at once on
a 2-core box take minutes each; queued placements count as framework queueing."""


@dataclasses.dataclass(frozen=True)
class ScaleDown:
    """How normalised GCD tasks become small VMs on this box (every field goes to the manifest)."""

    cpu_cores_per_unit: float       # host cores per normalised CPU unit (host capacity / mean node CPU)
    mem_mib_per_unit: float         # MiB per normalised memory unit
    tasks_per_vm: float             # GCD tasks' CPU one VM stands for
    min_vm_mem_mib: int
    max_vm_mem_mib: int
    dirty_mib_s_per_core: float

    def vm(self, cpu_norm: float, mem_norm: float) -> tuple[float, int]:
        """(cores, MiB) of a VM for a task using/requesting *cpu_norm*, *mem_norm*."""
        cores = min(1.0, max(0.0, cpu_norm) * self.cpu_cores_per_unit * self.tasks_per_vm)
        mem = int(round(mem_norm * self.mem_mib_per_unit))
        return cores, max(self.min_vm_mem_mib, min(self.max_vm_mem_mib, mem))


class _Vm:
    __slots__ = ("name", "arrival_s", "first_try_wall", "attempts", "spec", "host", "state", "production",
                 "req_cores", "mem")

    def __init__(self, name: str, arrival_s: float, spec: Any, req_cores: float, mem: int, production: bool) -> None:
        self.name, self.arrival_s, self.spec = name, arrival_s, spec
        self.first_try_wall = math.nan
        self.attempts = 0
        self.host = ""
        self.state = "pending"         # pending | placing | running | stopping | stopped
        self.production = production
        self.req_cores, self.mem = req_cores, mem


class RealCellDriver:
    kind = "real"

    def __init__(self, sc: Scenario) -> None:
        if sc.policy.frontend not in ("masb", "bestfit"):
            raise errors.FailedPrecondition(f"policy.frontend={sc.policy.frontend!r}: a real cell runs masb or bestfit")
        self.sc = sc
        self.comp = sc.workload.time_compression
        self.use_broker = sc.policy.frontend == "masb"
        self.use_san = sc.policy.san.enabled
        self.name = "r" + "".join(random.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
        self.gen_cfg = sc.generator_config()
        from cellbed.workload.generator import WorkloadGenerator
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
                "fit": p.fit, "realloc_score": p.realloc_score, "tabu_restarts": s.tabu_restarts,
                "tabu_steps": s.tabu_steps, "tabu_patience": s.tabu_patience,
                "boot_grace_s": 15.0,
                "log_scs_rate": 1.0 / s.scs_log_every if s.scs_log_every else 0.0,
                "log_scoring_rate": 1.0 / s.scoring_log_every if s.scoring_log_every else 0.0,
                "log_target_rate": 1.0 / s.scoring_log_every if s.scoring_log_every else 0.0}

    def stages(self) -> dict[str, str]:
        r = self.sc.workload.real
        return {
            "T11": "none: hosts do not fail during a run",
            "B1": (f"real single-box cell of {self.sc.cell.hosts} namespace hosts ({self.sc.cell.host_cpu_cores:g} cores, "
                   f"{self.sc.cell.host_mem_mib} MiB each), time compression {self.comp:g}; tasks living ≥ "
                   f"{r.min_task_s:g} s become VMs ({r.task_fraction:g} of them, ≤ {r.max_vms_per_host} per host, "
                   f"{self.scale.min_vm_mem_mib}–{self.scale.max_vm_mem_mib} MiB, 1 vCPU, each carrying "
                   f"{self.scale.tasks_per_vm:.2f} GCD tasks' CPU); constraints dropped; the broker runs "
                   f"cellbed-broker's defaults in wall-clock time"),
        }

    def extra(self) -> dict[str, Any]:
        c = self.sc.cell
        return {"driver": self.kind, "real_cell": {
            "name": self.name, "hosts": c.hosts, "subnet": c.subnet, "host_cpu_cores": c.host_cpu_cores,
            "host_mem_mib": c.host_mem_mib, "accel": c.accel, "time_compression": self.comp,
            "monitor_period_wall_s": self.sc.policy.san.monitor_period_s / self.comp,
            "tick_wall_s": self.sc.run.tick_s / self.comp, "scale_down": dataclasses.asdict(self.scale),
            "san": self.san_cfg, "broker": self.use_broker}}

    # -- run ----------------------------------------------------------------------------------
    def run(self, w: ResultsWriter, progress) -> dict[str, Any]:
        from cellbed.cell import cell as cellmod
        c = self.sc.cell
        root = tempfile.mkdtemp(prefix="cellbed-run-")
        st = None
        removed: list[str] = []
        try:
            t0 = time.monotonic()
            try:
                st = cellmod.up(self.name, c.hosts, accel=c.accel, subnet=c.subnet, host_cpus=[c.host_cpu_cores],
                                host_mem_mib=[c.host_mem_mib], root=root,
                                monitor_period_s=self.sc.policy.san.monitor_period_s / self.comp, san=self.san_cfg)
            finally:
                if st is None:
                    removed = cellmod.down(self.name, root)     # up records before it creates
            w.event(0.0, "cell_up", cell=self.name, up_wall_s=round(time.monotonic() - t0, 2), accel=st["accel"],
                    accel_reason=st.get("accel_reason", ""), hosts=sorted(st["hosts"]), broker=st.get("broker", ""))
            summary = asyncio.run(_Run(self, st, w, progress).main())
            return summary
        finally:
            if st is not None:
                self._keep_logs(root, w)
                removed = cellmod.down(self.name, root)
                log.info("cell %s down: %d resources removed", self.name, len(removed))
            shutil.rmtree(root, ignore_errors=True)

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


class _Run:
    """One live run against a cell that is up (asyncio, wall clock)."""

    def __init__(self, drv: RealCellDriver, st: dict, w: ResultsWriter, progress) -> None:
        self.d, self.st, self.w, self.progress = drv, st, w, progress
        self.sc = drv.sc
        self.comp = drv.comp
        self.hosts = {h: f"{d['address']}:{d['grpc_port']}" for h, d in st["hosts"].items()}
        self.vms: dict[str, _Vm] = {}
        self.pending: collections.OrderedDict[str, _Vm] = collections.OrderedDict()
        self.counters: collections.Counter = collections.Counter()
        self.host_state: dict[str, Any] = {}
        self.seen_migrations: set[str] = set()
        self.seen_refusals: set[tuple[str, int]] = set()
        self.tick_mig: collections.Counter = collections.Counter()
        self.alloc_ms: list[float] = []
        self.rpc = asyncio.Semaphore(8)
        self.boot_slots = asyncio.Semaphore(BOOTS_AT_ONCE)
        self.bg: set[asyncio.Task] = set()
        self.last = {"tasks": 0, "over": 0.0}
        self.last_tick_s = -math.inf

    # -- time -----------------------------------------------------------------------------------
    def sim_now(self) -> float:
        return (time.monotonic() - self.t0) * self.comp

    async def sleep_until_sim(self, t_s: float) -> None:
        dt = t_s / self.comp - (time.monotonic() - self.t0)
        if dt > 0:
            await asyncio.sleep(dt)

    # -- rpc ----------------------------------------------------------------------------------------
    async def node(self, host: str, method: str, req, timeout: float = RPC_TIMEOUT_S):
        async with self.rpc:
            return await self.clients[host].call(method, req, timeout=timeout)

    async def grpc(self, target: str, method: str, req, timeout: float = RPC_TIMEOUT_S):
        return await self.transport.request(target, method, req, timeout=timeout)

    def spawn(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self.bg.add(t)
        t.add_done_callback(self._done)

    def _done(self, t: asyncio.Task) -> None:
        self.bg.discard(t)
        if not t.cancelled() and t.exception() is not None:
            self.counters["background_errors"] += 1
            log.warning("runner task failed: %r", t.exception())

    # -- the stream -----------------------------------------------------------------------------------
    def read_stream(self) -> tuple[list, dict]:
        """Every event of the run (few hosts: small) and each task's end time (simulated s)."""
        from cellbed.workload import events as ev
        from cellbed.workload.generator import WorkloadGenerator
        out, ends = [], {}
        t0 = None
        for e in WorkloadGenerator(self.d.gen_cfg):
            if t0 is None:
                t0 = e.time_us
            t = (e.time_us - t0) / 1e6
            if t > self.sc.run.duration_s:
                break
            out.append((t, e))
            if isinstance(e, ev.RemoveTask):
                ends[e.task_key] = t
        return out, ends

    # -- main -------------------------------------------------------------------------------------------
    async def main(self) -> dict[str, Any]:
        from cellbed.runtime.client import NodeClient
        from cellbed.runtime.clock import RealClock
        from cellbed.runtime.grpc_transport import GrpcTransport
        self.clients = {h: NodeClient(t, h) for h, t in self.hosts.items()}
        self.transport = GrpcTransport(lambda n: n, RealClock())
        wall0 = time.perf_counter()
        try:
            await self._wait_ready()
            stream, ends = self.read_stream()
            self.t0 = time.monotonic()
            self.unix0 = time.time()
            self.progress.wall0 = time.perf_counter()      # rate and ETA from now, not from before cell up
            ticker = asyncio.ensure_future(self._ticker())
            try:
                await self._drive(stream, ends)
                await self.sleep_until_sim(self.sc.run.duration_s)
            finally:
                ticker.cancel()
                await asyncio.gather(ticker, return_exceptions=True)
            await self._tick(final=True)
            for t in list(self.bg):
                t.cancel()
            await asyncio.gather(*self.bg, return_exceptions=True)
            lost, dup, stray = await self._check()
            return self._summary(time.perf_counter() - wall0, lost, dup, stray)
        finally:
            for c in self.clients.values():
                await c.close()
            await self.transport.close()

    async def _wait_ready(self) -> None:
        """Every node answers; with a broker, its cache holds every host (so placement can work)."""
        from cellbed.v1 import masb_pb2 as mpb, node_pb2 as pb
        deadline = time.monotonic() + 120
        while True:
            try:
                for h in self.hosts:
                    self.host_state[h] = (await self.node(h, "GetHostState", pb.GetHostStateRequest())).state
                if not self.d.use_broker:
                    return
                r = await self.grpc(self.st["broker"], "BrokerAgent/ListCache", mpb.ListCacheRequest(), timeout=5)
                if len(r.entries) >= len(self.hosts):
                    return
            except errors.CellbedError as e:
                log.debug("waiting for the cell: %s", e)
            if time.monotonic() > deadline:
                raise errors.DeadlineExceeded("the cell's nodes/broker were not ready within 120 s")
            await asyncio.sleep(1.0)

    async def _drive(self, stream: list, ends: dict) -> None:
        from cellbed.workload import events as ev
        r = self.sc.workload.real
        rng = random.Random(self.sc.run.seed)
        cap_vms = r.max_vms_per_host * len(self.hosts)
        for t, e in stream:
            await self.sleep_until_sim(t)
            if isinstance(e, ev.AddTask):
                self.counters["tasks_added"] += 1
                life = ends.get(e.task_key, math.inf) - t
                if life < r.min_task_s:
                    self.counters["not_vm_short"] += 1
                    continue
                if rng.random() >= r.task_fraction:
                    self.counters["not_vm_fraction"] += 1
                    continue
                live = sum(1 for v in self.vms.values() if v.state in ("pending", "placing", "running"))
                if live >= cap_vms:
                    self.counters["not_vm_box_full"] += 1
                    continue
                vm = self._vm(t, e)
                self.vms[vm.name] = vm
                self.counters["vms_created"] += 1
                self.spawn(self._place(vm))
            elif isinstance(e, ev.UpdateTaskUsedResources):
                vm = self.vms.get(f"t{e.job_id}-{e.task_index}")
                if vm is not None and vm.state == "running":
                    self.spawn(self._set_load(vm, e.cpu_rate or 0.0))
            elif isinstance(e, ev.RemoveTask):
                vm = self.vms.get(f"t{e.job_id}-{e.task_index}")
                if vm is not None:
                    self.spawn(self._stop(vm))

    def _vm(self, t: float, e) -> _Vm:
        from cellbed.v1 import node_pb2 as pb
        s = self.d.scale
        req_cores, mem = s.vm(e.cpu_request, e.mem_request)
        use_cores, _ = s.vm(e.cpu_request * 0.45, 0.0)     # until the first usage record: the mean use/request
        name = f"t{e.job_id}-{e.task_index}"
        prod = e.priority >= 9
        spec = pb.VmSpec(name=name, mem_mib=mem, vcpus=1,
                         workload=pb.Workload(cpu_load=use_cores, wss_mib=min(mem // 2, max_wss_mib(mem)),
                                              dirty_mib_s=s.dirty_mib_s_per_core * use_cores),
                         production=prod, priority=e.priority, req_cpu_cores=max(0.01, req_cores), user=e.user)
        return _Vm(name, t, spec, max(0.01, req_cores), mem, prod)

    # -- placement -----------------------------------------------------------------------------------
    async def _place(self, vm: _Vm) -> None:
        if vm.state != "pending":
            return
        vm.state = "placing"
        vm.attempts += 1
        if math.isnan(vm.first_try_wall):
            vm.first_try_wall = time.monotonic()
        try:
            async with self.boot_slots:        # boots are CPU-bound under TCG: a few at a time
                t_call = time.monotonic()
                host = await (self._place_broker(vm) if self.d.use_broker else self._place_bestfit(vm))
        except errors.InvalidArgument:
            vm.state = "stopped"
            self.counters["placement_invalid"] += 1
            raise
        except (errors.FailedPrecondition, errors.Unavailable, errors.DeadlineExceeded, errors.NotFound) as e:
            self.counters["placement_deferred"] += 1
            log.info("placement of %s deferred: %s", vm.name, e)
            if vm.state == "placing":
                vm.state = "pending"
                self.pending[vm.name] = vm
            elif vm.state == "stopping":
                vm.state = "stopped"
            return
        done = time.monotonic()
        vm.host = host
        stop_now = vm.state == "stopping"
        vm.state = "running"
        self.counters["vms_placed"] += 1
        queue_ms = (t_call - vm.first_try_wall) * 1000.0
        proc_ms = (done - t_call) * 1000.0
        start_s = max(vm.arrival_s, self.sim_now())
        self.w.allocation(AllocationRow(task=vm.name, user=vm.spec.user, frontend=self.sc.policy.frontend,
                                        arrival_s=vm.arrival_s, start_s=start_s, host=host,
                                        framework_queue_ms=queue_ms, processing_ms=proc_ms, worker_queue_ms=0.0,
                                        communication_ms=0.0, total_ms=queue_ms + proc_ms, attempts=vm.attempts,
                                        outcome="placed"))
        self.alloc_ms.append(queue_ms + proc_ms)
        if stop_now:
            await self._stop(vm)

    async def _place_broker(self, vm: _Vm) -> str:
        from cellbed.domain import wire
        from cellbed.v1 import masb_pb2 as mpb
        s = vm.spec
        task = mpb.TaskInfo(name=vm.name, requested=wire.resources(vm.req_cores, vm.mem),
                            used=wire.resources(s.workload.cpu_load, s.workload.wss_mib), production=vm.production,
                            priority=s.priority, mem_mib=vm.mem)
        r = await self.grpc(self.st["broker"], "BrokerAgent/AllocateTask",
                            mpb.AllocateTaskRequest(task=task, spec=s, launch=True), timeout=START_TIMEOUT_S)
        return r.host

    async def _place_bestfit(self, vm: _Vm) -> str:
        """Borg-like best fit over the hosts' last states (requests within capacity), then StartVm."""
        from cellbed.v1 import node_pb2 as pb
        best, left = None, math.inf
        for h, s in self.host_state.items():
            cap_c, cap_m = s.capacity.cpu_cores, s.capacity.mem_mib
            rc, rm = s.cpu_req_cores + vm.req_cores, s.mem_alloc_mib + vm.mem
            if rc > cap_c or rm > cap_m or s.vm_count >= self.sc.workload.real.max_vms_per_host:
                continue
            lft = (cap_c - rc) / cap_c + (cap_m - rm) / cap_m
            if lft < left:
                best, left = h, lft
        if best is None:
            raise errors.FailedPrecondition(f"no host has room for {vm.name} ({vm.req_cores:.2f} cores, {vm.mem} MiB)")
        await self.node(best, "StartVm", pb.StartVmRequest(spec=vm.spec), timeout=START_TIMEOUT_S)
        st = self.host_state[best]         # book it until the next poll, so concurrent placements see it
        st.cpu_req_cores += vm.req_cores
        st.mem_alloc_mib += vm.mem
        st.vm_count += 1
        return best

    # -- live workload ---------------------------------------------------------------------------------
    async def _locate(self, vm: _Vm) -> str:
        from cellbed.v1 import node_pb2 as pb
        for h in self.hosts:
            with contextlib.suppress(errors.CellbedError):
                if any(v.spec.name == vm.name for v in (await self.node(h, "ListVms", pb.ListVmsRequest())).vms):
                    vm.host = h
                    return h
        return ""

    async def _set_load(self, vm: _Vm, cpu_rate: float) -> None:
        from cellbed.v1 import node_pb2 as pb
        s = self.d.scale
        cores, _ = s.vm(cpu_rate, 0.0)
        wl = pb.Workload(cpu_load=cores, wss_mib=min(vm.mem // 2, max_wss_mib(vm.mem)),
                         dirty_mib_s=s.dirty_mib_s_per_core * cores)
        for attempt in range(2):
            try:
                await self.node(vm.host, "SetWorkload", pb.SetWorkloadRequest(name=vm.name, workload=wl))
                self.counters["set_workload"] += 1
                return
            except errors.NotFound:
                if attempt == 0 and await self._locate(vm):
                    continue
                self.counters["set_workload_not_found"] += 1
                return
            except errors.CellbedError as e:     # migrating, paused, ...: the next record will do
                self.counters["set_workload_skipped"] += 1
                log.debug("SetWorkload %s: %s", vm.name, e)
                return

    async def _stop(self, vm: _Vm) -> None:
        from cellbed.v1 import node_pb2 as pb
        if vm.state in ("pending",):
            self.pending.pop(vm.name, None)
            vm.state = "stopped"
            self.counters["ended_before_placed"] += 1
            return
        if vm.state == "placing":
            vm.state = "stopping"          # _place stops it once it has landed
            return
        if vm.state != "running":
            return
        vm.state = "stopping"
        for attempt in range(6):
            try:
                await self.node(vm.host, "StopVm", pb.StopVmRequest(name=vm.name), timeout=60)
                vm.state = "stopped"
                self.counters["vms_stopped"] += 1
                return
            except errors.NotFound:
                if not await self._locate(vm):
                    vm.state = "stopped"
                    self.counters["stop_not_found"] += 1
                    return
            except errors.CellbedError as e:    # e.g. migrating: try again shortly
                log.debug("StopVm %s: %s", vm.name, e)
                await asyncio.sleep(2.0 * (attempt + 1))
        vm.state = "running"
        self.counters["stop_failed"] += 1

    # -- ticks ------------------------------------------------------------------------------------------
    async def _ticker(self) -> None:
        k = 0
        while True:
            k += 1
            await self.sleep_until_sim(k * self.sc.run.tick_s)
            try:
                await self._tick(t_s=k * self.sc.run.tick_s)
            except errors.CellbedError as e:
                self.counters["tick_errors"] += 1
                log.warning("tick %d: %s", k, e)
            for name, vm in list(self.pending.items())[:8]:
                del self.pending[name]
                self.spawn(self._place(vm))

    async def _tick(self, t_s: float | None = None, final: bool = False) -> None:
        from cellbed.policy.scores.asr import AsrClass, classify
        from cellbed.v1 import masb_pb2 as mpb, node_pb2 as pb
        if t_s is None:
            t_s = self.sc.run.duration_s
            if t_s <= self.last_tick_s:
                return
        hosts = list(self.hosts)
        states = await asyncio.gather(*(self.node(h, "GetHostState", pb.GetHostStateRequest()) for h in hosts))
        for h, r in zip(hosts, states):
            self.host_state[h] = r.state
        for h in hosts:
            for rec in (await self.node(h, "ListMigrations", pb.ListMigrationsRequest())).records:
                if rec.id in self.seen_migrations:
                    continue
                self.seen_migrations.add(rec.id)
                self._migration(rec)
            if self.d.use_san:
                with contextlib.suppress(errors.CellbedError):
                    r = await self.grpc(self.hosts[h], "San/ListNegotiations", mpb.ListNegotiationsRequest(), timeout=10)
                    for n in r.negotiations:
                        for i, s in enumerate(n.steps):
                            if s.kind == "refused" and (n.san_id, i) not in self.seen_refusals:
                                self.seen_refusals.add((n.san_id, i))
                                self.tick_mig["attempted"] += 1
                                self.tick_mig["refused"] += 1
                                self.w.migration(MigrationRow(
                                    t_s=self._sim_of_unix(s.unix_s), vm=n.vm, src=n.src_host, dst=s.host,
                                    outcome="refused", forced="forced" in s.detail, san_id=n.san_id))
        st = [self.host_state[h] for h in hosts]
        cap = np.array([(s.capacity.cpu_cores, s.capacity.mem_mib) for s in st], dtype=float)
        used = np.array([(s.cpu_used_cores, s.mem_used_mib) for s in st], dtype=float)
        req = np.array([(s.cpu_req_cores, s.mem_alloc_mib) for s in st], dtype=float)
        cnt = np.array([s.vm_count for s in st])
        codes = classify(100.0 * used / cap, cnt)
        c = np.bincount(codes.astype(int), minlength=6)
        if self.alloc_ms:
            p50, p99 = (float(x) for x in np.percentile(self.alloc_ms, (50.0, 99.0)))
            self.alloc_ms.clear()
        else:
            p50 = p99 = math.nan
        m = self.tick_mig
        self.last_tick_s = t_s
        self.w.tick(TickRow(t_s=t_s, nodes=len(hosts), idle=int(c[AsrClass.IDLE]),
                            overloaded=int(c[AsrClass.OVERLOADED]), sta=int(c[AsrClass.STA]), ta=int(c[AsrClass.TA]),
                            pa=int(c[AsrClass.PA]), da=int(c[AsrClass.DA]),
                            used_cpu=float(used[:, 0].sum() / cap[:, 0].sum()),
                            used_mem=float(used[:, 1].sum() / cap[:, 1].sum()),
                            req_cpu=float(req[:, 0].sum() / cap[:, 0].sum()),
                            req_mem=float(req[:, 1].sum() / cap[:, 1].sum()), tasks_running=int(cnt.sum()),
                            tasks_pending=len(self.pending), migrations_attempted=m["attempted"],
                            migrations_succeeded=m["succeeded"], migrations_refused=m["refused"],
                            migrations_failed=m["failed"], bytes_moved=m["bytes"], alloc_p50_ms=p50,
                            alloc_p99_ms=p99))
        self.tick_mig = collections.Counter()
        over = int(c[AsrClass.OVERLOADED]) / len(hosts)
        self.last.update(tasks=int(cnt.sum()), over=over)
        self.progress.update(t_s, int(cnt.sum()), over,
                             f"{self.counters['vms_placed']} VMs placed, {len(self.seen_migrations)} migrations",
                             force=final)

    def _sim_of_unix(self, unix_s: float) -> float:
        return max(0.0, (unix_s - self.unix0) * self.comp) if unix_s else self.sim_now()

    def _migration(self, rec) -> None:
        from cellbed.v1 import node_pb2 as pb
        ok = rec.outcome == pb.MIGRATION_OUTCOME_SUCCEEDED
        refused = rec.outcome == pb.MIGRATION_OUTCOME_REFUSED
        outcome = "succeeded" if ok else ("refused" if refused else "failed")
        self.tick_mig["attempted"] += 1
        self.tick_mig[outcome] += 1
        if ok:
            self.tick_mig["bytes"] += rec.data_total_bytes
            vm = self.vms.get(rec.vm)
            if vm is not None:
                vm.host = rec.dst
        self.w.migration(MigrationRow(
            t_s=self._sim_of_unix(rec.start_unix_s), vm=rec.vm, src=rec.src, dst=rec.dst, outcome=outcome,
            time_ms=rec.time_elapsed_ms if rec.time_elapsed_ms > 0 or ok else math.nan,
            downtime_ms=rec.downtime_ms if ok else math.nan, bytes=int(rec.data_total_bytes)))

    # -- end ------------------------------------------------------------------------------------------
    async def _check(self) -> tuple[list[str], list[str], list[str]]:
        from cellbed.v1 import node_pb2 as pb
        holders: collections.Counter = collections.Counter()
        for h in self.hosts:
            for v in (await self.node(h, "ListVms", pb.ListVmsRequest())).vms:
                holders[v.spec.name] += 1
        live = {n for n, v in self.vms.items() if v.state in ("running", "stopping")}
        lost = sorted(n for n in live if holders[n] == 0)
        dup = sorted(n for n, k in holders.items() if k > 1)
        stray = sorted(n for n in holders if n not in live)
        return lost, dup, stray

    def _summary(self, wall: float, lost: list[str], dup: list[str], stray: list[str]) -> dict[str, Any]:
        from cellbed.experiment.runner import peak_rss_mib
        c = self.counters
        pend = sum(1 for v in self.vms.values() if v.state == "pending")
        st = list(self.host_state.values())
        return {
            "ok": not lost and not dup, "driver": "real", "simulated_s": self.sc.run.duration_s,
            "wall_s": round(wall, 3), "sim_min_per_wall_min": self.comp, "peak_rss_mib": round(peak_rss_mib(), 1),
            "daemon_rss_mib_max": round(max((s.daemon_rss_mib for s in st), default=0.0), 1),
            "nodes": len(self.hosts), "accel": self.st.get("accel"),
            "tasks": {"added": c["tasks_added"], "vms_created": c["vms_created"], "vms_placed": c["vms_placed"],
                      "vms_stopped": c["vms_stopped"],
                      "live": sum(1 for v in self.vms.values() if v.state in ("running", "stopping")),
                      "pending": pend, "not_vm_short": c["not_vm_short"], "not_vm_fraction": c["not_vm_fraction"],
                      "not_vm_box_full": c["not_vm_box_full"], "lost": len(lost), "duplicated": len(dup),
                      "stray": len(stray), "lost_sample": lost[:20], "duplicated_sample": dup[:20],
                      "stray_sample": stray[:20]},
            "migrations": len(self.seen_migrations), "refusals": len(self.seen_refusals),
            "runner": dict(sorted(c.items())),
        }
