"""What an LM learns from its node daemons: every host's capacity and attributes (GetHostState,
at start), and the VMs they run (ListVms), which a starting or taking-over LM adopts so it
forgets nothing that runs."""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_replicate import Replicator
from cellbed.controller.megha.params import LmParams
from cellbed.domain import errors, wire
from cellbed.policy.megha.validation import ClusterState, LmTask
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb

log = logging.getLogger(__name__)


class Nodes:
    def __init__(self, core: LmCore, repl: Replicator, transport, clock, params: LmParams, counters: Counter,
                 *, hosts: list[str], gms: list[str], owner: list[int] | None) -> None:
        self._core = core
        self._repl = repl
        self._transport = transport
        self._clock = clock
        self._params = params
        self._counters = counters
        self._hosts = hosts
        self._gms = gms
        self._owner = owner

    async def discover(self) -> None:
        """Capacity and attributes of every host, from its node daemon: the cluster state."""
        async def one(h: str) -> npb.HostState:
            deadline = self._clock.monotonic() + self._params.discover_timeout_s
            delay = 0.5
            while True:
                try:
                    return (await self._transport.request(h, "NodeAgent/GetHostState", npb.GetHostStateRequest(),
                                                          timeout=10.0)).state
                except errors.CellbedError as e:
                    if self._clock.monotonic() > deadline:
                        raise errors.Unavailable(f"LM {self._core.lm}: host {h} did not answer GetHostState within "
                                                 f"{self._params.discover_timeout_s:g} s: {e}") from e
                    await self._clock.sleep(delay)
                    delay = min(5.0, delay * 2)
        states = await asyncio.gather(*(one(h) for h in self._hosts))
        self._core.cluster = ClusterState(self._hosts, [s.capacity.cpu_cores for s in states],
                                          [float(s.capacity.mem_mib) for s in states],
                                          [wire.attributes_from_pb(s.attributes) for s in states], self._gms,
                                          self._owner)

    async def list_vms(self) -> dict[int, list[npb.VmInfo] | None]:
        """The VMs of every host, by host index (None: the host did not answer)."""
        async def one(h: str):
            try:
                return (await self._transport.request(h, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=10.0)).vms
            except errors.CellbedError as e:
                log.warning("LM %s: ListVms on %s failed: %s", self._core.lm, h, e)
                return None
        res = await asyncio.gather(*(one(h) for h in self._core.cluster.hosts))
        return dict(enumerate(res))

    async def vms_on(self, host: str) -> list[npb.VmInfo] | None:
        """The VMs of one host (None: it did not answer)."""
        try:
            return (await self._transport.request(host, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=10.0)).vms
        except errors.CellbedError:
            return None

    def adopt(self, h: int, vm: npb.VmInfo) -> None:
        """A VM host *h* runs that the table lacks: a running task of its owner's partition."""
        s = vm.spec
        cpu = s.req_cpu_cores or (s.vcpus or 1) * s.workload.cpu_load
        task = meghapb.MeghaTask(name=s.name, user=s.user, request=wire.resources(cpu, s.mem_mib),
                                 constraints=s.constraints, production=s.production, priority=s.priority,
                                 vcpus=s.vcpus, workload=s.workload)
        c = self._core.cluster
        c.allocate(LmTask(s.name, s.user, float(cpu), float(s.mem_mib), h, int(c.owner[h]),
                          False, "", "running", vm.created_unix_s, task))
        self._repl.changed(s.name)
        self._counters["adopted"] += 1

    async def adopt_running(self) -> None:
        for h, vms in (await self.list_vms()).items():
            for vm in vms or ():
                if vm.spec.name not in self._core.cluster.tasks:
                    self.adopt(h, vm)
