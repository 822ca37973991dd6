"""The Local Master (seed 001 §IV): the true state of its cluster, validation of every GM
request, launch through the NodeAgent, periodic state updates, and active–standby.

Written against the runtime interfaces (transport, clock, RNG injected), so the same agent
drives real VMs over gRPC + MQTT and model tasks in a virtual-time model cell.

- Hosts are discovered from their node daemons (GetHostState: capacity and attributes), and
  running VMs are adopted (ListVms), so a restarted LM forgets nothing that runs.
- Requests are validated one at a time (a lock): the LM is the serial point of its cluster.
  Success reserves the resources at once, answers with a delta of the changed host, and
  starts the task on the node in the background; the task's start is reported to its GM as
  a TaskEvent with the LM-side parts of its allocation time. A stale request is refused with
  the full state of all partitions, and counted as an internal or external inconsistency.
- Task events (started, finished, preempted, failed) go to the GM that submitted the task,
  batched, and are resent until acknowledged.
- Active–standby: the active replicates its task table and undelivered events to the
  standby every replicate_period_s (also the heartbeat). The standby takes over when the
  heartbeat stops: it bumps the epoch, reconciles the table with what the nodes really run
  (ListVms), requeues through the GMs what vanished, and starts serving.

LocalMaster composes its parts and answers for them:
- LmCore (lm_core): the cluster state, role, epoch and validation lock, and the state messages;
- Nodes (lm_nodes): discovery and adoption; Requests (lm_requests): the validated requests;
- Launcher (lm_launch): starts, ends and stops on the nodes; EventOutbox (lm_outbox): task events;
- Replicator (lm_replicate): the active's change log to its standby; Standby (lm_standby): the
  standby's replica and takeover; Publisher (lm_publish): the periodic state; HostChanges
  (lm_hosts): a cell that changes under the LM.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cellbed.controller.megha import lm_show
from cellbed.controller.megha.background import Background
from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_hosts import HostChanges
from cellbed.controller.megha.lm_launch import Launcher
from cellbed.controller.megha.lm_nodes import Nodes
from cellbed.controller.megha.lm_outbox import EventOutbox
from cellbed.controller.megha.lm_publish import Publisher
from cellbed.controller.megha.lm_replicate import Replicator
from cellbed.controller.megha.lm_requests import Requests
from cellbed.controller.megha.lm_standby import Standby
from cellbed.controller.megha.lm_wire import ACTIVE
from cellbed.controller.megha.params import LmParams
from cellbed.domain.constraints import AttrValue
from cellbed.policy.megha.validation import ClusterState, LmTask
from cellbed.v1 import megha_pb2 as meghapb

log = logging.getLogger(__name__)


class LocalMaster:
    def __init__(self, lm: str, instance: str, transport, clock, *, hosts: list[str], gms: list[str],
                 owner: list[int] | None = None, standby: bool = False, peer: str = "", cell: str = "cell",
                 params: LmParams = LmParams(), validation=None) -> None:
        """*validation*: the ``validation`` stage's policy (DESIGN §17), the room check of a
        launch or repartition on this LM's true state."""
        self.lm, self.instance = lm, instance
        self.clock = clock
        self.host_names = list(hosts)
        self.gms = list(gms)
        self.owner = owner
        self.peer = peer
        self.cell = cell
        self.params = params.validate()
        self.counters: Counter = Counter()
        self.started = asyncio.Event()
        self._transport = transport
        self._tasks: list[asyncio.Task] = []
        p, c = self.params, self.counters
        self._core = LmCore(lm, instance, clock, standby=standby, piggyback_full=p.piggyback_full)
        self._bg = Background()
        self._outbox = EventOutbox(self._core, transport, clock, p, c)
        self._repl = Replicator(self._core, self._outbox, transport, peer, clock, p, c)
        self._publisher = Publisher(self._core, transport, clock, p, c, cell)
        self._nodes = Nodes(self._core, self._repl, transport, clock, p, c, hosts=self.host_names, gms=self.gms,
                            owner=owner)
        self._launcher = Launcher(self._core, self._outbox, self._repl, self._bg, transport, clock, p, c)
        self._requests = Requests(self._core, self._launcher, self._repl, self._bg, clock, p, c, validation)
        self._standby = Standby(self._core, self._nodes, self._launcher, self._outbox, self._repl, self._publisher,
                                self._bg, transport, peer, clock, p, c)
        self._hosts = HostChanges(self._core, self._repl, self._publisher, c)

    # --- what the LM holds ---------------------------------------------------------------------
    @property
    def transport(self):
        return self._transport

    @property
    def cluster(self) -> ClusterState | None:
        return self._core.cluster

    @property
    def role(self) -> int:
        return self._core.role

    @property
    def epoch(self) -> int:
        return self._core.epoch

    @property
    def last_heartbeat(self) -> float:
        return self._core.last_heartbeat

    @property
    def replica(self) -> dict[str, meghapb.LmTaskRecord]:
        """The standby's mirror of the active's task table."""
        return self._standby.replica

    @property
    def replica_outbox(self) -> list[tuple[str, meghapb.TaskEvent]]:
        return self._standby.replica_outbox

    @property
    def takeovers(self) -> int:
        return self._standby.takeovers

    @property
    def outbox(self) -> dict[str, list[meghapb.TaskEvent]]:
        """Task events not yet acknowledged, per GM."""
        return self._outbox.pending

    @property
    def validating(self) -> int:
        return self._requests.validating

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self._nodes.discover()
        if self._core.role == ACTIVE and self.peer:
            await self._standby.yield_to_peer()
        if self._core.role == ACTIVE:
            self._core.stamp_version()
            await self._nodes.adopt_running()
        self._core.last_heartbeat = self.clock.monotonic()
        self._tasks += [asyncio.create_task(self._publisher.loop(), name=f"{self.instance}-publish"),
                        asyncio.create_task(self._outbox.flusher(), name=f"{self.instance}-events")]
        if self.peer:
            self._tasks += [asyncio.create_task(self._repl.loop(), name=f"{self.instance}-replicate"),
                            asyncio.create_task(self._standby.watchdog(), name=f"{self.instance}-watchdog")]
        self.started.set()
        log.info("LM %s (%s) %s: %d hosts, %d partitions, %d tasks adopted", self.lm, self.instance,
                 meghapb.LmRole.Name(self.role), len(self.cluster.hosts), len(self.gms), len(self.cluster.tasks))

    async def stop(self) -> None:
        self._launcher.cancel_all()
        pending = self._tasks + self._bg.pending()
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()
        self._bg.clear()

    # --- requests ------------------------------------------------------------------------------
    def require_active(self) -> None:
        self._core.require_active()

    async def launch(self, req: meghapb.LaunchRequest) -> meghapb.PlacementResponse:
        return await self._requests.launch(req)

    async def repartition(self, req: meghapb.RepartitionRequest) -> meghapb.PlacementResponse:
        return await self._requests.repartition(req)

    async def preempt(self, req: meghapb.PreemptRequest) -> meghapb.PlacementResponse:
        return await self._requests.preempt(req)

    async def place_direct(self, task: meghapb.MeghaTask, host: str) -> None:
        """Start a task on *host* outside the GMs, in the owner's partition (a warm model cell at
        t=0). Raises FailedPrecondition if it does not fit."""
        await self._requests.place_direct(task, host)

    async def stop_task(self, name: str) -> str:
        return await self._launcher.stop_task(name)

    def record_of(self, t: LmTask) -> meghapb.LmTaskRecord:
        return self._core.record_of(t)

    # --- active-standby --------------------------------------------------------------------------
    def replicate(self, req: meghapb.ReplicateRequest) -> meghapb.ReplicateResponse:
        return self._standby.replicate(req)

    async def takeover(self) -> None:
        """Become active (see Standby.takeover)."""
        await self._standby.takeover()

    # --- state messages ----------------------------------------------------------------------
    def full_state(self) -> meghapb.LmState:
        return self._core.full_state()

    def delta_state(self, hosts: list[int]) -> meghapb.LmState:
        return self._core.delta_state(hosts)

    def publish_state(self) -> None:
        """Send the full state of every partition to the GMs now (the periodic update, also used
        by a model cell after filling nodes outside the GMs)."""
        self._publisher.publish_state()

    # --- a cell that changes under the LM ----------------------------------------------------------
    def update_host(self, host: str, cpu: float | None = None, mem: float | None = None,
                    attributes: dict[str, AttrValue] | None = None) -> list[str]:
        """See HostChanges.update_host: the tasks on *host* that no longer fit, newest first."""
        return self._hosts.update_host(host, cpu, mem, attributes)

    def resize_task(self, name: str, cpu: float, mem: float) -> bool:
        return self._hosts.resize_task(name, cpu, mem)

    def tasks_on(self, host: str) -> list[str]:
        return self._hosts.tasks_on(host)

    # --- views for cellctl ---------------------------------------------------------------------------
    def queue_lengths(self) -> dict[str, int]:
        """What waits here: requests queued for the validation lock, task events not yet
        acknowledged by their GMs (the metrics exporter reads this)."""
        return {"validation": self._requests.waiting(), "events": self._outbox.count()}

    def list_partitions(self) -> meghapb.ListPartitionsResponse:
        return lm_show.partitions_pb(self._core, self.counters)

    def hosts_pb(self) -> meghapb.GetHostsResponse:
        return lm_show.hosts_pb(self._core)
