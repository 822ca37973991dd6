"""Transport security for every gRPC server and client: mutual TLS with the cell's CA, and the
authorisation table (cellbed/domain/identity.py) enforced on every call by a server interceptor.

``Security.mtls(cell, files)`` is the default everywhere; ``Security.insecure(cell)`` is plaintext,
only by explicit choice (``insecure = true`` in a config, ``cell up --insecure``), and then loud:
a warning at startup and the health service ``cellbed.insecure`` reported SERVING, so that
``grpc_health_probe -service cellbed.insecure`` (or ``cellctl cell status``) shows it.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from typing import Any, Awaitable, Callable

import aiomqtt
import grpc

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.domain.identity import Identity, authorize
from cellbed.runtime.tlsfiles import TlsFiles

log = logging.getLogger(__name__)

INSECURE_HEALTH_SERVICE = "cellbed.insecure"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024   # a cell's largest honest message (a 12.5k-node cache sync) is far below


@dataclasses.dataclass(frozen=True)
class Security:
    cell: str
    tls: TlsFiles | None     # None: plaintext, chosen explicitly

    @classmethod
    def mtls(cls, cell: str, files: TlsFiles) -> "Security":
        return cls(cell, files)

    @classmethod
    def insecure(cls, cell: str) -> "Security":
        return cls(cell, None)

    @property
    def is_insecure(self) -> bool:
        return self.tls is None

    def channel_options(self) -> list[tuple[str, Any]]:
        return [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]

    def server(self) -> grpc.aio.Server:
        """An asyncio server with the message limits and the boundary interceptor (undecodable
        requests refused; under mTLS, the authorisation table enforced)."""
        return grpc.aio.server(interceptors=[Boundary(self.cell, authorize=not self.is_insecure)],
                               options=self.channel_options())

    def add_port(self, server: grpc.aio.Server, address: str) -> int:
        if self.tls is None:
            log.warning("gRPC on %s is PLAINTEXT and unauthenticated (insecure = true): anyone who reaches it "
                        "can start, stop and migrate VMs", address)
            return server.add_insecure_port(address)
        ca, cert, key = self.tls.read()
        creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
        return server.add_secure_port(address, creds)

    def channel(self, target: str) -> grpc.aio.Channel:
        if self.tls is None:
            return grpc.aio.insecure_channel(target, options=self.channel_options())
        ca, cert, key = self.tls.read()
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        return grpc.aio.secure_channel(target, creds, options=self.channel_options())

    def sync_channel(self, target: str) -> grpc.Channel:
        if self.tls is None:
            return grpc.insecure_channel(target, options=self.channel_options())
        ca, cert, key = self.tls.read()
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        return grpc.secure_channel(target, creds, options=self.channel_options())


def security_from(cell: str, tls_ca: str, tls_cert: str, tls_key: str, insecure: bool, where: str) -> Security:
    """An agent's Security from its config: mTLS with the three files, or plaintext only when the
    config says ``insecure = true``. Anything else is refused, naming the keys (never a silent
    fallback to plaintext)."""
    if insecure:
        return Security.insecure(cell)
    missing = [k for k, v in (("tls_ca", tls_ca), ("tls_cert", tls_cert), ("tls_key", tls_key)) if not v]
    if missing:
        raise FailedPrecondition(f"{where}: {', '.join(missing)} not set: give the cell CA's certificate and this "
                                 "agent's certificate and key, or insecure = true for plaintext (isolated boxes only)")
    files = TlsFiles(tls_ca, tls_cert, tls_key)
    files.read()      # unreadable files fail now, naming the file, not at the first call
    return Security.mtls(cell, files)


def mqtt_tls(security: Security) -> "aiomqtt.TLSParameters | None":
    """aiomqtt's TLS parameters for this identity (None: plaintext)."""
    if security.tls is None:
        return None
    return aiomqtt.TLSParameters(ca_certs=security.tls.ca, certfile=security.tls.cert, keyfile=security.tls.key)


