"""The real-cell transport: request/reply over gRPC, publish/subscribe over MQTT (aiomqtt).

Requests use generic unary calls (``/cellbed.v1.<Service>/<Method>``); the reply type is
looked up in the protobuf descriptor pool, so any service generated from ``proto/`` works
without per-service client code. Every call has a deadline. Publishing never blocks: a
bounded queue, drops counted; subscriptions are re-established after a reconnect.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

import aiomqtt
import grpc
from google.protobuf import descriptor_pool, message_factory

from cellbed.domain import errors
from cellbed.runtime.authz import Security, mqtt_tls
from cellbed.runtime.status import error_for
from cellbed.runtime.transport import Subscriber, topic_matches

log = logging.getLogger(__name__)

PACKAGE = "cellbed.v1"


def reply_type(method: str) -> type:
    service, _, rpc = method.partition("/")
    try:
        svc = descriptor_pool.Default().FindServiceByName(f"{PACKAGE}.{service}")
        desc = svc.methods_by_name[rpc]
    except KeyError:
        raise errors.InvalidArgument(f"unknown method {method!r}") from None
    return message_factory.GetMessageClass(desc.output_type)


class GrpcTransport:
    def __init__(self, resolve: Callable[[str], str], clock, mqtt_host: str = "", mqtt_port: int = 1883,
                 name: str = "", queue_size: int = 1024, security: Security | None = None) -> None:
        """*security*: this agent's mTLS identity for gRPC and MQTT (cellbed/runtime/authz.py);
        None is plaintext, for tests and `insecure` cells only."""
        self.resolve = resolve
        self.security = security if security is not None else Security.insecure("")
        self.clock = clock
        self.name = name
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._calls: dict[tuple[str, str], Any] = {}
        self.mqtt_host, self.mqtt_port = mqtt_host, mqtt_port
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=queue_size)
        self._subs: list[tuple[str, Subscriber, type]] = []
        self._mqtt_task: asyncio.Task | None = None
        self._resub = asyncio.Event()
        self.dropped = self.published = self.received = 0

    # --- request/reply ---------------------------------------------------------------
    def _call(self, target: str, method: str):
        addr = target if ":" in target else self.resolve(target)
        key = (addr, method)
        c = self._calls.get(key)
        if c is None:
            ch = self._channels.get(addr)
            if ch is None:
                ch = self._channels[addr] = self.security.channel(addr)
            rt = reply_type(method)
            c = self._calls[key] = ch.unary_unary(f"/{PACKAGE}.{method}",
                                                  request_serializer=lambda m: m.SerializeToString(),
                                                  response_deserializer=rt.FromString)
        return c

    async def request(self, target: str, method: str, msg: Any, timeout: float = 10.0) -> Any:
        call = self._call(target, method)
        try:
            return await call(msg, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise error_for(e.code(), f"{target} {method}: {e.details()}") from e

    # --- pub/sub ----------------------------------------------------------------------
    def publish(self, topic: str, msg: Any) -> None:
        if not self.mqtt_host:
            return
        self._ensure_mqtt()
        try:
            self._queue.put_nowait((topic, msg.SerializeToString()))
        except asyncio.QueueFull:
            self.dropped += 1

    def subscribe(self, topic: str, fn: Subscriber, msg_type: type) -> None:
        if not self.mqtt_host:
            raise errors.FailedPrecondition(f"subscribe {topic}: no MQTT broker configured (mqtt_host)")
        self._subs.append((topic, fn, msg_type))
        self._resub.set()
        self._ensure_mqtt()

    def _ensure_mqtt(self) -> None:
        if self._mqtt_task is None:
            self._mqtt_task = asyncio.create_task(self._mqtt(), name="mqtt-transport")

    async def _mqtt(self) -> None:
        backoff = 0.5
        while True:
            try:
                async with aiomqtt.Client(self.mqtt_host, self.mqtt_port, timeout=5,
                                          identifier=f"cellbed-{self.name}-{id(self):x}" if self.name else None,
                                          tls_params=mqtt_tls(self.security)) as client:
                    backoff = 0.5
                    subscribed: set[str] = set()

                    async def pump_out():
                        while True:
                            topic, payload = await self._queue.get()
                            await client.publish(topic, payload, qos=0)
                            self.published += 1

                    async def pump_in():
                        async for m in client.messages:
                            t = str(m.topic)
                            for pat, fn, mt in list(self._subs):
                                if topic_matches(pat, t):
                                    try:
                                        fn(t, mt.FromString(m.payload))
                                        self.received += 1
                                    except Exception:
                                        log.exception("subscriber of %s failed on %s", pat, t)

                    async def resubscribe():
                        while True:
                            for pat, _, _ in list(self._subs):
                                if pat not in subscribed:
                                    await client.subscribe(pat, qos=0)
                                    subscribed.add(pat)
                            self._resub.clear()
                            await self._resub.wait()

                    await asyncio.gather(pump_out(), pump_in(), resubscribe())
            except aiomqtt.MqttError as e:
                log.debug("MQTT %s:%d: %s; retry in %.1f s", self.mqtt_host, self.mqtt_port, e, backoff)
                await self.clock.sleep(backoff)
                backoff = min(10.0, backoff * 2)

    async def close(self) -> None:
        if self._mqtt_task is not None:
            self._mqtt_task.cancel()
            await asyncio.gather(self._mqtt_task, return_exceptions=True)
            self._mqtt_task = None
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()
        self._calls.clear()
