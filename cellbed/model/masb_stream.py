"""What the MASB model cell does with each event of the workload stream (every type the trace
reader and the generator emit), with GCD semantics (digest §C.3, §E.2):

* ``AddNode``: a host joins (a machine that left earlier comes back as a new host: empty, with
  a fresh backend); an ``AddNode`` of a host that is there is a capacity update.
* ``RemoveNode``: the host leaves the cell at once, as a failed machine does: its SAN and node
  agent stop, its backend goes (migrations from it are cancelled, migrations to it fail), the
  destinations release what they reserved for it, and the ticks count one node fewer. Its
  tasks are not given a fate the trace does not give: every task the model had placed there
  waits for a new placement like a new arrival; one the trace ends (EVICT, LOST, FAIL... in
  task_events) within ``END_WITH_HOST_S`` of the removal, before it is placed again, ended
  with its host (``ended_with_host_<reason>``); the others are *displaced*
  (``tasks_displaced``): in the trace they were elsewhere and ran on.
* ``UpdateNodeTotalResources``: the host's capacity changes (``NodeAgent.update_capacity``);
  its SAN reports at once. VMs over the new capacity stay: the host is overloaded, which is
  what SAN is for.
* ``AddNodeAttributes`` / ``RemoveNodeAttributes``: the host's attributes.
* ``AddTask``: a new run of a task. A task the trace submits again after its run ended
  (EVICT, FAIL, LOST, KILL: the GCD re-SUBMIT) is a new run with its own placement; if the
  earlier run's VM is still being stopped, the new run is named ``t<job>-<index>-r<k>``.
* ``RemoveTask``: the run ends, counted by reason (``tasks_ended_<reason>``).
* ``UpdateTaskRequiredResources`` / ``UpdateTaskConstraints``: the task's request, priority
  and constraints change: a waiting task is placed with them, a placed one changes on its host
  (``NodeAgent.update_request``: admission, SAN and the broker's reports see it; a task whose
  new constraints its host does not meet is compulsory for SCS).
* ``UpdateTaskUsedResources``: the task's use, wherever it runs.
"""
from __future__ import annotations

import dataclasses
import math

from cellbed import assembly
from cellbed.domain import errors
from cellbed.domain.names import task_name
from cellbed.domain.vm import VmSpec
from cellbed.model.params import END_WITH_HOST_S, MIN_HOST_CPU, MIN_HOST_MEM_MIB
from cellbed.workload import events as ev

HOST_EVENTS = (ev.AddNode, ev.RemoveNode)
"""The events _feed awaits (apply_node): a host starts or stops."""


