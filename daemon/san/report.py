"""The node report: what this host tells the brokers (capacity, use, requests, attributes, its ASR
class), published every report period, and with event-driven sampling again only when what it
says changed or before the brokers' entry for the host expires."""
from __future__ import annotations

import collections
import math
from typing import Callable

from cellbed.daemon.host_view import HostView
from cellbed.daemon.san.reader import HostReader
from cellbed.domain import wire
from cellbed.domain.topics import report_topic
from cellbed.policy.scores.asr import node_class
from cellbed.runtime.clock import Clock
from cellbed.runtime.transport import Transport
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb


class Reporter:
    """*samples_taken()*: how many samples the node has taken (a new one may change the report);
    *event_driven*: the node skips quiet samples, so a report is sent again only on a change."""

    def __init__(self, view: HostView, reader: HostReader, transport: Transport, clock: Clock, cell: str,
                 counters: collections.Counter, samples_taken: Callable[[], int], *, event_driven: bool,
                 period_s: float, quiet_period_s: float) -> None:
        self.view = view
        self.reader = reader
        self.transport = transport
        self.clock = clock
        self.cell = cell
        self.counters = counters
        self.samples_taken = samples_taken
        self.event_driven = event_driven
        self.period_s = period_s
        self.quiet_period_s = quiet_period_s
        self._last = -math.inf                      # monotonic time of the last report
        self._reported: tuple | None = None             # what the last report said (event-driven sampling)
        self._attrs_pb: tuple[tuple, list] = ((), [])   # (attributes as items, their wire form)

    def report(self) -> masbpb.NodeReport:
        view = self.view
        _, _, cpu_u, mem_u, cpu_req, mem_req = view.totals()     # one pass over the VMs
        cap, used = self.reader.capacity(), (cpu_u, mem_u)
        pr = self.reader.prod_requested()
        if view.vms or view.incoming:
            asr = int(node_class(used, cap)) + 1
        else:
            asr = cpb.ASR_CLASS_IDLE
        return masbpb.NodeReport(host=self.reader.host, capacity=wire.resources(*cap), used=wire.resources(*used),
                                 requested=wire.resources(cpu_req, mem_req), prod_requested=wire.resources(*pr),
                                 task_count=len(view.vms), attributes=self._attributes_pb(),
                                 asr_class=asr, sampled_unix_s=self.clock.now())

    def _attributes_pb(self) -> list:
        key = tuple(self.view.attributes.items())
        if key != self._attrs_pb[0]:
            self._attrs_pb = (key, wire.attributes_pb(self.view.attributes))
        return self._attrs_pb[1]

    def _key(self) -> tuple:
        """What a report says changes only with a sample (the VMs' measured use), a VM or a
        reservation coming or going, capacity or attributes (event-driven sampling: did it?)."""
        return (self.samples_taken(), self.view.capacity, len(self.view.vms), len(self.view.incoming),
                tuple(self.view.attributes.items()))

    def publish(self) -> None:
        if self.event_driven:
            self._reported = self._key()
        self._last = self.clock.monotonic()
        self.transport.publish(report_topic(self.cell, self.reader.host), self.report())
        self.counters["reports"] += 1

    def on_sample(self) -> None:
        """After a sample: the report, if the report period is over."""
        if self.clock.monotonic() - self._last >= self.period_s - 1e-9:
            self.publish()

    def on_quiet(self) -> None:
        """Instead of a sample: the report again if what it says changed, or before the brokers'
        entry expires."""
        if self.clock.monotonic() - self._last >= self.quiet_period_s - 1e-9 or self._key() != self._reported:
            self.publish()
