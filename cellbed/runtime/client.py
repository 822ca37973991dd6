"""Client side of the NodeAgent service, with a deadline on every call; errors come back
as the project's own hierarchy (cellbed.runtime.rpc.from_rpc_error)."""
from __future__ import annotations

import grpc

from cellbed.runtime import rpc
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg


class NodeClient:
    def __init__(self, target: str, name: str = "") -> None:
        self.target = target
        self.name = name or target
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = npbg.NodeAgentStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> "NodeClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def call(self, method: str, request, timeout: float = rpc.DEFAULT_DEADLINE_S):
        try:
            return await getattr(self.stub, method)(request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise rpc.from_rpc_error(e, f"{self.name} {method}") from e


__all__ = ["NodeClient", "npb"]
