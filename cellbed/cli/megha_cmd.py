"""cellctl commands for Megha: `submit`, `task`, `gm view`, `lm partitions` and `queues`.

The agents are found through the controller's TOML (--controller, default $CELLBED_CONTROLLER
or ./controller.toml, else the one `cellctl cell up --megha` wrote for the cell named by --cell),
or named directly with --gm / --lm HOST:PORT. Without --user, a task is the user "default"'s when
the config has a queue for it (a cell brought up with --megha has).
"""
from __future__ import annotations

import math
import os
import re

from cellbed.cell.record import load_state
from cellbed.cell.megha import DEFAULT_USER
from cellbed.cli import common
from cellbed.controller.megha.config import ControllerConfig
from cellbed.domain import errors, wire
from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb

STATE = {v: k.replace("TASK_STATE_", "") for k, v in meghapb.TaskState.items()}
ROLE = {v: k.replace("LM_ROLE_", "").lower() for k, v in meghapb.LmRole.items()}
_CONSTRAINT = re.compile(r"^([A-Za-z0-9_.:-]+)\s*(!=|=|<|>)\s*(.*)$")
_OPS = {"=": ConstraintOp.EQUAL, "!=": ConstraintOp.NOT_EQUAL, "<": ConstraintOp.LESS_THAN,
        ">": ConstraintOp.GREATER_THAN}


def parse_constraint(text: str) -> Constraint:
    """"k=v", "k!=v", "k<n" or "k>n"; a value of digits is an integer."""
    m = _CONSTRAINT.match(text.strip())
    if not m:
        raise errors.InvalidArgument(f"--constraint {text!r}: allowed KEY=VALUE, KEY!=VALUE, KEY<N or KEY>N")
    key, op, value = m.groups()
    v: int | str = int(value) if re.fullmatch(r"-?\d+", value) else value
    if op in "<>" and not isinstance(v, int):
        raise errors.InvalidArgument(f"--constraint {text!r}: {op} needs an integer value")
    return Constraint(key, _OPS[op], v)


class Targets:
    """Where the GMs and LMs listen: the controller's config, or --gm/--lm."""

    def __init__(self, args) -> None:
        self.args = args
        self.cfg = None
        path = getattr(args, "controller", "") or os.environ.get("CELLBED_CONTROLLER", "")
        if not path:
            path = "controller.toml"
            if not (os.path.exists(path) or getattr(args, "gm", "") or getattr(args, "lm", "")):
                path = self._cell_config(args) or path
        if os.path.exists(path):
            self.cfg = ControllerConfig.load(path)
        self.path = path
        self.t = GrpcTransport(lambda n: n, RealClock(), security=common.security_for(args))

    @staticmethod
    def _cell_config(args) -> str:
        """The controller config recorded by `cellctl cell up --megha` for the cell args.cell, or ""."""
        st = load_state(getattr(args, "cell", ""), args.state_root) if getattr(args, "cell", "") else None
        return (st or {}).get("megha", {}).get("controller", "")

    def _need(self, what: str):
        if self.cfg is None:
            raise errors.NotFound(f"no controller config at {self.path}: give --controller PATH or --{what} HOST:PORT, "
                                  f"or bring the cell up with `cellctl cell up --megha`")
        return self.cfg

    def default_user(self) -> str:
        """The user of a task submitted without --user: "default" if the config has its queue."""
        has = self.cfg is not None and any(q.user == DEFAULT_USER for q in self.cfg.queues)
        return DEFAULT_USER if has else ""

    def gms(self) -> list[tuple[str, str]]:
        if getattr(self.args, "gm", ""):
            return [(self.args.gm, self.args.gm)]
        cfg = self._need("gm")
        return [(g, cfg.address(g)) for g in cfg.gms]

    def gm_for(self, user: str) -> str:
        if getattr(self.args, "gm", ""):
            return self.args.gm
        cfg = self._need("gm")
        return cfg.address(cfg.gm_of(user) if user else cfg.gms[0])

    def lms(self) -> list[tuple[str, list[str]]]:
        if getattr(self.args, "lm", ""):
            return [(self.args.lm, [self.args.lm])]
        cfg = self._need("lm")
        return [(lm.name, [cfg.address(i) for i in lm.instances]) for lm in cfg.lms]

    async def call(self, target: str, method: str, msg, timeout: float = 10.0):
        return await self.t.request(target, method, msg, timeout=timeout)

    async def close(self) -> None:
        await self.t.close()


