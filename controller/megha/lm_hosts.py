"""The LM's side of a cell that changes under it (a trace replayed on a model cell): a host's
capacity or attributes change, a host leaves (capacity 0) or comes back, and a running task's
request changes. The cluster state follows at once and a full state goes to the GMs, whose
views fetch the hosts again (the hosts digest changed)."""
from __future__ import annotations

from collections import Counter

from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_publish import Publisher
from cellbed.controller.megha.lm_replicate import Replicator
from cellbed.domain import errors
from cellbed.domain.constraints import AttrValue


class HostChanges:
    def __init__(self, core: LmCore, repl: Replicator, publisher: Publisher, counters: Counter) -> None:
        self._core = core
        self._repl = repl
        self._publisher = publisher
        self._counters = counters

    def update_host(self, host: str, cpu: float | None = None, mem: float | None = None,
                    attributes: dict[str, AttrValue] | None = None) -> list[str]:
        """Host *host* now has capacity (cpu cores, mem MiB) and *attributes* (None: unchanged).
        Returns the tasks on it that no longer fit, newest first: the caller stops them (they
        hold their resources until then)."""
        core = self._core
        if core.cluster is None:
            raise errors.FailedPrecondition(f"LM {core.lm} instance {core.instance} has no cluster state yet")
        h = core.cluster.index.get(host)
        if h is None:
            raise errors.NotFound(f"host={host!r} is not in LM {core.lm}'s cluster")
        over = core.cluster.set_host(h, cpu, mem, attributes)
        self._counters["host_updates"] += 1
        self._publisher.publish_state()
        return over

    def resize_task(self, name: str, cpu: float, mem: float) -> bool:
        """Task *name*'s request becomes (cpu cores, mem MiB) on its host, if the host has the
        room (True); False, and nothing changes, if not. NotFound if the task is not here."""
        c = self._core.cluster
        if c is None or name not in c.tasks:
            raise errors.NotFound(f"task {name!r} is not on LM {self._core.lm}")
        if not c.resize(name, cpu, mem):
            self._counters["resize_refused"] += 1
            return False
        self._repl.changed(name)
        self._counters["resized"] += 1
        return True

    def tasks_on(self, host: str) -> list[str]:
        """The tasks on *host* (its node and the loans out of it)."""
        c = self._core.cluster
        h = c.index.get(host) if c is not None else None
        return [] if h is None else list(c.on_host[h])
