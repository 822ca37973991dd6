"""One live run of a jobs workload (``workload.source = "jobs"``) on a real cell whose placement
is Megha's (``policy.frontend = "central"``: 1 GM × 1 LM, which load the scenario's stages, its
T2 task order and R5 allocation among them).

* Each task (:mod:`.jobs_plan`) is submitted to the GM at its arrival, with its duration in wall
  seconds: the LM stops its VM that long after its start, as a model cell's task holds its
  request for its duration.
* Its start is read back from the GM (GetTask): allocations.csv gets the GM's own stamps
  (arrival, start) and the four parts of its allocation time; tasks.csv gets every task's job,
  arrival and duration. The reference architecture's TRT, JMS, NJSL and JWT are computed from the
  two (:mod:`cellbed.experiment.report.jobs`), as for a model run.
* The run ends once every task has started (as a model run of the jobs does), or at
  ``run.duration_s``; tasks never started are written as pending.
* Ticks, vms.csv and the end census are those of every real run (:mod:`.poll`): at the end every
  task the GM holds as running is on exactly one host, and no other VM is on any.

Every time in the results is on the simulated axis (wall seconds × ``workload.time_compression``),
the allocation-time parts included, so that a twin's rows line up with these.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time

from cellbed.controller.megha.workload import Arrival, arrivals
from cellbed.domain import errors
from cellbed.experiment.real.run import RPC_TIMEOUT_S, RealRun, Vm
from cellbed.experiment.results.files import TASK_COLUMNS, TASKS
from cellbed.metrics.rows import AllocationRow
from cellbed.runtime.waits import wait_event
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)

FOLLOW_WAIT_S = 20.0
"""GetTask waits this long (wall) for a queued task to start before it is asked again."""
SUBMIT_TRIES = 3
STARTED = (meghapb.TASK_STATE_RUNNING, meghapb.TASK_STATE_FINISHED)


class RealJobsRun(RealRun):
    """The tasks through the GM; the cell read as in every real run."""

    def __init__(self, drv, st: dict, w, progress) -> None:
        super().__init__(drv, st, w, progress)
        m = st["megha"]
        self.gm = next(iter(m["gms"].values()))
        self.user = next(iter(m["users"]))
        self.arrived: dict[str, Arrival] = {}
        self.gm_arrival_unix: dict[str, float] = {}
        self.total = 0
        self.settled: set[str] = set()       # tasks started or rejected
        self.done = asyncio.Event()

    def read_stream(self) -> list[Arrival]:
        out = arrivals(self.d.jobs.arrivals)
        self.total = len(out)
        return out

    # -- submit and follow ---------------------------------------------------------------------------
    async def _drive(self, stream: list[Arrival]) -> None:
        for a in stream:
            await self.sleep_until_sim(a.time_s)
            self.counters["tasks_added"] += 1
            vm = Vm(a.task.name, a.time_s, None, a.task.request.cpu_cores, int(a.task.request.mem_mib), False)
            self.vms[vm.name] = vm
            self.arrived[vm.name] = a
            self.counters["vms_created"] += 1
            self.spawn(self._submit(a, vm))
        if not stream:
            self.done.set()

    def _task(self, a: Arrival) -> meghapb.MeghaTask:
        t = meghapb.MeghaTask()
        t.CopyFrom(a.task)
        t.user = self.user          # vcpus stays 0: ceil(the request), which a node requires of a VM
        t.duration_s = a.task.duration_s / self.comp
        return t

    async def _submit(self, a: Arrival, vm: Vm) -> None:
        vm.state = "placing"
        for attempt in range(1, SUBMIT_TRIES + 1):
            try:
                await self.grpc(self.gm, "GlobalMaster/Submit", meghapb.SubmitRequest(task=self._task(a)))
                break
            except errors.AlreadyExists:            # an earlier try reached the GM after all
                break
            except (errors.InvalidArgument, errors.FailedPrecondition) as e:
                self._settle(vm, "placement_invalid", "stopped", f"Submit {vm.name}: {e}")
                return
            except (errors.Unavailable, errors.DeadlineExceeded) as e:   # it may have arrived: follow it
                self.counters["submit_retries"] += 1
                if attempt == SUBMIT_TRIES:
                    self.counters["submit_unanswered"] += 1
                    log.warning("Submit %s: %s; following it in case it arrived", vm.name, e)
        await self._follow(vm)

    async def _follow(self, vm: Vm) -> None:
        """Until the task starts (its allocation row) or is rejected."""
        s = await self._status(vm, FOLLOW_WAIT_S)
        while s is None or s.state not in STARTED + (meghapb.TASK_STATE_REJECTED,):
            s = await self._status(vm, FOLLOW_WAIT_S)
        if s.state == meghapb.TASK_STATE_REJECTED:
            self._settle(vm, "tasks_rejected", "stopped", f"{vm.name} rejected: {s.detail}")
        else:
            self._started(vm, s)
            self._settle(vm, "vms_placed", "running")

    async def _status(self, vm: Vm, wait_s: float) -> meghapb.TaskStatus | None:
        try:
            r = await self.grpc(self.gm, "GlobalMaster/GetTask", meghapb.GetTaskRequest(name=vm.name, wait_s=wait_s),
                                timeout=wait_s + RPC_TIMEOUT_S)
        except errors.NotFound:                # not (yet) at the GM: a Submit on its way, or one that was lost
            await asyncio.sleep(1.0)
            return None
        except (errors.Unavailable, errors.DeadlineExceeded):
            self.counters["get_task_retries"] += 1
            await asyncio.sleep(1.0)           # the GM restarts or is busy: ask again
            return None
        if r.status.allocation.arrival_unix_s:
            self.gm_arrival_unix[vm.name] = r.status.allocation.arrival_unix_s
        return r.status

    def _sim(self, unix_s: float) -> float:
        return round((unix_s - self.unix0) * self.comp, 6)

    def _started(self, vm: Vm, s: meghapb.TaskStatus) -> None:
        a, k = s.allocation, self.comp
        vm.host = s.placement.host
        arrival = self._sim(a.arrival_unix_s) if a.arrival_unix_s else vm.arrival_s
        if a.start_unix_s:
            start, attempts = self._sim(a.start_unix_s), a.attempts
            parts = (a.framework_queue_ms * k, a.processing_ms * k, a.worker_queue_ms * k, a.communication_ms * k)
            total = a.total_ms * k
        else:
            # the GM does not know when it started (it restarted after the start): started by the
            # time this runner saw it, and, as the GM counts any time no interval measured, all of
            # it framework queueing (eq. 1 = eq. 2); counted, so a run says how many rows are so
            self.counters["allocations_unstamped"] += 1
            log.warning("%s runs on %s, but GM %s has no allocation time for it: %s", vm.name,
                        s.placement.host, self.gm, s.detail or "none given")
            start, attempts = max(arrival, round(self.sim_now(), 6)), max(1, a.attempts)
            parts = ((start - arrival) * 1000, 0.0, 0.0, 0.0)
            total = parts[0]
        self.w.allocation(AllocationRow(
            task=vm.name, user=s.user, frontend=self.sc.policy.frontend, arrival_s=arrival, start_s=start,
            host=s.placement.host, framework_queue_ms=parts[0], processing_ms=parts[1], worker_queue_ms=parts[2],
            communication_ms=parts[3], total_ms=total, attempts=attempts, outcome="placed"))
        self.acc.allocation(total)

    def _settle(self, vm: Vm, counter: str, state: str, why: str = "") -> None:
        vm.state = state
        self.counters[counter] += 1
        if why:
            log.warning("%s", why)
        self.settled.add(vm.name)
        if len(self.settled) == self.total:
            self.done.set()

    # -- the end -----------------------------------------------------------------------------------------
    async def _rest(self) -> None:
        """Until every task has started (as a model run ends), or run.duration_s."""
        left = self.sc.run.duration_s / self.comp - (time.monotonic() - self.t0)
        if not await wait_event(self.done, left):
            self.counters["ended_at_duration"] += 1
        self.end_s = min(self.sc.run.duration_s, math.ceil(self.sim_now()))
        self._write_tasks()

    async def _live(self) -> set[str]:
        """The tasks the GM holds as running now (asked before each census reading: a task whose
        LM stops it between two readings is not counted lost, and one it never stops stays)."""
        for vm in [v for v in self.vms.values() if v.state == "running"]:
            s = await self._status(vm, 0.0)
            if s is not None and s.state == meghapb.TASK_STATE_FINISHED:
                vm.state = "stopped"
                self.counters["vms_stopped"] += 1
        return await super()._live()

    def _write_tasks(self) -> None:
        """tasks.csv (every task, at the GM's arrival stamp where it has one) and a pending row
        for every task that never started."""
        row = self.w.samples(TASKS, TASK_COLUMNS)
        for name, a in self.arrived.items():
            t = a.task
            arrival = self._sim(self.gm_arrival_unix[name]) if name in self.gm_arrival_unix else a.time_s
            row({"task": name, "job": a.job, "user": self.user, "arrival_s": arrival, "duration_s": t.duration_s,
                 "cpu": t.request.cpu_cores, "mem_mib": t.request.mem_mib})
            if self.vms[name].state in ("placing", "pending"):
                self.w.allocation(AllocationRow(
                    task=name, user=self.user, frontend=self.sc.policy.frontend, arrival_s=arrival,
                    start_s=math.nan, host="", framework_queue_ms=math.nan, processing_ms=math.nan,
                    worker_queue_ms=math.nan, communication_ms=math.nan, total_ms=math.nan, attempts=0,
                    outcome="pending"))
