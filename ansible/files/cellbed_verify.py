#!/usr/bin/env python3
"""verify.yml's probe, run on a cell host with Cellbed's venv Python.

    cellbed_verify.py health NAME=ADDR:PORT ...
        gRPC health of cellbed.v1.NodeAgent on every node; exit 1 unless all are SERVING.
    cellbed_verify.py migrate --src NAME=ADDR:PORT --dst NAME [--vm NAME] [--mem-mib 128]
        start a guest on the source, wait for its heartbeat, live-migrate it to the destination
        (MigrateVm), stop it, and print the MigrationRecord; exit 1 unless it SUCCEEDED.
Prints one JSON object on stdout.

With $CELLBED_TLS_CA, $CELLBED_TLS_CERT and $CELLBED_TLS_KEY (the cell's admin certificate, as
cellctl takes it) every call is mutual TLS; without them, plaintext (an insecure cell). `health`
also says which daemons run insecure (their health service cellbed.insecure is SERVING).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import grpc
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.runtime.authz import INSECURE_HEALTH_SERVICE, Security
from cellbed.runtime.client import NodeClient
from cellbed.runtime.pki import TlsFiles
from cellbed.v1 import node_pb2 as npb

SERVICE = "cellbed.v1.NodeAgent"
TLS_ENV = ("CELLBED_TLS_CA", "CELLBED_TLS_CERT", "CELLBED_TLS_KEY")


def security() -> Security:
    """The admin's mTLS identity from the environment, or plaintext when none is given."""
    files = [os.environ.get(k, "") for k in TLS_ENV]
    if any(files) and not all(files):
        raise SystemExit(f"give all of {', '.join(TLS_ENV)} or none")
    return Security.mtls("", TlsFiles(*files)) if all(files) else Security.insecure("")


def parse_target(s: str) -> tuple[str, str]:
    name, sep, target = s.partition("=")
    if not sep or ":" not in target:
        raise SystemExit(f"expected NAME=ADDR:PORT, got {s!r}")
    return name, target


async def _status(stub, service: str) -> str:
    try:
        r = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    except grpc.aio.AioRpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return "NOT_FOUND"
        raise
    return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)


async def health(targets: list[str]) -> int:
    out, insecure, sec = {}, [], security()
    for name, target in map(parse_target, targets):
        try:
            async with sec.channel(target) as ch:
                stub = health_pb2_grpc.HealthStub(ch)
                out[name] = await _status(stub, SERVICE)
                if await _status(stub, INSECURE_HEALTH_SERVICE) == "SERVING":
                    insecure.append(name)
        except grpc.aio.AioRpcError as e:
            out[name] = f"UNREACHABLE ({e.code().name}: {e.details()})"
    print(json.dumps({"health": out, "insecure": insecure}))
    return 0 if all(v == "SERVING" for v in out.values()) else 1


async def migrate(src: str, dst: str, vm: str, mem_mib: int, timeout_s: float, peers: str) -> int:
    src_name, src_target = parse_target(src)
    async with NodeClient(src_target, src_name, security()) as c:
        w = npb.Workload(cpu_load=0.1, wss_mib=min(32, mem_mib - 80), dirty_mib_s=4)
        t0 = time.monotonic()
        await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=vm, mem_mib=mem_mib, vcpus=1, workload=w)),
                     timeout=timeout_s)
        try:
            deadline = time.monotonic() + timeout_s
            while True:   # the guest's heartbeat proves its workload runs before we move it
                vms = {v.spec.name: v for v in (await c.call("ListVms", npb.ListVmsRequest())).vms}
                if vms.get(vm) and vms[vm].heartbeat > 0:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"{vm} on {src_name}: no heartbeat after {timeout_s:.0f} s")
                await asyncio.sleep(0.2)   # polling interval
            boot_s = time.monotonic() - t0
            rec = (await c.call("MigrateVm", npb.MigrateVmRequest(name=vm, dest_host=dst), timeout=timeout_s)).record
        finally:
            await stop_anywhere(c, vm, dst, peers)
    record = json_format.MessageToDict(rec, preserving_proto_field_name=True,
                                       always_print_fields_with_no_presence=True)
    record["outcome"] = npb.MigrationOutcome.Name(rec.outcome)
    print(json.dumps({"boot_to_heartbeat_s": round(boot_s, 2), "record": record}))
    return 0 if rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED else 1


async def stop_anywhere(src: NodeClient, vm: str, dst: str, peers_file: str) -> None:
    """Stop the test guest wherever it ended up (the source asks its peer when it moved)."""
    vms = {v.spec.name for v in (await src.call("ListVms", npb.ListVmsRequest())).vms}
    if vm in vms:
        await src.call("StopVm", npb.StopVmRequest(name=vm), timeout=60)
        return
    with open(peers_file) as f:
        d = json.load(f)["hosts"].get(dst)
    if d:
        async with NodeClient(f"{d['address']}:{d['grpc_port']}", dst, security()) as c:
            if vm in {v.spec.name for v in (await c.call("ListVms", npb.ListVmsRequest())).vms}:
                await c.call("StopVm", npb.StopVmRequest(name=vm), timeout=60)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("health")
    p.add_argument("targets", nargs="+")
    p = sub.add_parser("migrate")
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--vm", default="verify-vm")
    p.add_argument("--mem-mib", type=int, default=128)
    p.add_argument("--timeout-s", type=float, default=300)
    p.add_argument("--peers", default="/etc/cellbed/peers.json", help="to find the destination afterwards")
    a = ap.parse_args(argv)
    if a.cmd == "health":
        return asyncio.run(health(a.targets))
    return asyncio.run(migrate(a.src, a.dst, a.vm, a.mem_mib, a.timeout_s, a.peers))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
