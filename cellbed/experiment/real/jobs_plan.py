"""A jobs workload (``workload.source = "jobs"``) scaled to a real single-box cell: which hosts
the cell has and which tasks arrive, the one decision the real run (:mod:`.jobs`) and its model
twin (:mod:`cellbed.experiment.twin.central`) share. Pure.

* **Hosts.** ``workload.jobs.node_classes`` ([count, cores, MiB], in host order; counts sum to
  ``cell.hosts``) or, without classes, ``cell.hosts`` hosts of ``cell.host_cpu_cores``. Cores are
  the declared capacity the schedulers see, as on every real cell. Memory is scaled by one factor,
  ``cell.host_mem_mib`` over the largest class's MiB (or ``workload.jobs.node_mem_mib``), so that
  the largest host has ``cell.host_mem_mib`` and the classes keep their ratio.
* **Tasks.** The Megha paper's Poisson jobs (:func:`cellbed.controller.megha.workload.arrivals`),
  ``job_rate_per_1k_nodes`` × hosts / 1,000 jobs per s over ``arrivals_s``, durations log-uniform
  in [``task_min_s``, ``task_max_s``], the generator's CPU requests unchanged. Each memory choice
  is scaled by the same factor, at least ``workload.real.min_vm_mem_mib`` (a guest kernel needs it)
  and at most :data:`MAX_VM_MEM_MIB`, and is the guest's memory: the request the schedulers see is
  what the guest holds. Real hosts carry no machine attributes, so no job is constrained. The
  draw is seeded by ``run.seed``: the same tasks on the real cell and in its twin.

Times are simulated seconds; the real run divides them by ``workload.time_compression``.
"""
from __future__ import annotations

import dataclasses

from cellbed.controller.megha.workload import ArrivalConfig
from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.scenario.file import Scenario

MAX_VM_MEM_MIB = 256
"""A guest holds at most this much (a TCG box runs a dozen guests at once)."""
MEM_STEP_MIB = 16
MIN_HOST_CORES, MAX_HOST_CORES = 0.05, 64.0     # cellctl cell up --host-cpus
MIN_HOST_MEM_MIB = 128                          # cellctl cell up --host-mem-mib


@dataclasses.dataclass(frozen=True)
class JobsPlan:
    hosts: tuple[tuple[float, int], ...]     # (declared cores, MiB) per host, h1 first
    arrivals: ArrivalConfig                  # the tasks (arrivals(), seeded)
    mem_factor: float                        # real MiB per model MiB

    def classes(self) -> tuple[tuple[float, float, int], ...]:
        """The hosts as node classes of one host each ((1, cores, MiB), in host order)."""
        return tuple((1.0, c, m) for c, m in self.hosts)


def _scaled(mib: float, factor: float, lo: int) -> int:
    return int(min(MAX_VM_MEM_MIB, max(lo, round(mib * factor / MEM_STEP_MIB) * MEM_STEP_MIB)))


def jobs_plan(sc: Scenario, users: tuple[str, ...]) -> JobsPlan:
    """The real cell's hosts and the tasks of *sc*'s jobs workload, for the queues *users*."""
    j, c = sc.workload.jobs, sc.cell
    classes = [(float(cores), int(mib)) for k, cores, mib in j.node_classes for _ in range(int(k))]
    if not classes:
        classes = [(c.host_cpu_cores, j.node_mem_mib)] * c.hosts
    factor = c.host_mem_mib / max(m for _, m in classes)
    hosts = tuple((cores, int(round(mib * factor))) for cores, mib in classes)
    base = ArrivalConfig()
    vm_mem = tuple(_scaled(m, factor, sc.workload.real.min_vm_mem_mib) for m in base.mem_mib)
    _check_hosts(hosts, vm_mem)
    cfg = ArrivalConfig(seed=sc.run.seed, duration_s=j.arrivals_s, job_rate_per_s=j.job_rate_per_1k_nodes * c.hosts / 1000.0,
                        task_min_s=j.task_min_s, task_max_s=j.task_max_s, constrained_job_frac=0.0, users=users,
                        mem_mib=vm_mem)
    return JobsPlan(hosts, cfg.validate(), factor)


def _check_hosts(hosts: tuple[tuple[float, int], ...], vm_mem: tuple[int, ...]) -> None:
    """What a real host can be (cellctl cell up's ranges), and room for the largest guest on the
    smallest host: refused here, before a cell is brought up."""
    cores = min(c for c, _ in hosts), max(c for c, _ in hosts)
    if cores[0] < MIN_HOST_CORES or cores[1] > MAX_HOST_CORES:
        raise InvalidArgument(f"workload.jobs.node_classes: a real host has {cores[0]:g}..{cores[1]:g} cores: allowed "
                              f"{MIN_HOST_CORES:g}..{MAX_HOST_CORES:g} cores")
    small = min(m for _, m in hosts)
    if small < max(MIN_HOST_MEM_MIB, max(vm_mem)):
        raise InvalidArgument(f"cell.host_mem_mib: the smallest real host gets {small} MiB, less than "
                              f"{max(MIN_HOST_MEM_MIB, max(vm_mem))} MiB (its largest guest, and at least "
                              f"{MIN_HOST_MEM_MIB}); raise cell.host_mem_mib")
