"""How the real jobs runner turns the GM's answer for a started task into its allocations.csv
row. A stop-33 CI run found a task whose GM status had no start time (the GM had set it RUNNING
from FindTasks, not from the LM's STARTED event): the runner wrote start_s = -7.2e9, the row was
refused, the task's follower died and the task was written as pending. The GM is fixed
(tests/component/test_megha_model.py); the runner must still cope with a GM that restarted after
a task's start and does not know its allocation time."""
import collections
import math
import time
import types

import pytest

from cellbed.experiment.real.jobs import RealJobsRun
from cellbed.experiment.real.run import Vm
from cellbed.metrics.ticks import TickAccumulator
from cellbed.v1 import megha_pb2 as meghapb

COMP = 4.0


class Rows:
    def __init__(self) -> None:
        self.rows = []

    def allocation(self, row) -> None:
        self.rows.append(row)


def runner(unix0: float, wall_elapsed_s: float) -> RealJobsRun:
    """The runner's state as `_started` reads it (no cell: the method is pure bookkeeping)."""
    r = object.__new__(RealJobsRun)
    r.w, r.comp, r.unix0, r.gm = Rows(), COMP, unix0, "gm1"
    r.t0 = time.monotonic() - wall_elapsed_s
    r.sc = types.SimpleNamespace(policy=types.SimpleNamespace(frontend="central"))
    r.counters, r.acc = collections.Counter(), TickAccumulator()
    return r


def status(alloc: meghapb.AllocationTime, detail: str = "") -> meghapb.TaskStatus:
    return meghapb.TaskStatus(name="t1", user="u1", state=meghapb.TASK_STATE_RUNNING, gm="gm1", detail=detail,
                              placement=meghapb.Placement(lm="lm1", host="h2"), allocation=alloc)


def test_a_stamped_start_is_the_gms_own_times_on_the_simulated_axis():
    r = runner(unix0=1_800_000_000.0, wall_elapsed_s=30.0)
    a = meghapb.AllocationTime(arrival_unix_s=1_800_000_010.0, start_unix_s=1_800_000_012.5, framework_queue_ms=500,
                               processing_ms=100, worker_queue_ms=1_800, communication_ms=100, total_ms=2_500,
                               attempts=1)
    vm = Vm("t1", 40.0, None, 1.0, 512, False)
    r._started(vm, status(a))
    (row,) = r.w.rows
    # (10 s, 12.5 s) after unix0, × 4; each part × 4: 2,000 + 400 + 7,200 + 400 = 10,000 ms = (50 − 40) s
    assert (row.arrival_s, row.start_s, row.host) == (40.0, 50.0, "h2")
    assert (row.framework_queue_ms, row.processing_ms, row.worker_queue_ms, row.communication_ms) == (2000, 400, 7200, 400)
    assert row.total_ms == 10_000 == (row.start_s - row.arrival_s) * 1000
    assert vm.host == "h2" and not r.counters["allocations_unstamped"]


def test_an_unstamped_start_is_when_the_runner_saw_it_all_framework_queueing_and_counted():
    r = runner(unix0=1_800_000_000.0, wall_elapsed_s=30.0)       # the runner sees it at 30 wall s = 120 sim s
    a = meghapb.AllocationTime(arrival_unix_s=1_800_000_010.0, attempts=0)   # what a restarted GM answers
    r._started(Vm("t1", 40.0, None, 1.0, 512, False), status(a, "placed before this GM restarted"))
    (row,) = r.w.rows
    assert row.arrival_s == 40.0 and row.outcome == "placed" and row.attempts == 1
    assert 120.0 <= row.start_s < 121.0                          # not 1.8e9 × −4
    assert row.framework_queue_ms == pytest.approx((row.start_s - 40.0) * 1000) == row.total_ms
    assert (row.processing_ms, row.worker_queue_ms, row.communication_ms) == (0.0, 0.0, 0.0)
    assert r.counters["allocations_unstamped"] == 1
    assert all(math.isfinite(v) for v in (row.start_s, row.total_ms))
