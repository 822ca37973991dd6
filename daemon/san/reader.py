"""The host reader: this host as the SAN's policies see it, read from the NodeAgent's live
HostView: capacity, the load step 1 checks, the state a target's accept rule checks, a task's
description for the other agents, and each task's sampled CPU statistics (the GPA fit test)."""
from __future__ import annotations

import math

from cellbed.daemon.host_view import HostView
from cellbed.domain import errors, wire
from cellbed.policy.masb import accept, overload
from cellbed.runtime.clock import Clock
from cellbed.v1 import masb_pb2 as masbpb


class HostReader:
    """*cpu_stats*: keep each task's running CPU mean and variance (the accept rule reads them);
    *boot_grace_s*: a VM's first seconds do not count towards the load."""

    def __init__(self, view: HostView, clock: Clock, *, boot_grace_s: float, cpu_stats: bool) -> None:
        self.view = view
        self.host = view.host
        self.clock = clock
        self.boot_grace_s = boot_grace_s
        self.cpu_stats = cpu_stats
        self._stats: dict[str, list[float]] = {}        # vm -> [n, mean, M2] of sampled CPU (GPA)

    # --- the host ------------------------------------------------------------------------------------
    def capacity(self) -> tuple[float, float]:
        cpu, mem = self.view.capacity
        return cpu, float(mem)

    def prod_requested(self) -> tuple[float, float]:
        return self.view.prod_requested()

    def young(self) -> list:
        """VMs still booting or within boot_grace_s of their start: their CPU is boot noise."""
        now = self.clock.now()
        return [e for e in self.view.vms.values()
                if e.reason == "starting" or (self.boot_grace_s and now - e.spec.created_unix_s < self.boot_grace_s)]

    def load(self) -> overload.HostLoad:
        cpu, mem = self.view.used()
        for e in self.young() if self.boot_grace_s else ():
            cpu -= e.cpu_used_cores
        return overload.HostLoad(self.capacity(), (max(cpu, 0.0), mem), self.prod_requested())

    def target_state(self) -> accept.TargetState:
        cpu_u = mem_u = 0.0
        for e in self.view.vms.values():
            cpu_u += e.cpu_used_cores
            mem_u += e.rss_mib
        inc_c = sum(r.cpu_used for r in self.view.incoming.values())
        inc_m = sum(r.mem_used for r in self.view.incoming.values())
        mean = var = 0.0
        samples = math.inf
        if self.cpu_stats:
            for name in self.view.vms:
                m, v, n = self.gpa(name)
                mean, var, samples = mean + m, var + v, min(samples, n)
        return accept.TargetState(self.host, self.capacity(), (cpu_u, mem_u), (inc_c, inc_m), self.prod_requested(),
                                  self.view.attributes, mean, var, samples)

    # --- a task ----------------------------------------------------------------------------------------
    def task_info(self, name: str) -> masbpb.TaskInfo:
        e = self.view.vms.get(name)
        if e is None:
            raise errors.NotFound(f"task {name!r} is not on host {self.host}")
        s = e.spec
        m, v, n = self.gpa(name)
        return masbpb.TaskInfo(name=name, used=wire.resources(e.cpu_used_cores, e.rss_mib),
                               cpu_mean=m, cpu_var=v, cpu_samples=n,
                               requested=wire.resources(s.requested_cpu, s.mem_mib),
                               constraints=wire.constraints_pb(s.constraints), production=s.production,
                               priority=s.priority, mem_mib=s.mem_mib, wss_mib=s.wss_mib,
                               dirty_mib_s=-1 if math.isinf(s.dirty_mib_s) else s.dirty_mib_s)

    # --- sampled CPU statistics (GPA) ----------------------------------------------------------------
    def update_cpu_stats(self) -> None:
        """Welford running mean/variance of each VM's sampled CPU use, for the GPA fit test.
        (Seed 003 uses 1-s samples; here a sample is one monitor period's mean.)"""
        for name in [n for n in self._stats if n not in self.view.vms]:
            del self._stats[name]
        for name, e in self.view.vms.items():
            if e.reason == "starting":
                continue
            st = self._stats.setdefault(name, [0, 0.0, 0.0])
            st[0] += 1
            d = e.cpu_used_cores - st[1]
            st[1] += d / st[0]
            st[2] += d * (e.cpu_used_cores - st[1])

    def gpa(self, name: str) -> tuple[float, float, int]:
        """(mean, variance, samples) of *name*'s sampled CPU use; zeros below two samples."""
        st = self._stats.get(name)
        if not st or st[0] < 2:
            return 0.0, 0.0, 0
        return st[1], st[2] / (st[0] - 1), int(st[0])
