"""The LocalMaster service: a thin translation of gRPC to the LocalMaster agent."""
from __future__ import annotations

from cellbed.controller.megha.lm import LocalMaster
from cellbed.domain import errors
from cellbed.domain import wire_checks_megha as check
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import megha_pb2 as meghapb, megha_pb2_grpc as meghapbg


class LocalMasterServicer(meghapbg.LocalMasterServicer):
    """Thin: translate, delegate."""

    def __init__(self, agent: LocalMaster) -> None:
        self.agent = agent

    def _check(self, fn, request) -> None:
        """*fn(request, now, skew)*, a check of wire_checks_megha, at this LM's clock."""
        fn(request, self.agent.clock.now(), self.agent.params.max_clock_skew_s)

    @handles_errors
    async def Launch(self, request, context):
        self._check(check.placement_request, request)
        return await self.agent.launch(request)

    @handles_errors
    async def Repartition(self, request, context):
        self._check(check.placement_request, request)
        return await self.agent.repartition(request)

    @handles_errors
    async def Preempt(self, request, context):
        self._check(check.placement_request, request)
        return await self.agent.preempt(request)

    @handles_errors
    async def GetState(self, request, context):
        self.agent.require_active()
        return meghapb.GetStateResponse(state=self.agent.full_state())

    @handles_errors
    async def GetHosts(self, request, context):
        if self.agent.cluster is None:
            raise errors.Unavailable(f"LM {self.agent.lm} has not discovered its hosts yet")
        return self.agent.hosts_pb()

    @handles_errors
    async def ListPartitions(self, request, context):
        return self.agent.list_partitions()

    @handles_errors
    async def FindTasks(self, request, context):
        check.find_tasks(request)
        a = self.agent
        a.require_active()
        return meghapb.FindTasksResponse(found=[a.record_of(a.cluster.tasks[n]) for n in request.names
                                            if n in a.cluster.tasks])

    @handles_errors
    async def StopTask(self, request, context):
        check.stop_task(request)
        return meghapb.StopTaskResponse(host=await self.agent.stop_task(request.name))

    @handles_errors
    async def Replicate(self, request, context):
        a = self.agent
        check.replicate(request, a.peer, a.clock.now(), a.params.max_clock_skew_s)
        return self.agent.replicate(request)

    @handles_errors
    async def GetRole(self, request, context):
        a = self.agent
        return meghapb.GetRoleResponse(instance=a.instance, role=a.role, epoch=a.epoch)
