"""One live run of the real-cell driver against a cell that is up: the scenario's stream drives
guests (placement by broker or best fit, SetWorkload from usage records, StopVm at the task's
end), in wall-clock time compressed by ``workload.time_compression``."""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import time
from typing import Any, Protocol

from cellbed.domain import errors, wire
from cellbed.domain.names import task_name
from cellbed.workload import realplan
from cellbed.experiment.real.poll import PollMixin
from cellbed.model.central_fit import Row, choose
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.experiment.real.stop import stop_until_done
from cellbed.experiment.results.writer import ResultsWriter
from cellbed.experiment.results.files import SANS, VM_COLUMNS, VMS
from cellbed.metrics.san_timing import SAN_COLUMNS
from cellbed.metrics.rows import AllocationRow
from cellbed.metrics.ticks import TickAccumulator
from cellbed.cell import cell_pki
from cellbed.runtime.client import NodeClient
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb
from cellbed.workload import events as ev
from cellbed.workload.generator_config import GeneratorConfig
from cellbed.experiment.scenario.file import Scenario

log = logging.getLogger(__name__)

MAX_VM_MEM_MIB = 128
"""Guests are small: at most this much memory each (the box runs a dozen of them under TCG)."""
RPC_TIMEOUT_S = 30.0
START_TIMEOUT_S = 240.0
BOOTS_AT_ONCE = 2
"""Placements (each a guest boot) in flight at once: a TCG boot is CPU-bound, and a dozen at once on
a 2-core box take minutes each; queued placements count as framework queueing."""



class LiveCell(Protocol):
    """What a live run reads of its driver (:class:`~cellbed.experiment.real.driver.RealCellDriver`,
    which starts the run): the scenario, the time compression, whether a broker places and SAN
    runs, the generator's settings and the scale-down."""

    sc: Scenario
    comp: float
    use_broker: bool
    use_san: bool
    book: PolicyBook
    gen_cfg: GeneratorConfig
    scale: realplan.ScaleDown


class Vm:
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