def peer_identity(context: grpc.aio.ServicerContext) -> Identity | None:
    """The caller's identity: the cellbed:// URI of its certificate, which gRPC verified against
    the cell's CA and hands over as ``peer_uri`` (None on a plaintext connection)."""
    for uri in (context.auth_context() or {}).get("peer_uri") or []:
        who = _identity(uri)
        if who is not None:
            return who
    return None


@functools.lru_cache(maxsize=1024)
def _identity(uri: bytes) -> Identity | None:
    try:
        return Identity.from_uri(uri.decode("ascii", "replace"))
    except InvalidArgument:
        return None


@dataclasses.dataclass(frozen=True)
class Undecodable:
    """What a request's deserializer yields for bytes that are not a valid message: the handler
    answers INVALID_ARGUMENT instead of gRPC's UNKNOWN, and the servicer never sees it."""

    type_name: str
    error: str

    def text(self) -> str:
        return f"request: not a valid {self.type_name} message ({self.error[:200]})"


def _safe(deserialize):
    if deserialize is None:
        return None
    owner = getattr(deserialize, "__self__", None)
    type_name = getattr(owner, "__name__", "protobuf")

    def d(data: bytes):
        try:
            return deserialize(data)
        except Exception as e:   # DecodeError, or invalid UTF-8 in a string field
            return Undecodable(type_name, f"{type(e).__name__}: {e}")
    return d


class Boundary(grpc.aio.ServerInterceptor):
    """Every call's first checks, before its servicer: a request that does not decode is
    INVALID_ARGUMENT; and, with *authorize*, the caller must be allowed by the authorisation table
    (a refusal is PERMISSION_DENIED naming the role that is needed). The handler is wrapped,
    because the caller's certificate is known only in the call's context."""

    def __init__(self, cell: str, authorize: bool = True) -> None:
        self.cell = cell
        self.enforce = authorize
        self.denied = self.undecodable = 0
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(self, continuation: Callable[..., Awaitable[grpc.RpcMethodHandler]],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        cached = self._wrapped.get(details.method)
        if cached is not None and cached[0] is handler:     # one wrapper per method, not per call
            return cached[1]
        wrapped = self._wrap(details.method, handler)
        self._wrapped[details.method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:

        async def check(context, request=None) -> None:
            if self.enforce:
                d = authorize(method, peer_identity(context), self.cell)
                if not d.allowed:
                    self.denied += 1
                    log.info("denied %s", d.reason)
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, d.reason)
            if isinstance(request, Undecodable):
                self.undecodable += 1
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text())

        async def checked(requests, context):
            async for r in _aiter(requests):
                await check(context, r)
                yield r

        des, ser = _safe(handler.request_deserializer), handler.response_serializer
        if handler.unary_unary:
            async def uu(request, context):
                await check(context, request)
                return await handler.unary_unary(request, context)
            return grpc.unary_unary_rpc_method_handler(uu, des, ser)
        if handler.unary_stream:
            async def us(request, context):
                await check(context, request)
                async for r in _aiter(handler.unary_stream(request, context)):
                    yield r
            return grpc.unary_stream_rpc_method_handler(us, des, ser)
        if handler.stream_unary:
            async def su(requests, context):
                await check(context)
                return await handler.stream_unary(checked(requests, context), context)
            return grpc.stream_unary_rpc_method_handler(su, des, ser)

        async def ss(requests, context):
            await check(context)
            async for r in _aiter(handler.stream_stream(checked(requests, context), context)):
                yield r
        return grpc.stream_stream_rpc_method_handler(ss, des, ser)


async def _aiter(res):
    """A streaming handler's result: an async generator, a coroutine that writes with
    context.write(), or (sync servicers) a plain iterator."""
    if asyncio.iscoroutine(res):
        await res
        return
    if hasattr(res, "__aiter__"):
        async for r in res:
            yield r
    else:
        for r in res:
            yield r