class StreamMixin:
    """Part of MasbFront (which owns the state these methods use)."""

    admission = "used"
    """The hosts' admission test (NodeConfig.admission): the model cell admits on measured use
    (the overcommitted cell of MASB's simulation); the real-cell twin as a real node daemon does."""

    # --- tasks: names of runs, and specs -----------------------------------------------------
    def _name(self, key: tuple[int, int]) -> str:
        """The name of the task's current run."""
        return self.run_name.get(key) or task_name(*key)

    def _run_name(self, key: tuple[int, int]) -> str:
        """The name of a new run of task *key*: ``t<job>-<index>``, unless an earlier run of it
        still holds that name (its VM being stopped), then ``...-r<k>``."""
        base = name = task_name(*key)
        k = 0
        while name in self.live or name in self.remove_later or name in self.cell.fabric.location:
            k += 1
            name = f"{base}-r{k}"
        if k:
            self.run_name[key] = name
            self.counters["runs_renamed"] += 1
        else:
            self.run_name.pop(key, None)
        return name

    def _make_spec(self, name: str, cpu_request: float, mem_request: float, priority: int,
                   constraints: tuple, user: str) -> VmSpec:
        cpu = cpu_request * self.p.cpu_scale_cores
        mem = max(1, int(round(mem_request * self.p.mem_scale_mib)))
        vcpus = max(1, math.ceil(cpu - 1e-9))
        used_cpu = 0.45 * cpu      # until the first usage record: the mean use/request ratio
        return VmSpec(name=name, mem_mib=mem, vcpus=vcpus,
                      cpu_load=min(1.0, used_cpu / vcpus), wss_mib=max(0, int(0.8 * mem)), dirty_mib_s=0.0,
                      production=ev.band_of(priority) == ev.Band.PRODUCTION, priority=priority,
                      req_cpu_cores=min(cpu, vcpus), constraints=tuple(constraints), user=user)

    def _spec(self, e: ev.AddTask) -> VmSpec:
        return self._make_spec(self._run_name(e.task_key), e.cpu_request, e.mem_request, e.priority,
                               e.constraints, e.user)

    # --- the dispatch ------------------------------------------------------------------------
    def apply(self, e: ev.WorkloadEvent) -> None:
        """Apply one event that needs no waiting (node joins and leaves are awaited by _feed)."""
        if isinstance(e, ev.UpdateTaskUsedResources):
            name = self._name(e.task_key)
            cpu = (e.cpu_rate or 0.0) * self.p.cpu_scale_cores
            mem = (e.canonical_memory or 0.0) * self.p.mem_scale_mib
            if name in self.usage_boost:
                cpu *= self.p.overload_factor
            self.cell.fabric.set_usage(name, cpu, mem)
        elif isinstance(e, ev.AddTask):
            spec = self._spec(e)
            self.live[spec.name] = spec
            self.added += 1
            self._spawn_arrival(spec)
        elif isinstance(e, ev.RemoveTask):
            self._end(e)
        elif isinstance(e, (ev.UpdateTaskRequiredResources, ev.UpdateTaskConstraints)):
            self._update_task(e)
        elif isinstance(e, ev.AddNodeAttributes):
            h = self._host_of(e.node_id)
            if h is not None:
                h.agent.update_attributes(set_=e.as_dict())
        elif isinstance(e, ev.RemoveNodeAttributes):
            h = self._host_of(e.node_id)
            if h is not None:
                h.agent.update_attributes(remove=e.names)
        elif isinstance(e, ev.UpdateNodeTotalResources):
            self._update_capacity(e.node_id, e.cpu, e.mem)

    async def apply_node(self, e: ev.AddNode | ev.RemoveNode) -> None:
        """AddNode and RemoveNode (HOST_EVENTS: awaited, as hosts start and stop)."""
        if isinstance(e, ev.RemoveNode):
            await self._remove_host(e.node_id)
        elif self._host_of(e.node_id) is not None:
            self.counters["add_node_while_present"] += 1
            self._update_capacity(e.node_id, e.cpu, e.mem)
        else:
            await self._add_host(e.node_id, e.cpu, e.mem)

    # --- tasks ---------------------------------------------------------------------------------
    def _end(self, e: ev.RemoveTask) -> None:
        key = e.task_key
        name = self._name(key)
        self.run_name.pop(key, None)
        if self.live.pop(name, None) is None:
            self.counters["remove_unknown_task"] += 1
            return
        self.removed += 1
        self.counters[f"tasks_ended_{e.reason.name.lower()}"] += 1
        left = self.displaced_at.pop(name, None)
        if left is not None and self.clock.monotonic() - left <= END_WITH_HOST_S:
            # the trace ends it as its host leaves (still waiting): it ended with the host
            self.counters["tasks_displaced"] -= 1
            self.counters[f"ended_with_host_{e.reason.name.lower()}"] += 1
        self.arrival.pop(name, None)
        self.update_later.pop(name, None)
        self._spawn(self._stop(name))

    def _update_task(self, e: ev.UpdateTaskRequiredResources | ev.UpdateTaskConstraints) -> None:
        name = self._name(e.task_key)
        spec = self.live.get(name)
        if spec is None:
            self.counters["update_unknown_task"] += 1
            return
        if isinstance(e, ev.UpdateTaskConstraints):
            new = dataclasses.replace(spec, constraints=tuple(e.constraints))
            self.counters["task_constraint_updates"] += 1
        else:
            new = self._make_spec(name, e.cpu_request, e.mem_request, e.priority, spec.constraints, spec.user)
            self.counters["task_request_updates"] += 1
        self.live[name] = new
        if name in self.pending:
            self.pending[name] = new                 # placed with the new request when its turn comes
        elif self.cell.fabric.location.get(name) is not None:
            self._spawn(self._update_placed(name))

    async def _update_placed(self, name: str) -> None:
        """The placed task's spec on its host follows the live one; a task on the move is
        updated at the next tick."""
        spec = self.live.get(name)
        host = self.cell.fabric.location.get(name)
        if spec is None or host is None or host not in self.hosts:
            return
        try:
            await self.hosts[host].agent.update_request(name, spec.requested_cpu, spec.mem_mib, spec.priority,
                                                        spec.production, spec.constraints)
            self.update_later.pop(name, None)
            self.counters["task_updates_applied_on_host"] += 1
        except (errors.FailedPrecondition, errors.NotFound):
            self.update_later[name] = True

    # --- hosts ---------------------------------------------------------------------------------
    def _host_of(self, node_id: int):
        return self.hosts.get(self.node_of_id.get(node_id, ""))

    def _capacity(self, cpu: float, mem: float) -> tuple[float, int]:
        cores = cpu * self.p.cpu_scale_cores
        mib = int(mem * self.p.mem_scale_mib)
        if cores < MIN_HOST_CPU or mib < MIN_HOST_MEM_MIB:
            self.counters["hosts_capacity_clamped"] += 1
        return max(MIN_HOST_CPU, cores), max(MIN_HOST_MEM_MIB, mib)

    async def _add_host(self, node_id: int, cpu: float, mem: float) -> None:
        name = f"n{node_id}"
        self.node_of_id[node_id] = name
        cores, mib = self._capacity(cpu, mem)
        cfg = assembly.model_config(name, cores, mib, monitor_period_s=self.p.monitor_period_s,
                                    admission=self.admission, skip_quiet_samples=self.p.sampling == "event")
        h = await self.cell.add_host(cfg, start=False)
        await h.agent.start(first_sample_delay_s=self.rng.uniform(0, self.p.monitor_period_s))
        san, _ = assembly.build_san(self.cell.env, h.agent, dataclasses.replace(self.p.san, enabled=self.p.san.enabled),
                                    [b.name for b in self.brokers], "model", on_migration=self._on_migration,
                                    on_refused=self._on_refused)
        san.start()
        self.sans[name] = san

    def _update_capacity(self, node_id: int, cpu: float, mem: float) -> None:
        h = self._host_of(node_id)
        if h is None:
            self.counters["update_unknown_node"] += 1
            return
        cores, mib = self._capacity(cpu, mem)
        h.agent.update_capacity(cores, mib)
        self.counters["host_capacity_updates"] += 1
        san = self.sans.get(h.name)
        if san is not None and self.brokers:
            san.publish_report()

    async def _remove_host(self, node_id: int) -> None:
        name = self.node_of_id.pop(node_id, None)
        if name is None or name not in self.hosts:
            self.counters["remove_unknown_node"] += 1
            return
        self.counters["node_removals"] += 1
        h = self.hosts.pop(name)
        self.cell.net.remove(name)                  # requests to it now fail, as to a dead machine
        san = self.sans.pop(name, None)
        if san is not None:
            san.disable()
            await san.stop()                        # its negotiations (and their migrations) end
        held = set(self.cell.fabric.remove_host(name)) | set(h.agent.view().vm_names)
        await h.agent.stop()
        for other in self.hosts.values():           # what others reserved for migrations from it
            for mid, r in list(other.agent.view().incoming.items()):
                if r.src == name:
                    other.agent.release(mid)
        now = self.clock.monotonic()
        for n in sorted(held):
            self.remove_later.discard(n)
            spec = self.live.get(n)
            if spec is None or n in self.pending:
                continue
            self.pending[n] = spec                  # placed again, unless the trace ends it now
            self.arrival[n] = (now, 0)
            self.displaced_at[n] = now
            self.counters["tasks_displaced"] += 1
