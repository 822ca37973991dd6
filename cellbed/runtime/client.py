"""Client side of the NodeAgent service, with a deadline on every call; errors come back
as the project's own hierarchy (cellbed.runtime.rpc.from_rpc_error)."""
from __future__ import annotations

import grpc

from cellbed.runtime import rpc
from cellbed.runtime.authz import Security
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg


class NodeClient:
    def __init__(self, target: str, name: str = "", security: Security | None = None) -> None:
        """*security*: the caller's mTLS identity (cellctl: the cell's admin certificate); None is
        plaintext, for insecure cells."""
        self.target = target
        self.name = name or target
        self.channel = (security or Security.insecure("")).channel(target)
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
