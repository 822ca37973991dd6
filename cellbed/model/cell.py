"""The model cell: N model hosts (the unchanged NodeAgent on the model backend) and a placement
front-end, all on one in-process network in virtual time, driven by a workload event stream
(the GCD-shaped generator or a trace). The same agent code as on a real cell, built by the
same assembly (:mod:`cellbed.assembly`); only the Env differs.

    summary = run_virtual(ModelCell(ModelCellParams(nodes=500)).run())            # MASB with SAN
    summary = run_virtual(ModelCell(ModelCellParams(frontend="megha"), events).run())

The front-end is a parameter (``params.frontend``):

* ``masb`` (a random broker places with SIAS, DESIGN §7) and ``bestfit`` (a central Borg-like
  best fit over true state: MASB Table 3's baseline), with SAN rebalancing on or off —
  :mod:`cellbed.model.masb`;
* ``megha`` (G GMs × L LMs), ``central`` (1 × 1) and ``sampling`` (Sparrow-style) —
  :mod:`cellbed.model.megha`.

Every front-end reports through the same hooks: ``on_tick(TickRow)``, ``on_allocation(AllocationRow)``
and ``on_migration(MigrationRow)``, and every tick row comes from :func:`cellbed.metrics.ticks.tick_row`
over the hosts' own views.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Callable, Iterable

from cellbed.runtime.explain import OFF, ExplainLog
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.plugins.guard import PolicyEnv
from cellbed import assembly
from cellbed.assembly import Env, ModelHost
from cellbed.metrics.rows import AllocationRow, MigrationRow, TickRow
from cellbed.metrics.ticks import HostState, TickAccumulator
from cellbed.model.masb import MasbFront
from cellbed.model.megha import MeghaFront
from cellbed.model.params import MASB_FRONTENDS, ModelCellParams, Summary
from cellbed.workload import events as ev

__all__ = ["ModelCell", "ModelCellParams", "Summary"]

GC_THRESHOLD = (50_000, 20, 20)
"""The cyclic collector's thresholds while a model cell runs (Python's default: 700, 10, 10). A
cell holds millions of long-lived objects (agents, VMs, tasks), which every full collection
walked: at 2,000 nodes a fifth of the run's CPU. With these, and the objects alive after the
warm start frozen out of collection, it is ~1 % (cellbed is the same program: collection
timing changes no output)."""


@contextlib.contextmanager
def collector_for_cells():
    """GC_THRESHOLD for the duration, then the previous thresholds and nothing frozen."""
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


class ModelCell:
    """One model cell for every front-end. ``run()`` consumes *events* (default: the seeded
    generator of ``params.generator``) up to ``params.duration_s`` and returns a :class:`Summary`."""

    def __init__(self, params: ModelCellParams, events: Iterable[ev.WorkloadEvent] | None = None, *,
                 on_tick: Callable[[TickRow], None] | None = None,
                 on_allocation: Callable[[AllocationRow], None] | None = None,
                 on_migration: Callable[[MigrationRow], None] | None = None, front: type | None = None,
                 ticks_from_samples: bool = False, policies: PolicyBook | None = None,
                 explain: ExplainLog = OFF, **frontend_options) -> None:
        """*frontend_options* go to the front-end (Megha: gm_params, lm_params, host_attributes);
        *policies*: the run's policy book (DESIGN §17; the built-ins by default), shared by every agent;
        *front* replaces the front-end class the params choose (the real-cell twin's);
        *ticks_from_samples*: ticks read each host's last sample, as a real cell's runner does
        (GetHostState), instead of its live view (the real-cell twin)."""
        self.p = params.validate()
        self.events = events
        self.on_tick = on_tick
        self.on_allocation = on_allocation
        self.on_migration = on_migration
        self.hosts: dict[str, ModelHost] = {}
        self.ticks_from_samples = ticks_from_samples
        self.acc = TickAccumulator()
        self.env: Env | None = None
        self.policies = policies if policies is not None else PolicyBook(PolicyEnv(mode="strict"))
        self.explain = explain
        self._frozen = False
        if front is None:
            front = MasbFront if params.frontend in MASB_FRONTENDS else MeghaFront
        self.frontend = front(self, **frontend_options)

    # --- the Env (built inside the virtual-time loop) ------------------------------------------------
    def make_env(self, cost=None) -> Env:
        p = self.p
        self.env = assembly.model_env(p.seed, p.latency_s, p.jitter_s, cost=cost, migration_cost=p.cost,
                                      migration_failure_prob=p.migration_failure_prob, guest=p.guest,
                                      policies=self.policies, explain=self.explain)
        return self.env

    @property
    def clock(self):
        return self.env.clock

    @property
    def net(self):
        return self.env.net

    @property
    def fabric(self):
        return self.env.fabric

    # --- hosts -----------------------------------------------------------------------------------------
    async def add_host(self, cfg, start: bool = True) -> ModelHost:
        h = await assembly.model_host(self.env, cfg, start=start)
        self.hosts[h.name] = h
        return h

    def host_states(self) -> list[HostState]:
        out = []
        for h in self.hosts.values():
            if self.ticks_from_samples:
                s = h.agent.host_sample
                out.append(HostState(s.capacity.cpu_cores, s.capacity.mem_mib, s.cpu_used_cores, s.mem_used_mib,
                                     s.cpu_req_cores, s.mem_alloc_mib, s.vm_count))
                continue
            v = h.agent.view()
            cpu, mem = v.capacity
            _, _, uc, um, rc, rm = v.totals()
            out.append(HostState(cpu, mem, uc, um, rc, rm, v.vm_count))
        return out

    def tick(self, t_s: float, pending: int) -> TickRow:
        """The tick row now (and the per-tick counters start again); passed to on_tick."""
        row = self.acc.row(t_s, self.host_states(), pending=pending)
        if not self._frozen:              # the warm start's survivors live long: out of collection
            self._frozen = True
            gc.collect()
            gc.freeze()
        if self.on_tick is not None:
            self.on_tick(row)
        return row

    def allocation(self, row: AllocationRow) -> None:
        if row.outcome == "placed":
            self.acc.allocation(row.total_ms)
        if self.on_allocation is not None:
            self.on_allocation(row)

    def migration(self, row: MigrationRow, counted_as: str | None = None) -> None:
        """A migration attempt: into the tick's counters (as *counted_as*, default the row's
        outcome; bytes only for a success) and to on_migration."""
        outcome = counted_as or row.outcome
        self.acc.migration(outcome, row.bytes if outcome == "succeeded" else 0)
        if self.on_migration is not None:
            self.on_migration(row)

    # --- the run -----------------------------------------------------------------------------------------
    async def run(self) -> Summary:
        with collector_for_cells():
            return await self.frontend.run(self.events)
