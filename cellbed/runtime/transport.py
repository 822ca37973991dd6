"""Request/reply and publish/subscribe, as agents see them (DESIGN §2).

An agent calls::

    reply = await transport.request("h7", "NodeAgent/PrepareIncoming", msg, timeout=5)
    transport.publish("cellbed/c1/masb/report/h7", report)
    transport.subscribe("cellbed/c1/masb/report/+", on_report, pb.NodeReport)

and serves its RPCs with the very servicer classes that gRPC serves (methods
``async def Method(self, request, context)`` decorated with ``rpc.handles_errors``).
Messages are protobuf messages on both transports. Errors come back as the project's
own hierarchy (``cellbed.domain.errors``), whatever carried them.

This module holds the interface and the in-process implementation used by model cells;
the gRPC + MQTT implementation is in ``grpc_transport``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any, Awaitable, Callable, Protocol

import grpc

from cellbed.domain import errors
from cellbed.runtime.status import error_for

Handler = Callable[[Any], Awaitable[Any]]
Subscriber = Callable[[str, Any], None]

class Transport(Protocol):
    async def request(self, target: str, method: str, msg: Any, timeout: float = 10.0) -> Any:
        """Send *msg* to *target*'s ``Service/Method`` and await the reply."""

    def publish(self, topic: str, msg: Any) -> None:
        """Fire and forget; may be dropped (telemetry semantics)."""

    def subscribe(self, topic: str, fn: Subscriber, msg_type: type) -> None:
        """Call ``fn(topic, msg)`` for every message on *topic* (MQTT wildcards + and #)."""


def topic_matches(pattern: str, topic: str) -> bool:
    p, t = pattern.split("/"), topic.split("/")
    for i, seg in enumerate(p):
        if seg == "#":
            return True
        if i >= len(t) or (seg != "+" and seg != t[i]):
            return False
    return len(p) == len(t)


class _InProcContext:
    """What an in-process servicer sees as its context: ``abort`` raises the project error
    that the gRPC client side would have raised for the same status."""

    __slots__ = ("peer_name",)

    def __init__(self, peer_name: str) -> None:
        self.peer_name = peer_name

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise error_for(code, details)

    def peer(self) -> str:
        return self.peer_name


@dataclasses.dataclass
class NetStats:
    requests: int = 0
    failed: int = 0
    published: int = 0
    delivered: int = 0


class InProcNetwork:
    """Every agent of a model cell, in one process. Latency (one way, seconds) is drawn from
    ``latency_s + jitter·U(0,1)`` with the network's own seeded RNG; ``down`` endpoints answer
    UNAVAILABLE, as an unreachable gRPC server would."""

    def __init__(self, clock, latency_s: float = 0.0, jitter_s: float = 0.0, seed: int = 0,
                 copy_messages: bool = False) -> None:
        self.clock = clock
        self.latency_s, self.jitter_s = latency_s, jitter_s
        self.rng = random.Random(seed)
        self.copy_messages = copy_messages
        self._endpoints: dict[str, dict[str, object]] = {}
        self._down: set[str] = set()
        self._exact: dict[str, list[Subscriber]] = {}
        self._wild: list[tuple[str, Subscriber]] = []
        self._targets: dict[str, list[Subscriber]] = {}   # topic -> its subscribers (cleared on subscribe)
        self.stats = NetStats()

    # --- endpoints -----------------------------------------------------------------
    def serve(self, name: str, service: str, servicer: object) -> None:
        self._endpoints.setdefault(name, {})[service] = servicer

    def remove(self, name: str) -> None:
        self._endpoints.pop(name, None)

    def set_down(self, name: str, down: bool = True) -> None:
        (self._down.add if down else self._down.discard)(name)

    def is_down(self, name: str) -> bool:
        return name in self._down

    def transport(self, name: str) -> "InProcTransport":
        return InProcTransport(self, name)

    def _delay(self) -> float:
        if self.jitter_s:
            return self.latency_s + self.jitter_s * self.rng.random()
        return self.latency_s

    async def deliver(self, src: str, target: str, method: str, msg: Any, timeout: float) -> Any:
        self.stats.requests += 1
        service, _, rpc = method.partition("/")
        d = self._delay()
        if d:
            await self.clock.sleep(d)
        if target in self._down or target not in self._endpoints:
            self.stats.failed += 1
            raise errors.Unavailable(f"{target} {method}: endpoint unreachable")
        servicer = self._endpoints[target].get(service)
        fn = getattr(servicer, rpc, None) if servicer is not None else None
        if fn is None:
            self.stats.failed += 1
            raise errors.CellbedError(f"{target} {method}: unimplemented")
        if self.copy_messages:
            msg = type(msg).FromString(msg.SerializeToString())
        try:
            # in the caller's task (asyncio.timeout), not a new one per call (wait_for): a model
            # cell makes millions of these calls
            async with asyncio.timeout(timeout):
                reply = await fn(msg, _InProcContext(src))
        except TimeoutError:
            self.stats.failed += 1
            raise errors.DeadlineExceeded(f"{target} {method}: no reply within {timeout:g} s") from None
        except errors.CellbedError:
            self.stats.failed += 1
            raise
        if d:
            await self.clock.sleep(self._delay())
        return reply

    # --- pub/sub ---------------------------------------------------------------------
    def subscribe(self, topic: str, fn: Subscriber) -> None:
        self._targets.clear()
        if "+" in topic or "#" in topic:
            self._wild.append((topic, fn))
        else:
            self._exact.setdefault(topic, []).append(fn)

    def publish(self, topic: str, msg: Any) -> None:
        self.stats.published += 1
        targets = self._targets.get(topic)
        if targets is None:       # exact subscribers first, then wildcards, each in subscription order
            targets = list(self._exact.get(topic, ()))
            targets += [fn for pat, fn in self._wild if topic_matches(pat, topic)]
            self._targets[topic] = targets
        if not targets:
            return
        loop = asyncio.get_running_loop()
        d = self._delay()
        for fn in targets:
            self.stats.delivered += 1
            if d:
                loop.call_later(d, fn, topic, msg)
            else:
                loop.call_soon(fn, topic, msg)


class InProcTransport:
    """One agent's handle on an InProcNetwork."""

    def __init__(self, net: InProcNetwork, name: str) -> None:
        self.net, self.name = net, name

    async def request(self, target: str, method: str, msg: Any, timeout: float = 10.0) -> Any:
        return await self.net.deliver(self.name, target, method, msg, timeout)

    def publish(self, topic: str, msg: Any) -> None:
        if self.net.is_down(self.name):
            return
        self.net.publish(topic, msg)

    def subscribe(self, topic: str, fn: Subscriber, msg_type: type | None = None) -> None:
        self.net.subscribe(topic, fn)

    async def close(self) -> None:
        return None