class RealRun(PollMixin):
    """One live run against a cell that is up (asyncio, wall clock)."""

    def __init__(self, drv: LiveCell, st: dict, w: ResultsWriter, progress) -> None:
        self.d, self.st, self.w, self.progress = drv, st, w, progress
        self.sc = drv.sc
        self.comp = drv.comp
        self.hosts = {h: f"{d['address']}:{d['grpc_port']}" for h, d in st["hosts"].items()}
        self.vms: dict[str, Vm] = {}
        self.pending: collections.OrderedDict[str, Vm] = collections.OrderedDict()
        self.counters: collections.Counter = collections.Counter()
        self.host_state: dict[str, Any] = {}
        self.seen_migrations: set[str] = set()
        self.seen_refusals: set[tuple[str, int]] = set()
        self.seen_sans: set[str] = set()
        self.acc = TickAccumulator()         # migrations and allocation times of the current tick
        self.rpc = asyncio.Semaphore(8)
        self.boot_slots = asyncio.Semaphore(BOOTS_AT_ONCE)
        self.bg: set[asyncio.Task] = set()
        self.last = {"tasks": 0, "over": 0.0}
        self.last_tick_s = -math.inf
        self.end_s = self.sc.run.duration_s     # the run's last simulated second (a jobs run may end sooner)
        self.rng = random.Random(self.sc.run.seed)      # for an allocation policy that draws

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
    def read_stream(self) -> list:
        """Every (simulated s, event) of the run (few hosts: small)."""
        return realplan.read_stream(self.d.gen_cfg, self.sc.run.duration_s)

    # -- main -------------------------------------------------------------------------------------------
    async def main(self) -> dict[str, Any]:
        admin = cell_pki.admin(self.st)       # the runner acts as the cell's operator
        self.clients = {h: NodeClient(t, h, admin) for h, t in self.hosts.items()}
        self.transport = GrpcTransport(lambda n: n, RealClock(), security=admin)
        wall0 = time.perf_counter()
        try:
            await self._wait_ready()
            self.vm_rows = self.w.samples(VMS, VM_COLUMNS)
            self.san_rows = self.w.samples(SANS, SAN_COLUMNS)
            stream = self.read_stream()
            self.t0 = time.monotonic()
            self.unix0 = time.time()
            self.progress.wall0 = time.perf_counter()      # rate and ETA from now, not from before cell up
            ticker = asyncio.ensure_future(self._ticker())
            try:
                await self._drive(stream)
                await self._rest()
            finally:
                ticker.cancel()
                await asyncio.gather(ticker, return_exceptions=True)
            await self._tick(final=True)
            for t in list(self.bg):
                t.cancel()
            await asyncio.gather(*self.bg, return_exceptions=True)
            return self._summary(time.perf_counter() - wall0, await self._check())
        finally:
            for c in self.clients.values():
                await c.close()
            await self.transport.close()

    async def _rest(self) -> None:
        """After the stream: the run lasts run.duration_s."""
        await self.sleep_until_sim(self.sc.run.duration_s)

    async def _wait_ready(self) -> None:
        """Every node answers; with a broker, its cache holds every host (so placement can work)."""
        deadline = time.monotonic() + 120
        while True:
            try:
                for h in self.hosts:
                    self.host_state[h] = (await self.node(h, "GetHostState", npb.GetHostStateRequest())).state
                if not self.d.use_broker:
                    return
                r = await self.grpc(self.st["broker"], "BrokerAgent/ListCache", masbpb.ListCacheRequest(), timeout=5)
                if len(r.entries) >= len(self.hosts):
                    return
            except errors.CellbedError as e:
                log.debug("waiting for the cell: %s", e)
            if time.monotonic() > deadline:
                raise errors.DeadlineExceeded("the cell's nodes/broker were not ready within 120 s")
            await asyncio.sleep(1.0)

    def plan(self, stream: list) -> realplan.Plan:
        """Which AddTasks become VMs (the decision ``cellctl compare``'s model twin shares)."""
        r = self.sc.workload.real
        return realplan.plan(stream, self.d.scale, hosts=len(self.hosts), max_vms_per_host=r.max_vms_per_host,
                             min_task_s=r.min_task_s, task_fraction=r.task_fraction, seed=self.sc.run.seed)

    async def _drive(self, stream: list) -> None:
        p = self.plan(stream)
        decisions, vms = iter(p.decisions), iter(p.vms)
        for t, e in stream:
            await self.sleep_until_sim(t)
            if isinstance(e, ev.AddTask):
                self.counters["tasks_added"] += 1
                d = next(decisions)
                if d != "vm":
                    self.counters[f"not_vm_{d}"] += 1
                    continue
                vm = self._vm(next(vms))
                self.vms[vm.name] = vm
                self.counters["vms_created"] += 1
                self.spawn(self._place(vm))
            elif isinstance(e, ev.UpdateTaskUsedResources):
                vm = self.vms.get(task_name(e.job_id, e.task_index))
                if vm is not None and vm.state == "running":
                    self.spawn(self._set_load(vm, e.cpu_rate or 0.0))
            elif isinstance(e, ev.RemoveTask):
                vm = self.vms.get(task_name(e.job_id, e.task_index))
                if vm is not None:
                    self.spawn(self._stop(vm))

    @staticmethod
    def _vm(v: realplan.PlannedVm) -> Vm:
        spec = npb.VmSpec(name=v.name, mem_mib=v.mem_mib, vcpus=1,
                         workload=npb.Workload(cpu_load=v.use_cores, wss_mib=v.wss_mib, dirty_mib_s=v.dirty_mib_s),
                         production=v.production, priority=v.priority, req_cpu_cores=v.req_cores, user=v.user)
        return Vm(v.name, v.arrival_s, spec, v.req_cores, v.mem_mib, v.production)

    # -- placement -----------------------------------------------------------------------------------
    async def _place(self, vm: Vm) -> None:
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
        self.acc.allocation(queue_ms + proc_ms)
        if stop_now:
            await self._stop(vm)

    async def _place_broker(self, vm: Vm) -> str:
        s = vm.spec
        task = masbpb.TaskInfo(name=vm.name, requested=wire.resources(vm.req_cores, vm.mem),
                            used=wire.resources(s.workload.cpu_load, s.workload.wss_mib), production=vm.production,
                            priority=s.priority, mem_mib=vm.mem)
        r = await self.grpc(self.st["broker"], "BrokerAgent/AllocateTask",
                            masbpb.AllocateTaskRequest(task=task, spec=s, launch=True), timeout=START_TIMEOUT_S)
        return r.host

    async def _place_bestfit(self, vm: Vm) -> str:
        """Borg-like best fit (the ``allocation`` stage, as on a model cell) over the hosts' last
        states, on requests or measured use as the cell admits, at most max_vms_per_host each
        (boot capacity), then StartVm."""
        by_use = self.d.book.get("admission", "requested").ident.name == "used"
        limit = self.sc.workload.real.max_vms_per_host
        rows = [Row(h, s.vm_count < limit, (s.capacity.cpu_cores, s.capacity.mem_mib),
                    (s.cpu_used_cores, s.mem_used_mib) if by_use else (s.cpu_req_cores, s.mem_alloc_mib))
                for h, s in self.host_state.items()]
        best = choose(self.d.book.get("allocation", "best_fit"), rows, (vm.req_cores, vm.mem), self.rng)
        if best is None:
            raise errors.FailedPrecondition(f"no host has room for {vm.name} ({vm.req_cores:.2f} cores, {vm.mem} MiB)")
        await self.node(best, "StartVm", npb.StartVmRequest(spec=vm.spec), timeout=START_TIMEOUT_S)
        st = self.host_state[best]         # book it until the next poll, so concurrent placements see it
        st.cpu_req_cores += vm.req_cores
        st.mem_alloc_mib += vm.mem
        st.cpu_used_cores += vm.req_cores
        st.mem_used_mib += vm.mem
        st.vm_count += 1
        return best

    # -- live workload ---------------------------------------------------------------------------------
    async def _locate(self, vm: Vm) -> str:
        for h in self.hosts:
            with contextlib.suppress(errors.CellbedError):
                if any(v.spec.name == vm.name for v in (await self.node(h, "ListVms", npb.ListVmsRequest())).vms):
                    vm.host = h
                    return h
        return ""

    async def _set_load(self, vm: Vm, cpu_rate: float) -> None:
        s = self.d.scale
        cores = s.cores(cpu_rate)
        wl = npb.Workload(cpu_load=cores, wss_mib=s.wss(vm.mem), dirty_mib_s=s.dirty(cores))
        for attempt in range(2):
            try:
                await self.node(vm.host, "SetWorkload", npb.SetWorkloadRequest(name=vm.name, workload=wl))
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

    async def _stop(self, vm: Vm) -> None:
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

        async def stop():
            await self.node(vm.host, "StopVm", npb.StopVmRequest(name=vm.name), timeout=60)

        outcome = await stop_until_done(stop, lambda: self._locate(vm), name=vm.name)
        if outcome == "refused":          # it runs on (logged), and is counted live
            vm.state = "running"
            self.counters["stop_failed"] += 1
            return
        vm.state = "stopped"
        self.counters["vms_stopped" if outcome == "stopped" else "stop_not_found"] += 1

