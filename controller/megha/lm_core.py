"""An LM instance's truth (seed 001 §IV-A, IV-D): the state of its cluster, its role and epoch in
the active-standby pair, the lock that makes it the serial point of its cluster, and how that
state is told (the LmState a GM's view takes in, a task's placement and record).

The cluster state is replaced at a takeover, so the other parts read ``cluster`` each time they
need it, never keep it across an await."""
from __future__ import annotations

import asyncio

from cellbed.controller.megha.lm_wire import ACTIVE, STANDBY
from cellbed.domain import errors, wire
from cellbed.policy.megha.validation import ClusterState, LmTask
from cellbed.v1 import megha_pb2 as meghapb


class LmCore:
    def __init__(self, lm: str, instance: str, clock, *, standby: bool, piggyback_full: bool) -> None:
        self.lm, self.instance = lm, instance
        self.role = STANDBY if standby else ACTIVE
        self.epoch = 1 if not standby else 0
        self.cluster: ClusterState | None = None
        self.lock = asyncio.Lock()             # one validation (or takeover) at a time
        self.last_heartbeat = 0.0              # monotonic time the active was last heard of
        self._clock = clock
        self._piggyback_full = piggyback_full

    def require_active(self) -> None:
        if self.role != ACTIVE or self.cluster is None:
            raise errors.FailedPrecondition(f"standby: LM {self.lm} instance {self.instance} is not active "
                                            f"(epoch {self.epoch})")

    def stamp_version(self) -> None:
        """The cluster's versions start at this epoch's (a GM's view takes a newer epoch as newer)."""
        self.cluster.version = self.epoch << 32

    def renew_cluster(self) -> None:
        """An empty cluster state with the same hosts and partitions, at this epoch (a takeover
        rebuilds the tasks into it)."""
        old = self.cluster
        self.cluster = ClusterState(old.hosts, old.total_cpu, old.total_mem, old.attributes, old.gms,
                                    old.owner.tolist())
        self.stamp_version()

    # --- what is told about a task ---------------------------------------------------------------
    def placement(self, t: LmTask, preempted=()) -> meghapb.Placement:
        return meghapb.Placement(lm=self.lm, lm_instance=self.instance, host=self.cluster.hosts[t.host],
                                 partition=self.cluster.gms[t.partition], repartitioned=t.logical,
                                 preempted=list(preempted))

    def record_of(self, t: LmTask) -> meghapb.LmTaskRecord:
        return meghapb.LmTaskRecord(task=t.payload, host=self.cluster.hosts[t.host],
                                    partition=self.cluster.gms[t.partition], logical=t.logical,
                                    submit_gm=t.submit_gm,
                                    state=meghapb.TASK_STATE_RUNNING if t.state == "running" else meghapb.TASK_STATE_STARTING,
                                    start_unix_s=t.start_unix_s, start_sent=t.start_sent)

    # --- state messages ----------------------------------------------------------------------------
    def _usage_pb(self) -> list[meghapb.UserUsage]:
        return [meghapb.UserUsage(user=u, used=wire.resources(c, m), tasks=int(n))
                for u, (c, m, n) in sorted(self.cluster.usage.items())]

    def full_state(self) -> meghapb.LmState:
        c = self.cluster
        fc, fm = c.free_arrays()
        return meghapb.LmState(lm=self.lm, instance=self.instance, epoch=self.epoch, version=c.version,
                               sent_unix_s=self._clock.now(), hosts_digest=c.digest, gms=c.gms, full=True,
                               owner=c.owner.tolist(), free_cpu_cores=fc.tolist(), free_mem_mib=fm.tolist(),
                               usage=self._usage_pb(), logical_nodes=c.logical.tolist(),
                               capacity=wire.resources(float(c.total_cpu.sum()), float(c.total_mem.sum())))

    def delta_state(self, hosts: list[int]) -> meghapb.LmState:
        c = self.cluster
        fc = [float(c.cap_cpu[h] - c.used_cpu[h]) for h in hosts]
        fm = [float(c.cap_mem[h] - c.used_mem[h]) for h in hosts]
        return meghapb.LmState(lm=self.lm, instance=self.instance, epoch=self.epoch, version=c.version,
                               sent_unix_s=self._clock.now(), hosts_digest=c.digest, gms=c.gms, full=False,
                               host_index=hosts, owner=[int(c.owner[h]) for h in hosts], free_cpu_cores=fc,
                               free_mem_mib=fm, usage=self._usage_pb(), logical_nodes=c.logical.tolist())

    def reply_state(self, h: int) -> meghapb.LmState:
        """The state a reply carries after host *h* changed (all of it, if so configured)."""
        return self.full_state() if self._piggyback_full else self.delta_state([h])
