"""The SAN service: a thin translation of gRPC to the SanAgent."""
from __future__ import annotations

from cellbed.daemon.san.agent import SanAgent
from cellbed.domain import wire_checks as check
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import masb_pb2 as masbpb, masb_pb2_grpc as masbpbg


class SanServicer(masbpbg.SanServicer):
    def __init__(self, san: SanAgent) -> None:
        self.san = san

    @handles_errors
    async def RequestTaskMigration(self, request, context):
        check.task_migration(request)
        return self.san.answer(request)

    @handles_errors
    async def ProcessTaskMigration(self, request, context):
        check.task_migration_process(request)
        return await self.san.process(request)

    @handles_errors
    async def NegotiateTask(self, request, context):
        check.name("name", request.name)
        return masbpb.NegotiateTaskResponse(negotiation=await self.san.negotiate_now(request.name))

    @handles_errors
    async def ListNegotiations(self, request, context):
        return self.san.negotiations(request.limit)

    @handles_errors
    async def Explain(self, request, context):
        check.name("id", request.id)
        return masbpb.ExplainResponse(json=self.san.explanation(request.id))
