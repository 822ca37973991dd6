"""cellctl: the Cellbed command line. Every command takes --json; tables by default."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys


from cellbed.domain import errors
from cellbed.cell import cell as cellmod
from cellbed.v1 import node_pb2 as npb
from cellbed.cli.common import ASR_NAMES, Cell, RECORD_COLS, STATE_NAMES, emit, migrate, msg_dict, record_row, table
from cellbed.daemon.san import SanConfig
from cellbed.cell.ssh import inventory, inventory_yaml
from cellbed.cell.cell import health_ok

# --- commands ----------------------------------------------------------------------------
def cmd_cell_up(args) -> None:
    st = cellmod.up(args.cell, args.hosts, accel=args.accel, subnet=args.subnet,
                    host_cpus=[float(x) for x in args.host_cpus.split(",")],
                    host_mem_mib=[int(x) for x in args.host_mem_mib.split(",")], root=args.state_root,
                    monitor_period_s=args.monitor_period_s, ssh=args.ssh or args.bare, bare=args.bare,
                    san=_san_overrides(args.san_set) if args.san else None)
    rows = [{"host": h, **{k: v for k, v in d.items() if k != "netns"}} for h, d in st["hosts"].items()]
    emit(args, st, f"cell {st['name']} up in {st['up_seconds']} s; accel {st['accel']} ({st['accel_reason']}); "
                   f"mqtt {st['mqtt']}\n" + table(rows, ["host", "address", "grpc_port", "cpu_cores", "mem_mib"])
                   + (f"\nssh: ssh -F {st['ssh']['config']} {next(iter(st['hosts']))}" if st.get("ssh") else ""))


def _san_overrides(items: list[str]) -> dict:
    import tomllib
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep:
            raise errors.InvalidArgument(f"--san-set {it!r}: expected key=value")
        out[k] = tomllib.loads(f"v = {v}")["v"]
    SanConfig.from_mapping(out)   # names the key and the range of anything wrong, before the cell is built
    return out


def cmd_cell_inventory(args) -> None:
    st = cellmod.load_state(args.cell, args.state_root)
    if st is None:
        raise errors.NotFound(f"no cell {args.cell!r} under {args.state_root}: run `cellctl cell up --ssh` first")
    try:
        inv = inventory(st, mqtt_host=args.mqtt_host)
    except ValueError as e:
        raise errors.FailedPrecondition(str(e)) from None
    text = json.dumps(inv, indent=1) if args.json else inventory_yaml(inv)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")


def cmd_cell_down(args) -> None:
    removed = cellmod.down(args.cell, args.state_root)
    emit(args, {"removed": removed}, "\n".join(removed) if removed else f"no cell {args.cell!r}: nothing to do")


async def cmd_cell_status(args) -> None:
    c = Cell(args)
    rows = []
    for h, d in c.hosts.items():
        target = f"{d['address']}:{d['grpc_port']}"
        ok = await asyncio.to_thread(health_ok, target)
        rows.append({"host": h, "address": target, "health": "SERVING" if ok else "NOT SERVING",
                     "cpu_cores": d["cpu_cores"], "mem_mib": d["mem_mib"]})
    emit(args, {"cell": c.name, "accel": c.state["accel"], "hosts": rows},
         f"cell {c.name}: accel {c.state['accel']}, mqtt {c.state['mqtt']}\n"
         + table(rows, ["host", "address", "health", "cpu_cores", "mem_mib"]))


def _workload(args) -> npb.Workload:
    w = npb.Workload()
    if args.cpu_load is not None:
        w.cpu_load = args.cpu_load
    if args.wss_mib is not None:
        w.wss_mib = args.wss_mib
    if args.dirty_mib_s is not None:
        if args.dirty_mib_s == "max":
            w.dirty_max = True
        else:
            w.dirty_mib_s = float(args.dirty_mib_s)
    return w


async def cmd_vm_start(args) -> None:
    c = Cell(args)
    name = args.name or f"vm-{os.urandom(3).hex()}"
    w = _workload(args)
    if args.wss_mib is None:
        w.wss_mib = min(32, max(0, args.mem_mib - 80))
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
    emit(args, [msg_dict(s) for s in states], table(rows, list(rows[0].keys()) if rows else []))


async def cmd_migrations(args) -> None:
    c = Cell(args)

    async def one(h):
        async with c.client(h) as cl:
            return (await cl.call("ListMigrations", npb.ListMigrationsRequest())).records
    recs = sorted((r for rs in await asyncio.gather(*(one(h) for h in c.hosts)) for r in rs),
                  key=lambda r: r.start_unix_s)
    emit(args, [msg_dict(r) for r in recs], table([record_row(r) for r in recs], RECORD_COLS))


async def cmd_bench_migration(args) -> None:
    from cellbed.cli.bench import bench_migration
    await bench_migration(Cell(args), args)


# --- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cellctl", description="Cellbed command line")
    ap.add_argument("--cell", default=os.environ.get("CELLBED_CELL", "default"), help="cell name")
    ap.add_argument("--state-root", default=cellmod.DEFAULT_STATE_ROOT, help="where cells keep their state")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)

    cp = sub.add_parser("cell", help="the single-box cell").add_subparsers(dest="sub", required=True)
    p = cp.add_parser("up", help="build a cell of N namespace hosts")
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    p.add_argument("--subnet", default="10.231.0.0/24", help="private subnet the cell owns")
    p.add_argument("--host-cpus", default="0.5", help="CPU capacity per host, cores (one value or one per host)")
    p.add_argument("--host-mem-mib", default="1024", help="guest memory capacity per host, MiB")
    p.add_argument("--monitor-period-s", type=float, default=5.0)
    p.add_argument("--ssh", action="store_true", help="an sshd per host, keys under the cell's state folder")
    p.add_argument("--bare", action="store_true",
                   help="with --ssh: no libvirtd, node daemon or mosquitto; provision the hosts with ansible/")
    p.add_argument("--san", action="store_true", help="MASB: a broker agent on the bridge, SAN in every node daemon")
    p.add_argument("--san-set", action="append", metavar="KEY=VALUE",
                   help="SanConfig override, e.g. max_util=0.8 (repeatable)")
    p.set_defaults(fn=cmd_cell_up)
    p = cp.add_parser("inventory", help="an Ansible inventory for a cell brought up with --ssh")
    p.add_argument("--out", help="write it to this file (default: print)")
    p.add_argument("--mqtt-host", help="the host that runs mosquitto (default: the first)")
    p.set_defaults(fn=cmd_cell_inventory)
    cp.add_parser("down", help="remove exactly what up created").set_defaults(fn=cmd_cell_down)
    cp.add_parser("status", help="hosts and agent health").set_defaults(fn=cmd_cell_status)

    vp = sub.add_parser("vm", help="virtual machines").add_subparsers(dest="sub", required=True)

    def workload_args(p, defaults: bool) -> None:
        p.add_argument("--cpu-load", type=float, default=0.1 if defaults else None, help="fraction of each vCPU, 0..1")
        p.add_argument("--dirty-mib-s", default="0" if defaults else None, help="MiB/s, or max")
        p.add_argument("--wss-mib", type=int, default=None, help="working set, MiB")

    p = vp.add_parser("start")
    p.add_argument("--host", required=True)
    p.add_argument("--name")
    p.add_argument("--mem-mib", type=int, default=128)
    p.add_argument("--vcpus", type=int, default=1)
    p.add_argument("--production", action="store_true")
    p.add_argument("--priority", type=int, default=0)
    workload_args(p, True)
    p.set_defaults(fn=cmd_vm_start)
    vp.add_parser("list").set_defaults(fn=cmd_vm_list)
    p = vp.add_parser("stop")
    p.add_argument("name")
    p.set_defaults(fn=cmd_vm_stop)
    p = vp.add_parser("set-workload")
    p.add_argument("name")
    workload_args(p, False)
    p.set_defaults(fn=cmd_vm_set_workload)
    p = vp.add_parser("migrate")
    p.add_argument("name")
    p.add_argument("--to", required=True)
    add_migration_args(p)
    p.set_defaults(fn=cmd_vm_migrate)
    p = vp.add_parser("abort-migration")
    p.add_argument("name")
    p.set_defaults(fn=cmd_vm_abort)

    sub.add_parser("nodes", help="capacity and usage per host").set_defaults(fn=cmd_nodes)
    sub.add_parser("migrations", help="migration history with measured costs").set_defaults(fn=cmd_migrations)

    bp = sub.add_parser("bench").add_subparsers(dest="sub", required=True)
    p = bp.add_parser("migration", help="sweep memory x dirty rate (x bandwidth)")
    p.add_argument("--mem-mib", default="128,256,512")
    p.add_argument("--dirty-mib-s", default="0,8,32")
    p.add_argument("--bandwidth-mib-s", default="0", help="comma list; 0 = unlimited")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--max-downtime-ms", type=int, default=0)
    p.add_argument("--postcopy", action="store_true")
    p.add_argument("--src", default="h1")
    p.add_argument("--dst", default="h2")
    p.add_argument("--csv", default="migration-bench.csv")
    p.set_defaults(fn=cmd_bench_migration)

    from cellbed.cli import report_cmd, run_cmd
    report_cmd.register(sub)
    run_cmd.register(sub)
    from cellbed.cli import masb_cmd
    masb_cmd.register(sub)
    from cellbed.cli import megha_cmd
    megha_cmd.register(sub)
    return ap


def add_migration_args(p) -> None:
    p.add_argument("--bandwidth-mib-s", type=int, default=0, help="0 = unlimited")
    p.add_argument("--max-downtime-ms", type=int, default=0, help="0 = QEMU default (300 ms)")
    p.add_argument("--auto-converge", action="store_true")
    p.add_argument("--postcopy", action="store_true")
    p.add_argument("--timeout-s", type=float, default=0, help="completion timeout; 0 = daemon default")
    p.add_argument("--timeout-policy", choices=["abort", "auto-converge", "postcopy"], default="abort")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        res = args.fn(args)
        if asyncio.iscoroutine(res):
            asyncio.run(res)
    except errors.CellbedError as e:
        print(f"cellctl: {type(e).__name__} ({e.code.name}): {e}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
