#!/usr/bin/env python3
"""gRPC unary latency with mTLS (the cell CA, the authorisation interceptor) vs plaintext
(issue 13): the same servicer (a NodeAgent on the model backend, GetHostState) on two port-0
servers in this process, called in interleaved rounds so that both see the same machine load.

    .venv/bin/python scripts/bench_grpc_tls.py [--calls 2000] [--rounds 5]

Prints p50/p99 per mode (medians over rounds) and the ratios. No assertion: the figures go in
the closing note and docs/results/security.md.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cellbed import assembly  # noqa: E402
from cellbed.domain.identity import Identity, Role  # noqa: E402
from cellbed.runtime import rpc  # noqa: E402
from cellbed.runtime.authz import Security  # noqa: E402
from cellbed.runtime.clock import RealClock  # noqa: E402
from cellbed.runtime.pki import CellCA  # noqa: E402
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg  # noqa: E402

SERVICE = "cellbed.v1.NodeAgent"


async def serve(servicer, security: Security):
    srv, port, health = rpc.create_server("127.0.0.1:0", [(npbg.add_NodeAgentServicer_to_server,
                                                           servicer, SERVICE)], security=security)
    await srv.start()
    return srv, f"127.0.0.1:{port}"


async def timed_calls(target: str, security: Security, n: int) -> list[float]:
    async with security.channel(target) as ch:
        stub = npbg.NodeAgentStub(ch)
        await stub.GetHostState(npb.GetHostStateRequest(), timeout=10)      # connect + handshake first
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await stub.GetHostState(npb.GetHostStateRequest(), timeout=10)
            out.append((time.perf_counter() - t0) * 1e3)
        return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def main(calls: int, rounds: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="cellbed-bench-tls-"))
    ca = CellCA.create(tmp / "pki", "bench")
    server_files = ca.issue(Identity("bench", Role.NODE, "h1"), ["127.0.0.1"])
    admin_files = ca.issue(Identity("bench", Role.ADMIN, "admin"))
    env = assembly.model_env(0, clock=RealClock())
    host = await assembly.model_host(env, assembly.model_config("h1", 4.0, 4096))
    tls_srv, tls_target = await serve(host.servicer, Security.mtls("bench", server_files))
    plain_srv, plain_target = await serve(host.servicer, Security.insecure("bench"))
    res = {"mtls": {"p50": [], "p99": []}, "plaintext": {"p50": [], "p99": []}}
    try:
        for r in range(rounds):
            order = [("mtls", tls_target, Security.mtls("bench", admin_files)),
                     ("plaintext", plain_target, Security.insecure("bench"))]
            for mode, target, sec in (order if r % 2 == 0 else order[::-1]):
                xs = await timed_calls(target, sec, calls)
                res[mode]["p50"].append(pct(xs, 50))
                res[mode]["p99"].append(pct(xs, 99))
    finally:
        await tls_srv.stop(None)
        await plain_srv.stop(None)
        await host.agent.stop()
    print(f"gRPC unary GetHostState, {calls} calls x {rounds} rounds (interleaved), 127.0.0.1:")
    for mode in ("plaintext", "mtls"):
        print(f"  {mode:9s}  p50 {statistics.median(res[mode]['p50']):.3f} ms  "
              f"p99 {statistics.median(res[mode]['p99']):.3f} ms")
    for q in ("p50", "p99"):
        ratios = [a / b for a, b in zip(res["mtls"][q], res["plaintext"][q])]
        print(f"  mTLS / plaintext {q}: median ratio {statistics.median(ratios):.2f} "
              f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    asyncio.run(main(a.calls, a.rounds))
