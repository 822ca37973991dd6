"""Where a GM's requests go: the transport, and which instance of each LM it asks (the one it
believes active; the next one of the pair after a failure, or the one whose state says it is)."""
from __future__ import annotations

from collections import Counter


class LmLinks:
    """The GM's links to its LMs (and to the other GMs, for a forwarded submit).

    ``transport`` is read at every request, so a transport replaced on the GM (a test wrapping it
    to lose replies) takes effect at the next request."""

    def __init__(self, transport, lms: dict[str, list[str]], counters: Counter, timeout_s: float) -> None:
        self.transport = transport
        self.order = list(lms)                                 # the LMs, in configuration order
        self._instances = {lm: list(inst) for lm, inst in lms.items()}
        self._active = {lm: 0 for lm in lms}
        self._counters = counters
        self._timeout_s = timeout_s

    def target(self, lm: str) -> str:
        """The instance of *lm* to ask now."""
        inst = self._instances[lm]
        return inst[self._active[lm] % len(inst)]

    def tries(self, lm: str) -> int:
        """How many instances *lm* has (a request is tried on each once)."""
        return len(self._instances[lm])

    def resolve(self, lm: str, instance: str) -> str:
        """*instance* if it is one of *lm*'s, else the instance to ask now."""
        return instance if instance in self._instances[lm] else self.target(lm)

    def failover(self, lm: str) -> None:
        """*lm*'s current instance did not answer: ask the other one of the pair next."""
        if len(self._instances[lm]) > 1:
            self._active[lm] = (self._active[lm] + 1) % len(self._instances[lm])
            self._counters["lm_failovers"] += 1

    def note_active(self, lm: str, instance: str) -> None:
        """A state of *lm* came from *instance*: it is the one to ask."""
        if instance in self._instances[lm]:
            self._active[lm] = self._instances[lm].index(instance)

    async def request(self, target: str, method: str, msg):
        """*method* on instance *target*, with the GM's request timeout."""
        return await self.transport.request(target, method, msg, timeout=self._timeout_s)

    async def ask(self, lm: str, method: str, msg):
        """*method* on *lm*'s current instance, with the GM's request timeout."""
        return await self.transport.request(self.target(lm), method, msg, timeout=self._timeout_s)

    async def forward(self, gm: str, method: str, msg, timeout: float):
        """*method* on another GM (a submit for a queue that GM serves)."""
        return await self.transport.request(gm, method, msg, timeout=timeout)

    def subscribe(self, topic: str, handler, msg_type) -> None:
        self.transport.subscribe(topic, handler, msg_type)
