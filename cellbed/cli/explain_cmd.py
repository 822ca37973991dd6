"""``cellctl explain RESULTS ID``: one explained decision of a results folder (decisions.jsonl);
``cellctl san explain ID``: the same for a SAN round of a live cell, from the node that ran it."""
from __future__ import annotations

import argparse
import json

from cellbed.cli.common import Cell, emit
from cellbed.domain import errors
from cellbed.experiment.report.explain import find, text
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import masb_pb2 as masbpb


def cmd_explain(args: argparse.Namespace) -> None:
    d = find(args.results, args.id)
    emit(args, d, text(d))


async def cmd_san_explain(args: argparse.Namespace) -> None:
    cell = Cell(args)
    if args.host and args.host not in cell.hosts:
        raise errors.NotFound(f"host {args.host!r} is not in cell {cell.name}; hosts: {', '.join(cell.hosts)}")
    hosts = [args.host] if args.host else list(cell.hosts)
    t = GrpcTransport(lambda n: n, RealClock(), security=cell.security)
    try:
        for h in hosts:
            hs = cell.hosts[h]
            try:
                r = await t.request(f"{hs['address']}:{hs['grpc_port']}", "San/Explain",
                                    masbpb.ExplainRequest(id=args.id), timeout=15)
            except errors.NotFound:
                continue
            d = json.loads(r.json)
            emit(args, d, text(d))
            return
    finally:
        await t.close()
    raise errors.NotFound(f"no explained SAN round {args.id!r} on {', '.join(hosts)} (only a sampled share is "
                          f"explained, and a node keeps its last ones: run with --explain all, or look in the run's "
                          f"decisions.jsonl with cellctl explain)")