def alloc_line(a: meghapb.AllocationTime) -> str:
    return (f"allocation time {a.total_ms:.1f} ms = framework queueing {a.framework_queue_ms:.1f} + processing "
            f"{a.processing_ms:.2f} + worker queueing {a.worker_queue_ms:.1f} + communication {a.communication_ms:.1f} ms"
            f" ({a.attempts} attempt{'s' if a.attempts != 1 else ''}); VM boot {a.boot_ms:.0f} ms (separate)")


def status_text(s: meghapb.TaskStatus) -> str:
    head = f"task {s.name} (user {s.user}, GM {s.gm}): {STATE.get(s.state, s.state)}"
    if s.state == meghapb.TASK_STATE_QUEUED:
        return head + f", position {s.queue_position} in its queue" + (f": {s.detail}" if s.detail else "")
    p = s.placement
    lines = [head + (f" on {p.host} ({p.lm} via {p.lm_instance}, partition of {p.partition}"
                     + (", repartitioned" if p.repartitioned else "")
                     + (f", preempted {', '.join(p.preempted)}" if p.preempted else "") + ")" if p.host else "")]
    if s.allocation.start_unix_s:
        lines.append(alloc_line(s.allocation))
    if s.detail:
        lines.append(s.detail)
    return "\n".join(lines)


async def cmd_submit(args) -> None:
    for name, v, unit in (("--cpu", args.cpu, "cores"), ("--mem", args.mem, "MiB")):
        if not (math.isfinite(v) and v > 0):
            raise errors.InvalidArgument(f"{name}={v!r} is out of range: allowed > 0 {unit}")
    cons = [parse_constraint(c) for c in args.constraint]
    tg = Targets(args)
    try:
        user = args.user or tg.default_user()
        priority = args.priority if args.priority is not None else (10 if args.production else 0)
        task = meghapb.MeghaTask(name=args.name, user=user, request=wire.resources(args.cpu, args.mem),
                                 constraints=wire.constraints_pb(cons), production=args.production, priority=priority,
                                 duration_s=args.duration_s, vcpus=args.vcpus,
                                 workload=npb.Workload(cpu_load=args.cpu_load, wss_mib=args.wss_mib))
        r = await tg.call(tg.gm_for(user), "GlobalMaster/Submit",
                          meghapb.SubmitRequest(task=task, wait_s=args.wait_s), timeout=args.wait_s + 15)
    finally:
        await tg.close()
    common.emit(args, common.msg_dict(r.status), status_text(r.status))


async def cmd_task(args) -> None:
    tg = Targets(args)
    try:
        last = None
        for _, addr in tg.gms():
            try:
                r = await tg.call(addr, "GlobalMaster/GetTask", meghapb.GetTaskRequest(name=args.name, wait_s=args.wait_s),
                                  timeout=args.wait_s + 10)
                common.emit(args, common.msg_dict(r.status), status_text(r.status))
                return
            except errors.NotFound as e:
                last = e
        raise last or errors.NotFound(f"task {args.name!r} is unknown")
    finally:
        await tg.close()


