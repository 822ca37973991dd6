"""The spike policy: on a Resource Usage Spike that leaves the host overloaded, pause or kill
non-production VMs (lowest priority, largest CPU first) until use is back within max_util, so
that production can grow at once (SanConfig.spike_policy = pause | kill)."""
from __future__ import annotations

import collections
import logging
from typing import Awaitable, Callable

import numpy as np

from cellbed.daemon.host_view import HostView
from cellbed.daemon.san.ledger import EmitFn, NegotiationLedger
from cellbed.daemon.san.reader import HostReader
from cellbed.domain import errors
from cellbed.domain.vm import DomState
from cellbed.policy.masb import overload
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)

VmOp = Callable[[str], Awaitable[None]]
"""A NodeAgent operation on one VM by name (pause_vm, stop_vm)."""


class SpikeAbsorber:
    """*action*: "pause" or "kill"; *pause_vm*, *stop_vm* and *emit* are the NodeAgent's."""

    def __init__(self, view: HostView, reader: HostReader, ledger: NegotiationLedger, counters: collections.Counter,
                 pause_vm: VmOp, stop_vm: VmOp, emit: EmitFn, *, action: str, max_util: float) -> None:
        self.view = view
        self.reader = reader
        self.ledger = ledger
        self.counters = counters
        self.pause_vm = pause_vm
        self.stop_vm = stop_vm
        self.emit = emit
        self.action = action
        self.max_util = max_util

    async def absorb(self, spike: str, verdict: overload.Verdict) -> None:
        cap = np.asarray(self.reader.capacity())
        limit = self.max_util * cap
        used = np.asarray(self.view.used())
        victims = sorted((e for n, e in self.view.vms.items() if not e.spec.production and not e.migrating_out
                          and e.state is DomState.RUNNING and not self.ledger.is_active(n)),
                         key=lambda e: (e.spec.priority, -e.cpu_used_cores))
        for e in victims:
            if np.all(used <= limit):
                break
            name = e.spec.name
            try:
                if self.action == "pause":
                    await self.pause_vm(name)
                    used = used - np.array([e.cpu_used_cores or 0.0, 0.0])
                else:
                    freed = np.array([e.cpu_used_cores, e.rss_mib])
                    await self.stop_vm(name)
                    used = used - freed
            except errors.CellbedError as exc:
                log.warning("%s: spike policy could not %s %s: %s", self.reader.host, self.action, name, exc)
                continue
            self.counters[f"spike_{self.action}"] += 1
            self.emit(npb.EVENT_KIND_SPIKE_ACTION, name, f"{self.action} on spike ({spike}); "
                                                         + "; ".join(verdict.reasons))
