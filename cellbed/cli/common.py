"""What every cellctl sub-command shares: output (tables, JSON), names of enum values, the cell's hosts and VMs, and a migration with its progress."""
from __future__ import annotations

import asyncio
import json
import sys
from google.protobuf import json_format
from cellbed.domain import errors
from cellbed.cell import cell as cellmod
from cellbed.runtime.client import NodeClient
from cellbed.v1 import common_pb2 as cpb, node_pb2 as npb


ASR_NAMES = {v: k.replace("ASR_CLASS_", "") for k, v in cpb.AsrClass.items()}
STATE_NAMES = {v: k.replace("VM_STATE_", "").lower() for k, v in npb.VmState.items()}
OUTCOME_NAMES = {v: k.replace("MIGRATION_OUTCOME_", "").lower() for k, v in npb.MigrationOutcome.items()}


# --- output helpers ----------------------------------------------------------------------
def table(rows: list[dict], cols: list[str]) -> str:
    if not rows:
        return "(none)"
    w = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    out = ["  ".join(c.upper().ljust(w[c]) for c in cols)]
    out += ["  ".join(str(r.get(c, "")).ljust(w[c]) for c in cols) for r in rows]
    return "\n".join(out)


def emit(args, data, text: str) -> None:
    print(json.dumps(data, indent=1, default=str) if args.json else text)


def msg_dict(m) -> dict:
    return json_format.MessageToDict(m, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def record_row(r: npb.MigrationRecord) -> dict:
    return {"id": r.id, "vm": r.vm, "src": r.src, "dst": r.dst, "outcome": OUTCOME_NAMES[r.outcome],
            "wall_ms": f"{r.wall_ms:.0f}", "elapsed_ms": f"{r.time_elapsed_ms:.0f}",
            "downtime_ms": f"{r.downtime_ms:.0f}", "setup_ms": f"{r.setup_time_ms:.0f}",
            "total_MiB": f"{r.data_total_bytes / 2**20:.1f}", "sent_MiB": f"{r.memory_processed_bytes / 2**20:.1f}",
            "iter": r.memory_iteration,
            "dirty_MiB_s": f"{r.memory_dirty_rate / 2**20:.1f}", "MiB_s": f"{r.memory_bps / 2**20:.1f}",
            "hb": f"{r.heartbeat_before}->{r.heartbeat_after}", "bad_pages": r.integrity_bad}


RECORD_COLS = ["vm", "src", "dst", "outcome", "wall_ms", "elapsed_ms", "downtime_ms", "total_MiB", "sent_MiB", "iter",
               "dirty_MiB_s", "hb", "bad_pages"]


# --- cell access -------------------------------------------------------------------------
class Cell:
    def __init__(self, args) -> None:
        self.name = args.cell
        self.state = cellmod.load_state(args.cell, args.state_root)
        if self.state is None:
            raise errors.NotFound(f"no cell {args.cell!r} under {args.state_root}: run `cellctl cell up` first")
        self.hosts = self.state["hosts"]

    def client(self, host: str) -> NodeClient:
        if host not in self.hosts:
            raise errors.NotFound(f"host {host!r} is not in cell {self.name}; hosts: {', '.join(self.hosts)}")
        h = self.hosts[host]
        return NodeClient(f"{h['address']}:{h['grpc_port']}", host)

    async def all_vms(self) -> list[npb.VmInfo]:
        async def one(h):
            async with self.client(h) as c:
                return (await c.call("ListVms", npb.ListVmsRequest(), timeout=10)).vms
        res = await asyncio.gather(*(one(h) for h in self.hosts))
        return [v for vms in res for v in vms]

    async def find_vm(self, name: str) -> npb.VmInfo:
        for v in await self.all_vms():
            if v.spec.name == name:
                return v
        raise errors.NotFound(f"VM {name!r} is on no host of cell {self.name}")


async def migrate(c: Cell, name: str, dest: str, opts: npb.MigrationOptions, show_progress: bool,
                  timeout: float = 900) -> npb.MigrationRecord:
    v = await c.find_vm(name)
    async with c.client(v.host) as cl:
        watch = None
        if show_progress:
            async def progress():
                async for ev in cl.stub.WatchEvents(npb.WatchEventsRequest()):
                    if ev.kind == npb.EVENT_KIND_MIGRATION_PROGRESS and ev.vm == name:
                        p = ev.progress
                        done = p.data_processed_bytes / max(1, p.data_total_bytes) * 100
                        sys.stderr.write(f"\r  {p.phase} iter {p.memory_iteration} {p.elapsed_ms:7.0f} ms  "
                                         f"{p.data_processed_bytes / 2**20:8.1f} MiB sent ({done:5.1f}%)  "
                                         f"remaining {p.data_remaining_bytes / 2**20:7.1f} MiB  "
                                         f"{p.memory_bps / 2**20:6.1f} MiB/s")
                        sys.stderr.flush()
            watch = asyncio.create_task(progress())
        try:
            rec = (await cl.call("MigrateVm", npb.MigrateVmRequest(name=name, dest_host=dest, options=opts),
                                 timeout=timeout)).record
        finally:
            if watch:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
                sys.stderr.write("\n")
    return rec
