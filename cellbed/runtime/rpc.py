"""gRPC plumbing shared by every server and client: server creation with health and
reflection, error mapping, and deadlines."""
from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import signal
from typing import Awaitable, Callable, Iterable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cellbed.domain import errors
from cellbed.runtime import reflection
from cellbed.runtime.authz import INSECURE_HEALTH_SERVICE, Security
from cellbed.runtime.status import error_for, status_for

log = logging.getLogger(__name__)

# Every client call carries a deadline; these are the defaults, seconds.
DEFAULT_DEADLINE_S = 10.0


def create_server(address: str, services: Iterable[tuple[Callable, object, str]], *,
                  security: Security | None = None) -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    """Create an asyncio server on *address* ("host:0" picks a free port).

    *services* are (add_XServicer_to_server, servicer, full service name). Health
    (grpc.health.v1) and reflection (grpc.reflection.v1 and v1alpha) are registered for every one of them.
    *security*: mutual TLS with the cell's CA and the authorisation table
    (cellbed/runtime/authz.py), or plaintext by explicit choice, which also reports the health
    service ``cellbed.insecure`` as SERVING.
    Returns (server, bound port, health servicer); the caller starts the server.
    """
    security = security if security is not None else Security.insecure("")
    server = security.server()
    names = []
    for add, servicer, name in services:
        add(servicer, server)
        names.append(name)
    hs = CellHealth(insecure=security.is_insecure)
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    names.append(health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
    reflection.enable(server, names)
    port = security.add_port(server, address)
    if port == 0:
        raise errors.Unavailable(f"cannot bind gRPC server on {address}")
    return server, port, hs


class CellHealth(health.aio.HealthServicer):
    """grpc.health.v1, and whether the server is plaintext: set_serving then also reports the
    service ``cellbed.insecure`` as SERVING, so that a prober sees it at once."""

    def __init__(self, insecure: bool) -> None:
        super().__init__()
        self.insecure = insecure


async def set_serving(hs: health.aio.HealthServicer, names: Iterable[str]) -> None:
    for n in ["", *names]:
        await hs.set(n, health_pb2.HealthCheckResponse.SERVING)
    if getattr(hs, "insecure", False):
        await hs.set(INSECURE_HEALTH_SERVICE, health_pb2.HealthCheckResponse.SERVING)


async def set_not_serving(hs: health.aio.HealthServicer, names: Iterable[str]) -> None:
    for n in ["", *names]:
        await hs.set(n, health_pb2.HealthCheckResponse.NOT_SERVING)


def from_rpc_error(exc: grpc.aio.AioRpcError, what: str) -> errors.CellbedError:
    """Map a client-side RPC error back onto the project's hierarchy."""
    return error_for(exc.code(), f"{what}: {exc.details()}")


async def wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT: the daemons' main loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def daemon_main(prog: str, doc: str, serve: Callable, load: Callable, argv: list[str] | None = None) -> None:
    """The command line every Cellbed daemon shares: --config TOML, --log-level."""
    ap = argparse.ArgumentParser(prog=prog, description=doc)
    ap.add_argument("--config", required=True, help="TOML config")
    ap.add_argument("--log-level", default=os.environ.get("CELLBED_LOG", "INFO"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(load(args.config)))


def handles_errors(method: Callable[..., Awaitable]) -> Callable[..., Awaitable]:
    """Decorator for servicer methods: turn project errors into a gRPC status with details."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        try:
            return await method(self, request, context)
        except (errors.CellbedError, grpc.aio.AioRpcError) as exc:
            code, msg = status_for(exc)
            log.info("%s -> %s: %s", method.__name__, code.name, msg)
            await context.abort(code, msg)
        except Exception as exc:  # a bug: log with traceback, answer INTERNAL
            log.exception("%s failed", method.__name__)
            code, msg = status_for(exc)
            await context.abort(code, msg)

    return wrapper
