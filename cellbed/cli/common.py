"""What every cellctl sub-command shares: output (tables, JSON), names of enum values, the cell's hosts and VMs, and a migration with its progress."""
from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import sys

from google.protobuf.descriptor import FieldDescriptor
from cellbed.domain import errors
from cellbed.cell import cell as cellmod, cell_pki
from cellbed.runtime.authz import Security
from cellbed.runtime.client import NodeClient
from cellbed.runtime.tlsfiles import TlsFiles
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
    print(json.dumps(data, indent=1, default=str, allow_nan=False) if args.json else text)


def msg_dict(m) -> dict:
    """A message as JSON-ready data: proto field names, every field present, enums by name, and
    numbers as numbers (protobuf's own JSON mapping writes 64-bit integers as strings)."""
    return {f.name: _field_value(f, getattr(m, f.name)) for f in m.DESCRIPTOR.fields
            if not f.has_presence or m.HasField(f.name)}


_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
          FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}


def _scalar(f: FieldDescriptor, v):
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return msg_dict(v)
    if f.type == FieldDescriptor.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else v
    if f.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(v).decode()
    if f.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE) and not math.isfinite(v):
        return str(v)   # JSON has no NaN or infinity; protobuf's mapping writes "NaN", "Infinity"
    return int(v) if f.type in _INT64 else v


def _field_value(f: FieldDescriptor, v):
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        vf = f.message_type.fields_by_name["value"]
        return {str(k): _scalar(vf, x) for k, x in v.items()}
    if f.is_repeated:
        return [_scalar(f, x) for x in v]
    return _scalar(f, v)


def record_row(r: npb.MigrationRecord) -> dict:
    return {"id": r.id, "vm": r.vm, "src": r.src, "dst": r.dst, "outcome": OUTCOME_NAMES[r.outcome],
            "wall_ms": f"{r.wall_ms:.0f}", "elapsed_ms": f"{r.time_elapsed_ms:.0f}",
            "downtime_ms": f"{r.downtime_ms:.0f}", "setup_ms": f"{r.setup_time_ms:.0f}",
            "total_MiB": f"{r.data_total_bytes / 2**20:.1f}", "sent_MiB": f"{r.memory_processed_bytes / 2**20:.1f}",
            "iter": r.memory_iteration,
            "dirty_MiB_s": f"{r.memory_dirty_rate / 2**20:.1f}", "guest_dirty": f"{r.guest_dirty_mib_s:.1f}",
            "MiB_s": f"{r.memory_bps / 2**20:.1f}",
            "hb": f"{r.heartbeat_before}->{r.heartbeat_after}", "bad_pages": r.integrity_bad,
            "tls": "on" if r.tls else "off"}


RECORD_COLS = ["vm", "src", "dst", "outcome", "wall_ms", "elapsed_ms", "downtime_ms", "total_MiB", "sent_MiB", "iter",
               "dirty_MiB_s", "guest_dirty", "hb", "bad_pages", "tls"]


# --- cell access -------------------------------------------------------------------------
class Cell:
    def __init__(self, args) -> None:
        self.name = args.cell
        self.state = cellmod.load_state(args.cell, args.state_root)
        if self.state is None:
            raise errors.NotFound(f"no cell {args.cell!r} under {args.state_root}: run `cellctl cell up` first")
        self.hosts = self.state["hosts"]
        self.security = cell_pki.admin(self.state)   # the cell's admin certificate (plaintext if insecure)

    def client(self, host: str) -> NodeClient:
        if host not in self.hosts:
            raise errors.NotFound(f"host {host!r} is not in cell {self.name}; hosts: {', '.join(self.hosts)}")
        h = self.hosts[host]
        return NodeClient(f"{h['address']}:{h['grpc_port']}", host, self.security)

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


def security_for(args) -> Security:
    """cellctl's identity for agents named directly (--broker, --gm, --lm, --controller): the
    admin certificate of the cell named by --cell if it exists on this box, else the files in
    $CELLBED_TLS_CA, $CELLBED_TLS_CERT, $CELLBED_TLS_KEY (a lab's admin certificate), else
    plaintext (which a secure agent refuses)."""
    st = cellmod.load_state(args.cell, args.state_root)
    if st is not None:
        return cell_pki.admin(st)
    env = [os.environ.get(k, "") for k in ("CELLBED_TLS_CA", "CELLBED_TLS_CERT", "CELLBED_TLS_KEY")]
    if all(env):
        return Security.mtls(args.cell, TlsFiles(*env))
    return Security.insecure(args.cell)