async def cmd_gm_view(args) -> None:
    tg = Targets(args)
    out, texts = [], []
    try:
        for name, addr in tg.gms()[: None if args.all else 1]:
            v = await tg.call(addr, "GlobalMaster/GetView", meghapb.GetViewRequest())
            out.append(common.msg_dict(v))
            rows = []
            for lm in v.lms:
                for p in lm.partitions:
                    rows.append({"lm": lm.lm, "instance": lm.instance, "epoch": lm.epoch,
                                 "staleness_s": f"{lm.staleness_s:.2f}" if lm.staleness_s >= 0 else "never",
                                 "partition": p.gm + (" (own)" if p.internal else ""), "nodes": p.nodes,
                                 "logical": p.logical_nodes, "free_cpu": f"{p.free.cpu_cores:.2f}",
                                 "cap_cpu": f"{p.capacity.cpu_cores:.2f}", "free_mem": f"{p.free.mem_mib:.0f}",
                                 "cap_mem": f"{p.capacity.mem_mib:.0f}"})
            texts.append(f"GM {v.gm}: view of {len(v.lms)} LM(s)\n"
                         + common.table(rows, ["lm", "instance", "epoch", "staleness_s", "partition", "nodes", "logical",
                                          "free_cpu", "cap_cpu", "free_mem", "cap_mem"])
                         + "\ncounters: " + ", ".join(f"{k}={x}" for k, x in sorted(v.counters.items())))
    finally:
        await tg.close()
    common.emit(args, out if len(out) > 1 else out[0], "\n\n".join(texts))


async def cmd_lm_partitions(args) -> None:
    tg = Targets(args)
    out, texts = [], []
    try:
        for lm, addrs in tg.lms():
            r, err = None, None
            for a in addrs:                       # the active instance answers with its partitions
                try:
                    cand = await tg.call(a, "LocalMaster/ListPartitions", meghapb.ListPartitionsRequest())
                except errors.CellbedError as e:
                    err = e
                    continue
                if r is None or cand.role == meghapb.LM_ROLE_ACTIVE:
                    r = cand
            if r is None:
                raise err
            out.append(common.msg_dict(r))
            rows = [{"partition": p.gm, "host": s.host, "node": f"N' ({s.task})" if s.logical else "N",
                     "cap_cpu": f"{s.capacity.cpu_cores:.2f}", "used_cpu": f"{s.used.cpu_cores:.2f}",
                     "cap_mem": f"{s.capacity.mem_mib:.0f}", "used_mem": f"{s.used.mem_mib:.0f}", "tasks": s.tasks}
                    for p in r.partitions for s in p.slices]
            texts.append(f"LM {r.lm}: instance {r.instance} ({ROLE.get(r.role, '?')}, epoch {r.epoch})\n"
                         + common.table(rows, ["partition", "host", "node", "cap_cpu", "used_cpu", "cap_mem", "used_mem", "tasks"])
                         + "\ncounters: " + ", ".join(f"{k}={x}" for k, x in sorted(r.counters.items())))
    finally:
        await tg.close()
    common.emit(args, out, "\n\n".join(texts))


async def cmd_queues(args) -> None:
    tg = Targets(args)
    merged: dict[str, meghapb.QueueInfo] = {}
    cap = None
    try:
        for name, addr in tg.gms():
            r = await tg.call(addr, "GlobalMaster/ListQueues", meghapb.ListQueuesRequest())
            cap = r.capacity
            for q in r.queues:
                if q.gm == r.gm or q.user not in merged:     # the serving GM knows the queue's length
                    merged[q.user] = q
    finally:
        await tg.close()
    rows = [{"user": q.user, "share": f"{q.share:.0%}", "gm": q.gm, "queued": q.length, "running": q.running,
             "usage": f"{q.usage_share:.1%}", "cpu": f"{q.usage.cpu_cores:.2f}", "mem_mib": f"{q.usage.mem_mib:.0f}",
             "placed": q.placed, "preempted": q.preempted, "preempt_attempts": q.preemption_attempts,
             "preemptions": q.preemptions, "repartitions": q.repartitions} for q in merged.values()]
    text = (common.table(rows, ["user", "share", "gm", "queued", "running", "usage", "cpu", "mem_mib", "placed", "preempted",
                           "preempt_attempts", "preemptions", "repartitions"])
            + (f"\ncell capacity {cap.cpu_cores:.2f} cores, {cap.mem_mib:.0f} MiB" if cap is not None else ""))
    common.emit(args, [common.msg_dict(q) for q in merged.values()], text)
