"""Asynchronous telemetry over MQTT (aiomqtt): node state reports and the event stream.

Publishing never blocks the agent: messages go through a bounded queue and are dropped
(and counted) when the broker is slow or away; the publisher reconnects with backoff.
"""
from __future__ import annotations

import asyncio
import json
import logging

import aiomqtt
from google.protobuf import json_format

log = logging.getLogger(__name__)


class MqttPublisher:
    def __init__(self, host: str, port: int, prefix: str, clock, queue_size: int = 256,
                 tls_params: aiomqtt.TLSParameters | None = None) -> None:
        self.host, self.port, self.prefix, self.clock = host, port, prefix, clock
        self.tls_params = tls_params      # the node's certificate: the broker's ACL is per identity
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=queue_size)
        self.dropped = 0
        self.published = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="mqtt")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _put(self, topic: str, payload: str, retain: bool = False) -> None:
        try:
            self.queue.put_nowait((topic, payload, retain))
        except asyncio.QueueFull:
            self.dropped += 1

    def publish_state(self, state) -> None:
        self._put(f"{self.prefix}/state", json.dumps(json_format.MessageToDict(state)), retain=True)

    def publish_event(self, ev) -> None:
        self._put(f"{self.prefix}/events", json.dumps(json_format.MessageToDict(ev)))

    async def _run(self) -> None:
        backoff = 0.5
        while True:
            try:
                async with aiomqtt.Client(self.host, self.port, timeout=5, tls_params=self.tls_params) as client:
                    backoff = 0.5
                    while True:
                        topic, payload, retain = await self.queue.get()
                        await client.publish(topic, payload, qos=0, retain=retain)
                        self.published += 1
            except aiomqtt.MqttError as e:
                log.debug("MQTT %s:%d: %s; retry in %.1f s", self.host, self.port, e, backoff)
                await self.clock.sleep(backoff)
                backoff = min(10.0, backoff * 2)
