"""cellctl vm start, list, stop, set-workload, migrate and abort-migration; nodes and migrations:
a cell's VMs and hosts through their node daemons."""
from __future__ import annotations

import asyncio
import time
import math
import os

from cellbed.cli.common import (ASR_NAMES, Cell, RECORD_COLS, STATE_NAMES, emit, migrate, msg_dict, record_row,
                                table)
from cellbed.domain import errors, vm as vmdom
from cellbed.v1 import node_pb2 as npb


def _workload(args) -> npb.Workload:
    w = npb.Workload()
    if args.cpu_load is not None:
        w.cpu_load = args.cpu_load
    if args.wss_mib is not None:
        w.wss_mib = args.wss_mib
    if args.dirty_mib_s is not None:
        if math.isinf(args.dirty_mib_s):
            w.dirty_max = True
        else:
            w.dirty_mib_s = args.dirty_mib_s
    return w


async def cmd_vm_start(args) -> None:
    name = args.name or f"vm-{os.urandom(3).hex()}"
    w = _workload(args)
    if args.wss_mib is None:
        w.wss_mib = min(32, vmdom.max_wss_mib(args.mem_mib))
    errors.check_range("--wss-mib", w.wss_mib, 0, vmdom.max_wss_mib(args.mem_mib), "MiB (the guest's memory - 80)")
    c = Cell(args)
    spec = npb.VmSpec(name=name, mem_mib=args.mem_mib, vcpus=args.vcpus, workload=w, production=args.production,
                     priority=args.priority)
    async with c.client(args.host) as cl:
        vm = (await cl.call("StartVm", npb.StartVmRequest(spec=spec), timeout=180)).vm
    emit(args, msg_dict(vm), f"started {name} on {args.host}: boot-to-workload {vm.boot_to_workload_s:.2f} s, "
                             f"heartbeat {vm.heartbeat}")


def vm_row(v: npb.VmInfo) -> dict:
    w = v.spec.workload
    return {"name": v.spec.name, "host": v.host, "state": STATE_NAMES[v.state], "reason": v.state_reason,
            "mem_mib": v.spec.mem_mib, "vcpus": v.spec.vcpus, "cpu_load": f"{w.cpu_load:g}",
            "wss_mib": w.wss_mib, "dirty": "max" if w.dirty_max else f"{w.dirty_mib_s:g}",
            "cpu_used": f"{v.cpu_used_cores:.2f}", "rss_mib": f"{v.rss_mib:.0f}",
            "dirty_meas": f"{v.dirty_rate_mib_s:.1f}" if v.dirty_rate_mib_s >= 0 else "-",
            "heartbeat": v.heartbeat}


async def cmd_vm_list(args) -> None:
    vms = await Cell(args).all_vms()
    emit(args, [msg_dict(v) for v in vms], table([vm_row(v) for v in vms],
         ["name", "host", "state", "reason", "mem_mib", "cpu_load", "wss_mib", "dirty", "cpu_used", "rss_mib",
          "dirty_meas", "heartbeat"]))


async def cmd_vm_stop(args) -> None:
    c = Cell(args)
    v = await c.find_vm(args.name)
    async with c.client(v.host) as cl:
        await cl.call("StopVm", npb.StopVmRequest(name=args.name), timeout=60)
    emit(args, {"stopped": args.name, "host": v.host}, f"stopped {args.name} on {v.host}")


async def cmd_vm_set_workload(args) -> None:
    c = Cell(args)
    v = await c.find_vm(args.name)
    async with c.client(v.host) as cl:
        vm = (await cl.call("SetWorkload", npb.SetWorkloadRequest(name=args.name, workload=_workload(args)))).vm
    emit(args, msg_dict(vm), table([vm_row(vm)], ["name", "host", "cpu_load", "wss_mib", "dirty", "heartbeat"]))


def _options(args) -> npb.MigrationOptions:
    pol = {"abort": npb.TIMEOUT_POLICY_ABORT, "auto-converge": npb.TIMEOUT_POLICY_AUTO_CONVERGE,
           "postcopy": npb.TIMEOUT_POLICY_POSTCOPY}[args.timeout_policy]
    return npb.MigrationOptions(bandwidth_mib_s=args.bandwidth_mib_s, max_downtime_ms=args.max_downtime_ms,
                               auto_converge=args.auto_converge, postcopy=args.postcopy,
                               completion_timeout_s=args.timeout_s, timeout_policy=pol)


async def cmd_vm_migrate(args) -> None:
    c = Cell(args)
    rec = await migrate(c, args.name, args.to, _options(args), show_progress=not args.json)
    emit(args, msg_dict(rec), table([record_row(rec)], RECORD_COLS) + f"\n{rec.detail}")
    if rec.outcome != npb.MIGRATION_OUTCOME_SUCCEEDED:
        raise SystemExit(3)


async def cmd_vm_abort(args) -> None:
    c = Cell(args)
    v = await c.find_vm(args.name)
    async with c.client(v.host) as cl:
        await cl.call("AbortMigration", npb.AbortMigrationRequest(name=args.name))
    emit(args, {"aborted": args.name}, f"abort requested for {args.name} on {v.host}")


async def cmd_nodes(args) -> None:
    c = Cell(args)

    async def one(h):
        async with c.client(h) as cl:
            return (await cl.call("GetHostState", npb.GetHostStateRequest())).state
    states = await asyncio.gather(*(one(h) for h in c.hosts))
    rows = [{"host": s.host, "cpu_cap": f"{s.capacity.cpu_cores:.2f}", "mem_cap": s.capacity.mem_mib,
             "cpu_req": f"{s.cpu_req_cores:.2f}", "cpu_used": f"{s.cpu_used_cores:.2f}",
             "cg_cpu": f"{s.cgroup_cpu_cores:.2f}", "mem_alloc": s.mem_alloc_mib, "cg_mem_mib": f"{s.cgroup_mem_mib:.0f}",
             "vms": s.vm_count, "class": ASR_NAMES.get(s.asr_class, "?"), "mig_out": s.migrations_out,
             "mig_in": s.migrations_in,
             "daemon_rss": f"{s.daemon_rss_mib:.0f}", "daemon_cpu": f"{s.daemon_cpu * 100:.2f}%"} for s in states]
    text = table(rows, list(rows[0].keys()) if rows else [])
    leases = [{"host": s.host, "migration": le.migration_id, "vm": le.vm, "owner": le.owner,
               "expires_in_s": f"{le.expires_unix_s - time.time():.0f}"} for s in states for le in s.leases]
    if leases:
        text += "\n\nleases (reservations for incoming migrations):\n" + table(leases, list(leases[0].keys()))
    open_ = [f"{s.host}: {u}" for s in states for u in s.unresolved]
    if open_:
        text += "\n\nmigrations not finished yet (reconciling):\n" + "\n".join(open_)
    emit(args, [msg_dict(s) for s in states], text)


async def cmd_migrations(args) -> None:
    c = Cell(args)

    async def one(h):
        async with c.client(h) as cl:
            return (await cl.call("ListMigrations", npb.ListMigrationsRequest())).records
    recs = sorted((r for rs in await asyncio.gather(*(one(h) for h in c.hosts)) for r in rs),
                  key=lambda r: r.start_unix_s)
    emit(args, [msg_dict(r) for r in recs], table([record_row(r) for r in recs], RECORD_COLS))

