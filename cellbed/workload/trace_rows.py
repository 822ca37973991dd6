"""What the trace reader does with each merged row: machines added, updated and removed, attributes, tasks and their updates, constraints and usage records, as workload events."""
from __future__ import annotations

from dataclasses import replace
from operator import itemgetter
from cellbed.workload.events import (
    MAX_PRIORITY,
    AddNode,
    AddNodeAttributes,
    EndReason,
    RemoveNode,
    RemoveNodeAttributes,
    RemoveTask,
    UpdateNodeTotalResources,
    UpdateTaskConstraints,
    UpdateTaskRequiredResources,
    UpdateTaskUsedResources,
)
from cellbed.workload.trace_tables import MachineEventType, TaskEventType, TaskState


class RowsMixin:
    """Part of TraceReader (which owns the state these methods use)."""

    # -------------------------------------------------------------- handlers
    def _on_machine(self, r: tuple) -> None:
        t, _, mid, etype, platform, cpu, mem, loc = r
        note = self._note
        if not self._keep_machine(mid):
            note("dropped_machine_rows", loc)
            return
        nodes = self._nodes
        if etype == MachineEventType.ADD or (etype == MachineEventType.UPDATE and mid not in nodes):
            if mid in nodes:
                note("machine_add_while_live", loc)
                self._update_machine(t, mid, platform, cpu, mem)
                return
            if etype == MachineEventType.UPDATE:
                note("machine_update_unknown", loc)
            if cpu is None or mem is None:
                note("machine_missing_capacity", loc)
            nodes[mid] = [cpu or 0.0, mem or 0.0, platform]
            self._emit(AddNode(t, mid, cpu or 0.0, mem or 0.0, platform))
            a = self._attrs.get(mid)
            if a and self._emitting:
                # re-added machine: re-send what we remember; attribute rows at this same time
                # update this event instead of adding another (see _on_attributes)
                self._batch_readd[mid] = len(self._batch)
                self._batch.append(AddNodeAttributes(t, mid, tuple(sorted(a.items()))))
        elif etype == MachineEventType.REMOVE:
            if mid not in nodes:
                note("machine_remove_unknown", loc)
                return
            del nodes[mid]
            self._emit(RemoveNode(t, mid))
        elif etype == MachineEventType.UPDATE:
            self._update_machine(t, mid, platform, cpu, mem)
        else:
            note("malformed_rows.machine_events", loc)

    def _update_machine(self, t, mid, platform, cpu, mem) -> None:
        n = self._nodes[mid]
        if cpu is not None:
            n[0] = cpu
        if mem is not None:
            n[1] = mem
        if platform is not None:
            n[2] = platform
        self._emit(UpdateNodeTotalResources(t, mid, n[0], n[1], n[2]))

    def _on_attributes(self, r: tuple) -> None:
        t, _, mid, deleted, pairs, loc = r
        if not self._keep_machine(mid):
            self._note("dropped_machine_rows", loc, len(pairs))
            return
        a = self._attrs.setdefault(mid, {})
        if deleted:
            for name, _ in pairs:
                a.pop(name, None)
        else:
            a.update(pairs)
        if mid not in self._nodes:
            self._note("attributes_unknown_machine", loc, len(pairs))
            return
        pos = self._batch_readd.get(mid)
        if pos is not None:  # the machine was re-added at this timestamp: one event with the final set
            self._batch[pos] = AddNodeAttributes(t, mid, tuple(sorted(a.items())))
            return
        if deleted:
            self._emit(RemoveNodeAttributes(t, mid, tuple(name for name, _ in pairs)))
        else:
            self._emit(AddNodeAttributes(t, mid, tuple(sorted(pairs, key=itemgetter(0)))))

    def _on_task(self, r: tuple) -> None:
        (t, _, missing, job, idx, mid, etype, user, sclass, prio, cpu, mem, disk, diff, loc) = r
        note = self._note
        key = (job, idx)
        tasks = self._tasks
        task = tasks.get(key)
        if task is None and not self._keep_task(job, idx):
            note("dropped_task_rows", loc)
            return
        if missing is not None:
            note("missing_info_rows", loc)
        if not 0 <= prio <= MAX_PRIORITY:
            note("priority_out_of_range", loc)
            return
        if etype == TaskEventType.SUBMIT or (task is None and etype in (
                TaskEventType.SCHEDULE, TaskEventType.UPDATE_PENDING, TaskEventType.UPDATE_RUNNING)):
            if task is not None:
                note("submit_while_live", loc)
                self._update_task(t, job, idx, task, user, sclass, prio, cpu, mem, disk, diff)
                return
            if etype != TaskEventType.SUBMIT:
                note("implicit_submit", loc)
            if cpu is None or mem is None:
                note("missing_request", loc)
            task = TaskState(user or "", prio, sclass, cpu or 0.0, mem or 0.0, disk or 0.0, bool(diff))
            tasks[key] = task
            self._removed.pop(key, None)
            if self._emitting:
                self._batch_adds[key] = len(self._batch)
                self._batch.append(task.add_event(t, job, idx))
        elif etype == TaskEventType.SCHEDULE:
            return  # placement: not a workload event
        elif TaskEventType.EVICT <= etype <= TaskEventType.LOST:
            if task is None:
                note("remove_unknown_task", loc)
                return
            del tasks[key]
            self._batch_adds.pop(key, None)
            self._removed[key] = t
            self._removed_q.append((t, key))
            self._emit(RemoveTask(t, job, idx, EndReason(etype)))
        elif etype in (TaskEventType.UPDATE_PENDING, TaskEventType.UPDATE_RUNNING):
            self._update_task(t, job, idx, task, user, sclass, prio, cpu, mem, disk, diff)
        else:
            note("malformed_rows.task_events", loc)

    def _update_task(self, t, job, idx, task: TaskState, user, sclass, prio, cpu, mem, disk, diff) -> None:
        task.priority = prio
        if user is not None:
            task.user = user
        if sclass is not None:
            task.sclass = sclass
        if cpu is not None:
            task.cpu = cpu
        if mem is not None:
            task.mem = mem
        if disk is not None:
            task.disk = disk
        if diff is not None:
            task.diff = diff
        self._emit(UpdateTaskRequiredResources(t, job, idx, task.priority, task.sclass, task.cpu, task.mem, task.disk))

    def _on_constraints(self, r: tuple) -> None:
        t, _, job, idx, cons, loc = r
        key = (job, idx)
        task = self._tasks.get(key)
        if task is None:
            if not self._keep_task(job, idx):
                self._note("dropped_task_rows", loc, len(cons))
            else:
                self._note("constraints_unknown_task", loc, len(cons))
            return
        task.constraints = cons
        pos = self._batch_adds.get(key)
        if pos is not None:
            self._batch[pos] = replace(self._batch[pos], constraints=cons)
        else:
            self._emit(UpdateTaskConstraints(t, job, idx, cons))

    def _on_usage(self, r: tuple) -> None:
        end, _, start, job, idx, mid, cpu, canon, assigned, maxmem, maxcpu, sampled, loc = r
        note = self._note
        if not self._emitting:
            note("usage_before_window", loc)
            return
        key = (job, idx)
        if key not in self._tasks:
            self._expire_removed(end)
            if key in self._removed:
                note("usage_after_remove", loc)
            elif not self._keep_task(job, idx):
                note("dropped_task_rows", loc)
            else:
                note("usage_unknown_task", loc)
            return
        if mid is None:
            note("usage_missing_machine", loc)
        self._batch.append(UpdateTaskUsedResources(end, job, idx, mid, start, end, cpu, canon, assigned, maxmem,
                                                   maxcpu, sampled))

    def _expire_removed(self, now: int) -> None:
        q, removed, horizon = self._removed_q, self._removed, now - self.options.removed_task_grace_us
        while q and q[0][0] < horizon:
            t, key = q.popleft()
            if removed.get(key) == t:
                del removed[key]
