"""cellctl commands for MASB: `broker cache` (what a broker believes) and `san` (active and
recent negotiations on each host)."""
from __future__ import annotations

import asyncio
import time

from cellbed.cli import common
from cellbed.domain import errors
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import masb_pb2 as masbpb


def _transport(args) -> GrpcTransport:
    return GrpcTransport(lambda n: n, RealClock(), security=common.security_for(args))


async def cmd_broker_cache(args) -> None:
    target = args.broker
    if not target:
        target = common.Cell(args).state.get("broker", "")
        if not target:
            raise errors.NotFound(f"cell {args.cell} runs no broker (start it with `cellctl cell up --san`), "
                                  "or give --broker HOST:PORT")
    t = _transport(args)
    try:
        r = await t.request(target, "BrokerAgent/ListCache", masbpb.ListCacheRequest(), timeout=10)
    finally:
        await t.close()
    rows = [{"node": e.report.host, "age_s": f"{e.age_s:.1f}",
             "cpu_cap": f"{e.report.capacity.cpu_cores:.2f}", "mem_cap": f"{e.report.capacity.mem_mib:.0f}",
             "cpu_used": f"{e.report.used.cpu_cores:.2f}", "mem_used": f"{e.report.used.mem_mib:.0f}",
             "cpu_req": f"{e.report.requested.cpu_cores:.2f}", "tasks": e.report.task_count,
             "class": common.ASR_NAMES.get(e.report.asr_class, "?")} for e in r.entries]
    text = (f"broker {r.broker}: {len(r.entries)} node(s), expiry {r.node_expiry_s:g} s\n"
            + common.table(rows, ["node", "age_s", "cpu_cap", "mem_cap", "cpu_used", "mem_used", "cpu_req", "tasks", "class"])
            + "\ncounters: " + ", ".join(f"{k}={v}" for k, v in sorted(r.counters.items())))
    common.emit(args, common.msg_dict(r), text)


async def cmd_san(args) -> None:
    c = common.Cell(args)
    t = _transport(args)

    async def one(h):
        hs = c.hosts[h]
        try:
            return await t.request(f"{hs['address']}:{hs['grpc_port']}", "San/ListNegotiations",
                                   masbpb.ListNegotiationsRequest(limit=args.limit), timeout=10)
        except errors.CellbedError as e:
            return e
    try:
        res = await asyncio.gather(*(one(h) for h in c.hosts))
    finally:
        await t.close()
    data, lines = [], []
    for h, r in zip(c.hosts, res):
        if isinstance(r, errors.CellbedError):
            lines.append(f"{h}: {r}")
            data.append({"host": h, "error": str(r)})
            continue
        data.append(common.msg_dict(r))
        rows = [{"san_id": n.san_id, "vm": n.vm, "state": n.state, "target": n.target,
                 "started": time.strftime("%H:%M:%S", time.localtime(n.started_unix_s)),
                 "steps": " > ".join(s.kind for s in n.steps)} for n in r.negotiations]
        lines.append(f"{h}: " + ", ".join(f"{k}={v}" for k, v in sorted(r.counters.items())))
        lines.append(common.table(rows, ["san_id", "vm", "state", "target", "started", "steps"]))
    common.emit(args, data, "\n".join(lines))
