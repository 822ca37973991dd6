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
        t, _, mid, etype, platform, cpu, mem = r
        stats = self.stats
        if not self._keep_machine(mid):
            stats["dropped_machine_rows"] += 1
            return
        nodes = self._nodes
        if etype == MachineEventType.ADD or (etype == MachineEventType.UPDATE and mid not in nodes):
            if mid in nodes:
                stats["machine_add_while_live"] += 1
                self._update_machine(t, mid, platform, cpu, mem)
                return
            if etype == MachineEventType.UPDATE:
                stats["machine_update_unknown"] += 1
            if cpu is None or mem is None:
                stats["machine_missing_capacity"] += 1
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
                stats["machine_remove_unknown"] += 1
                return
            del nodes[mid]
            self._emit(RemoveNode(t, mid))
        elif etype == MachineEventType.UPDATE:
            self._update_machine(t, mid, platform, cpu, mem)
        else:
            stats["malformed_rows.machine_events"] += 1

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
        t, _, mid, deleted, pairs = r
        if not self._keep_machine(mid):
            self.stats["dropped_machine_rows"] += len(pairs)
            return
        a = self._attrs.setdefault(mid, {})
        if deleted:
            for name, _ in pairs:
                a.pop(name, None)
        else:
            a.update(pairs)
        if mid not in self._nodes:
            self.stats["attributes_unknown_machine"] += len(pairs)
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
        (t, _, missing, job, idx, mid, etype, user, sclass, prio, cpu, mem, disk, diff) = r
        stats = self.stats
        key = (job, idx)
        tasks = self._tasks
        task = tasks.get(key)
        if task is None and not self._keep_task(job, idx):
            stats["dropped_task_rows"] += 1
            return
        if missing is not None:
            stats["missing_info_rows"] += 1
        if not 0 <= prio <= MAX_PRIORITY:
            stats["priority_out_of_range"] += 1
            return
        if etype == TaskEventType.SUBMIT or (task is None and etype in (
                TaskEventType.SCHEDULE, TaskEventType.UPDATE_PENDING, TaskEventType.UPDATE_RUNNING)):
            if task is not None:
                stats["submit_while_live"] += 1
                self._update_task(t, job, idx, task, user, sclass, prio, cpu, mem, disk, diff)
                return
            if etype != TaskEventType.SUBMIT:
                stats["implicit_submit"] += 1
            if cpu is None or mem is None:
                stats["missing_request"] += 1
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
                stats["remove_unknown_task"] += 1
                return
            del tasks[key]
            self._batch_adds.pop(key, None)
            self._removed[key] = t
            self._removed_q.append((t, key))
            self._emit(RemoveTask(t, job, idx, EndReason(etype)))
        elif etype in (TaskEventType.UPDATE_PENDING, TaskEventType.UPDATE_RUNNING):
            self._update_task(t, job, idx, task, user, sclass, prio, cpu, mem, disk, diff)
        else:
            stats["malformed_rows.task_events"] += 1

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
        t, _, job, idx, cons = r
        key = (job, idx)
        task = self._tasks.get(key)
        if task is None:
            if not self._keep_task(job, idx):
                self.stats["dropped_task_rows"] += len(cons)
            else:
                self.stats["constraints_unknown_task"] += len(cons)
            return
        task.constraints = cons
        pos = self._batch_adds.get(key)
        if pos is not None:
            self._batch[pos] = replace(self._batch[pos], constraints=cons)
        else:
            self._emit(UpdateTaskConstraints(t, job, idx, cons))

    def _on_usage(self, r: tuple) -> None:
        end, _, start, job, idx, mid, cpu, canon, assigned, maxmem, maxcpu, sampled = r
        stats = self.stats
        if not self._emitting:
            stats["usage_before_window"] += 1
            return
        key = (job, idx)
        if key not in self._tasks:
            self._expire_removed(end)
            if key in self._removed:
                stats["usage_after_remove"] += 1
            elif not self._keep_task(job, idx):
                stats["dropped_task_rows"] += 1
            else:
                stats["usage_unknown_task"] += 1
            return
        if mid is None:
            stats["usage_missing_machine"] += 1
        self._batch.append(UpdateTaskUsedResources(end, job, idx, mid, start, end, cpu, canon, assigned, maxmem,
                                                   maxcpu, sampled))

    def _expire_removed(self, now: int) -> None:
        q, removed, horizon = self._removed_q, self._removed, now - self.options.removed_task_grace_us
        while q and q[0][0] < horizon:
            t, key = q.popleft()
            if removed.get(key) == t:
                del removed[key]
