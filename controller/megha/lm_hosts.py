"""The LM's side of a cell that changes under it (a trace replayed on a model cell): a host's
capacity or attributes change, a host leaves (capacity 0) or comes back, and a running task's
request changes. The cluster state follows at once and a full state goes to the GMs, whose
views fetch the hosts again (the hosts digest changed)."""
from __future__ import annotations

from cellbed.domain import errors
from cellbed.domain.constraints import AttrValue


class HostsMixin:
    """Part of LocalMaster (which owns the state these methods use)."""

    def update_host(self, host: str, cpu: float | None = None, mem: float | None = None,
                    attributes: dict[str, AttrValue] | None = None) -> list[str]:
        """Host *host* now has capacity (cpu cores, mem MiB) and *attributes* (None: unchanged).
        Returns the tasks on it that no longer fit, newest first: the caller stops them (they
        hold their resources until then)."""
        if self.cluster is None:
            raise errors.FailedPrecondition(f"LM {self.lm} instance {self.instance} has no cluster state yet")
        h = self.cluster.index.get(host)
        if h is None:
            raise errors.NotFound(f"host={host!r} is not in LM {self.lm}'s cluster")
        over = self.cluster.set_host(h, cpu, mem, attributes)
        self.counters["host_updates"] += 1
        self.publish_state()
        return over

    def resize_task(self, name: str, cpu: float, mem: float) -> bool:
        """Task *name*'s request becomes (cpu cores, mem MiB) on its host, if the host has the
        room (True); False, and nothing changes, if not. NotFound if the task is not here."""
        if self.cluster is None or name not in self.cluster.tasks:
            raise errors.NotFound(f"task {name!r} is not on LM {self.lm}")
        if not self.cluster.resize(name, cpu, mem):
            self.counters["resize_refused"] += 1
            return False
        self._dirty.add(name)
        self.counters["resized"] += 1
        return True

    def tasks_on(self, host: str) -> list[str]:
        """The tasks on *host* (its node and the loans out of it)."""
        h = self.cluster.index.get(host) if self.cluster is not None else None
        return [] if h is None else list(self.cluster.on_host[h])
