"""A stand-in node daemon for the UI's component tests and benchmark: the NodeAgent read methods
(GetHostState, ListVms, ListMigrations, WatchEvents) over real gRPC on loopback (plaintext, as an
insecure cell's), answering from fields the test sets, and events the test emits."""
from __future__ import annotations

import asyncio
import time

import grpc

from cellbed.v1 import common_pb2 as cpb, node_pb2 as npb, node_pb2_grpc as npbg


class FakeNode(npbg.NodeAgentServicer):
    def __init__(self, host: str, cpu: float = 1.0, mem: int = 1024) -> None:
        self.host = host
        self.state = npb.HostState(host=host, address="127.0.0.1", accel="tcg", asr_class=cpb.ASR_CLASS_IDLE,
                                   capacity=npb.HostCapacity(cpu_cores=cpu, mem_mib=mem))
        self.vms: list[npb.VmInfo] = []
        self.records: list[npb.MigrationRecord] = []
        self._subs: set[asyncio.Queue] = set()
        self._seq = 0
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self) -> str:
        self.server = grpc.aio.server()
        npbg.add_NodeAgentServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(0)

    @property
    def watchers(self) -> int:
        return len(self._subs)

    def emit(self, kind: int, vm: str = "", detail: str = "", **kw) -> npb.Event:
        self._seq += 1
        ev = npb.Event(seq=self._seq, unix_s=time.time(), host=self.host, kind=kind, vm=vm, detail=detail, **kw)
        for q in self._subs:
            q.put_nowait(ev)
        return ev

    def add_vm(self, name: str, mem: int = 128) -> None:
        self.vms.append(npb.VmInfo(spec=npb.VmSpec(name=name, mem_mib=mem, vcpus=1), state=npb.VM_STATE_RUNNING,
                                   host=self.host))
        self.state.vm_count = len(self.vms)
        self.state.mem_alloc_mib = sum(v.spec.mem_mib for v in self.vms)

    # --- NodeAgent ---------------------------------------------------------------------------
    async def GetHostState(self, request, context):
        return npb.GetHostStateResponse(state=self.state)

    async def ListVms(self, request, context):
        return npb.ListVmsResponse(vms=self.vms)

    async def ListMigrations(self, request, context):
        return npb.ListMigrationsResponse(records=self.records[-request.limit:] if request.limit else self.records)

    async def WatchEvents(self, request, context):
        q: asyncio.Queue = asyncio.Queue()
        self._subs.add(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._subs.discard(q)
