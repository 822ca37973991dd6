"""The GlobalMaster service: a thin translation of gRPC to the GlobalMaster agent."""
from __future__ import annotations

from cellbed.controller.megha.gm import GlobalMaster
from cellbed.domain import errors
from cellbed.domain import wire_checks_megha as check
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import megha_pb2 as meghapb, megha_pb2_grpc as meghapbg


class GlobalMasterServicer(meghapbg.GlobalMasterServicer):
    """Thin: translate, delegate."""

    def __init__(self, agent: GlobalMaster) -> None:
        self.agent = agent

    @handles_errors
    async def Submit(self, request, context):
        a = self.agent
        check.submit(request, a.clock.now(), a.params.max_clock_skew_s)
        return meghapb.SubmitResponse(status=await self.agent.submit(request))

    @handles_errors
    async def GetTask(self, request, context):
        check.get_task(request)
        try:
            gt = self.agent.find(request.name)
        except errors.NotFound:
            return meghapb.GetTaskResponse(status=await self.agent.remote_status(request.name))
        if request.wait_s > 0:
            await self.agent.wait(gt, request.wait_s)
        return meghapb.GetTaskResponse(status=self.agent.status(gt))

    @handles_errors
    async def GetView(self, request, context):
        return self.agent.get_view()

    @handles_errors
    async def ListQueues(self, request, context):
        return self.agent.list_queues()

    @handles_errors
    async def ReportTaskEvents(self, request, context):
        a = self.agent
        check.report_task_events(request, a.clock.now(), a.params.max_clock_skew_s)
        return meghapb.ReportTaskEventsResponse(accepted=self.agent.report_events(request))
