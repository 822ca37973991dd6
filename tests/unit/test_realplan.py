"""Which tasks become VMs on a real cell (cellbed/workload/realplan.py): the one decision the
real-cell runner and its model twin share. Table tests with hand-made streams."""
import math

import pytest

from cellbed.workload import realplan
from cellbed.workload import events as ev

SCALE = realplan.ScaleDown(cpu_cores_per_unit=2.0, mem_mib_per_unit=1000.0, tasks_per_vm=2.0, min_vm_mem_mib=96,
                           max_vm_mem_mib=128, dirty_mib_s_per_core=8.0)


def add(t, job, cpu=0.1, mem=0.1, prio=0):
    return (t, ev.AddTask(time_us=int(t * 1e6), job_id=job, task_index=0, user="u", priority=prio,
                          scheduling_class=0, cpu_request=cpu, mem_request=mem))


def rm(t, job):
    return (t, ev.RemoveTask(time_us=int(t * 1e6), job_id=job, task_index=0, reason=ev.EndReason.FINISH))


def plan(stream, **kw):
    args = dict(hosts=1, max_vms_per_host=2, min_task_s=100.0, task_fraction=1.0, seed=1) | kw
    return realplan.plan(stream, SCALE, **args)


def test_scale_down_arithmetic():
    # 0.1 CPU units × 2 cores/unit × 2 tasks/VM = 0.4 cores; 0.1 mem units × 1000 MiB = 100 MiB
    assert SCALE.vm(0.1, 0.1) == (pytest.approx(0.4), 100)
    assert SCALE.vm(0.5, 0.01) == (1.0, 96)          # capped at one vCPU; memory clamped up to 96
    assert SCALE.vm(0.1, 1.0)[1] == 128              # and down to 128
    assert SCALE.wss(128) == 48 and SCALE.wss(96) == 16   # min(mem // 2, mem - 80)
    assert SCALE.dirty(0.5) == 4.0


def test_run_ends_pairs_each_add_with_the_next_remove_of_its_task():
    s = [add(0, 1), rm(50, 1), add(60, 1), add(70, 2), rm(500, 2)]
    ends = realplan.run_ends(s)
    assert ends[0] == 50 and ends[2] == math.inf and ends[3] == 500
    assert math.isnan(ends[1]) and math.isnan(ends[4])


@pytest.mark.parametrize("stream, kw, decisions", [
    ([add(0, 1), rm(99, 1)], {}, ["short"]),                       # lives 99 s < 100 s
    ([add(0, 1), rm(100, 1)], {}, ["vm"]),                         # exactly min_task_s: a VM
    ([add(0, 1)], {}, ["vm"]),                                     # never ends in the run
    ([add(0, 1), add(1, 2), add(2, 3)], {}, ["vm", "vm", "box_full"]),      # 2 VMs per host
    ([add(0, 1), rm(200, 1), add(1, 2), add(200, 3)], {}, ["vm", "vm", "vm"]),  # one ended: room again
    ([add(0, 1), add(1, 2)], {"hosts": 2}, ["vm", "vm"]),
    ([add(0, 1)] * 1, {"task_fraction": 0.0}, ["fraction"]),
])
def test_decisions(stream, kw, decisions):
    p = plan(stream, **kw)
    assert p.decisions == decisions
    assert len(p.vms) == decisions.count("vm")
    assert sum(p.counts().values()) == len(decisions)


def test_a_planned_vm_carries_the_runners_spec():
    (v,) = plan([add(10, 7, cpu=0.1, mem=0.12, prio=9), rm(400, 7)]).vms
    assert (v.name, v.arrival_s, v.end_s) == ("t7-0", 10, 400)
    assert v.req_cores == pytest.approx(0.4) and v.use_cores == pytest.approx(0.4 * realplan.USE_OF_REQUEST)
    assert (v.mem_mib, v.wss_mib) == (120, 40)
    assert v.dirty_mib_s == pytest.approx(8.0 * v.use_cores)
    assert v.production and v.priority == 9


def test_the_fraction_draw_is_seeded():
    s = [add(i, i) for i in range(40)]
    a = plan(s, task_fraction=0.5, max_vms_per_host=100, seed=3).decisions
    assert a == plan(s, task_fraction=0.5, max_vms_per_host=100, seed=3).decisions
    assert 5 < a.count("vm") < 35 and a != plan(s, task_fraction=0.5, max_vms_per_host=100, seed=4).decisions
