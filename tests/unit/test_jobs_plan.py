"""The jobs workload scaled to a real cell (cellbed/experiment/real/jobs_plan.py): the hosts and
the tasks that the real run and its model twin share, with the arithmetic in the table."""
from __future__ import annotations

from pathlib import Path

import pytest

from cellbed.controller.megha.workload import arrivals
from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.real.jobs_plan import MAX_VM_MEM_MIB, jobs_plan
from cellbed.experiment.runner import driver_for
from cellbed.experiment.scenario.file import load_scenario

REPO = Path(__file__).resolve().parents[2]

SCENARIO = "scenarios/refarch-real.toml"


def plan(*sets, users=("default",)):
    return jobs_plan(load_scenario(str(REPO / SCENARIO), list(sets)), users)


@pytest.mark.parametrize("sets, hosts, factor, mem", [
    # node classes [[1, 4, 16384], [2, 2, 8192]], host_mem_mib 1024: factor 1024 / 16384 = 1/16;
    # memory choices 256, 512, 1024, 2048, 4096 MiB x 1/16 = 16, 32, 64, 128, 256 -> at least 96 (min_vm_mem_mib)
    ((), ((4.0, 1024), (2.0, 512), (2.0, 512)), 0.0625, (96, 96, 96, 128, 256)),
    # host_mem_mib 4096: factor 1/4 -> 64, 128, 256, 512, 1024 -> [96, 256]: 96, 128, 256, 256, 256
    (("cell.host_mem_mib=4096",), ((4.0, 4096), (2.0, 2048), (2.0, 2048)), 0.25, (96, 128, 256, 256, 256)),
    # no classes: cell.hosts hosts of host_cpu_cores; factor host_mem_mib / jobs.node_mem_mib = 2048 / 16384 = 1/8
    # -> 32, 64, 128, 256, 512 -> 96, 96, 128, 256, 256
    (("workload.jobs.node_classes=[]", "cell.host_cpu_cores=3", "cell.host_mem_mib=2048"),
     ((3.0, 2048),) * 3, 0.125, (96, 96, 128, 256, 256)),
])
def test_hosts_and_memory_scale_by_one_factor(sets, hosts, factor, mem):
    p = plan(*sets)
    assert p.hosts == hosts
    assert p.mem_factor == factor
    assert p.arrivals.mem_mib == mem and max(mem) <= MAX_VM_MEM_MIB
    assert p.classes() == tuple((1.0, c, m) for c, m in hosts)


def test_the_tasks_are_the_papers_jobs_at_the_cells_rate_unconstrained():
    p = plan()
    # 6 jobs/s per 1,000 nodes x 3 hosts = 0.018 jobs/s over 600 s of arrivals
    assert p.arrivals.job_rate_per_s == pytest.approx(0.018)
    assert (p.arrivals.duration_s, p.arrivals.task_min_s, p.arrivals.task_max_s) == (600.0, 60.0, 480.0)
    a = arrivals(p.arrivals)
    assert a and all(not x.task.constraints for x in a)
    assert all(60.0 <= x.task.duration_s <= 480.0 and x.time_s < 600.0 for x in a)
    assert {x.task.request.mem_mib for x in a} <= set(p.arrivals.mem_mib)


def test_the_real_run_and_its_twin_get_the_same_tasks_whatever_the_queue_names():
    real = arrivals(plan(users=("default",)).arrivals)
    twin = arrivals(plan(users=("u1",)).arrivals)
    key = lambda xs: [(x.time_s, x.job, x.task.name, x.task.duration_s, x.task.request.cpu_cores,  # noqa: E731
                       x.task.request.mem_mib) for x in xs]
    assert key(real) == key(twin)
    assert key(arrivals(plan("run.seed=4").arrivals)) != key(real)


@pytest.mark.parametrize("sets, msg", [
    (("workload.jobs.fill=0.5",), "workload.jobs.fill=0.5: a real cell starts empty"),
    (("cell.hosts=4",), "workload.jobs.node_classes hold 3 nodes: cell.hosts must be 3 (got 4)"),
    (("policy.frontend=masb",), "workload.source='jobs' runs on a model cell with a Megha front-end"),
    # host_mem_mib 128: factor 128 / 16384 -> hosts of 128, 64 and 64 MiB; every guest at least 96 MiB
    (("cell.host_mem_mib=128",), "cell.host_mem_mib: the smallest real host gets 64 MiB, less than 128 MiB"),
    (("workload.jobs.node_classes=[[1, 100, 16384], [2, 2, 8192]]",),
     "workload.jobs.node_classes: a real host has 2..100 cores: allowed 0.05..64 cores"),
])
def test_what_a_real_jobs_cell_refuses_names_the_field(sets, msg):
    with pytest.raises(InvalidArgument, match=msg.replace("(", r"\(").replace(")", r"\)")):
        plan(*sets)


def test_an_lm_period_a_real_cell_cannot_run_is_refused_before_a_cell_is_built():
    """8 simulated s at compression 1,000 is 0.008 wall s: below the LM's 0.1 s (cell up's range)."""
    sc = load_scenario(str(REPO / SCENARIO), ["workload.time_compression=1000"])
    with pytest.raises(InvalidArgument, match=r"policy.megha.update_period_s / workload.time_compression=0.008 "):
        driver_for(sc)
