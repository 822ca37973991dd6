"""cellctl cell up, down, status and inventory: the single-box cell (cellbed/cell/)."""
from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import tomllib

from cellbed.cell import cell as cellmod
from cellbed.cell import megha as meghamod
from cellbed.cell.ssh import inventory, inventory_yaml
from cellbed.cli.common import Cell, emit, table
from cellbed.daemon.san import SanConfig
from cellbed.domain import errors
from cellbed.runtime.plugins.config import table_from_items


def cmd_cell_up(args) -> None:
    st = cellmod.up(args.cell, args.hosts, accel=args.accel, subnet=args.subnet,
                    host_cpus=args.host_cpus, host_mem_mib=args.host_mem_mib, root=args.state_root,
                    monitor_period_s=args.monitor_period_s, ssh=args.ssh or args.bare, bare=args.bare,
                    san=_san_overrides(args.san_set) if args.san else None, megha=_megha_options(args),
                    insecure=args.insecure, policy=table_from_items(args.policy), explain=args.explain)
    if st.get("insecure"):
        print("cellctl: WARNING: cell is INSECURE: plaintext, unauthenticated gRPC, MQTT and libvirt; anyone who "
              "reaches its subnet can start, stop and migrate VMs", file=sys.stderr)
    rows = [{"host": h, **{k: v for k, v in d.items() if k != "netns"}} for h, d in st["hosts"].items()]
    emit(args, st, f"cell {st['name']} up in {st['up_seconds']} s; accel {st['accel']} ({st['accel_reason']}); "
                   f"mqtt {st['mqtt']}\n" + table(rows, ["host", "address", "grpc_port", "cpu_cores", "mem_mib"])
                   + (f"\nssh: ssh -F {st['ssh']['config']} {next(iter(st['hosts']))}" if st.get("ssh") else "")
                   + (_megha_text(st["megha"]) if st.get("megha") else ""))


def _megha_options(args) -> dict | None:
    """--megha [--gms N] [--lms M] [--standby] (cellbed/cell/megha.py checks the ranges)."""
    if not getattr(args, "megha", False):
        return None
    return {"gms": getattr(args, "gms", 1), "lms": getattr(args, "lms", 1), "standby": getattr(args, "standby", False)}


def _megha_text(m: dict) -> str:
    lms = "; ".join(f"{lm} on {','.join(hosts)}: " + ", ".join(f"{i} {m['lms'][i]}" for i in m["instances"][lm])
                    for lm, hosts in m["partitions"].items())
    return (f"\nmegha: {', '.join(f'{g} {a}' for g, a in m['gms'].items())}; {lms}; "
            f"users {', '.join(f'{u} ({g})' for u, g in m['users'].items())}\n"
            f"controller config {m['controller']} (used by submit, task, gm, lm and queues)")


def _san_overrides(items: list[str]) -> dict:
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
    health = functools.partial(cellmod.health_ok, security=c.security)
    rows = []
    for h, d in c.hosts.items():
        target = f"{d['address']}:{d['grpc_port']}"
        ok = await asyncio.to_thread(health, target)
        rows.append({"host": h, "address": target, "health": "SERVING" if ok else "NOT SERVING",
                     "cpu_cores": d["cpu_cores"], "mem_mib": d["mem_mib"]})
    m = c.state.get("megha")
    agents = await asyncio.to_thread(meghamod.status_rows, m, health) if m else []
    security = "INSECURE (plaintext, unauthenticated)" if c.state.get("insecure") else "mTLS (cell CA)"
    emit(args, {"cell": c.name, "accel": c.state["accel"], "security": security, "hosts": rows,
                **({"megha": agents} if m else {})},
         f"cell {c.name}: accel {c.state['accel']}, mqtt {c.state['mqtt']}, security {security}\n"
         + table(rows, ["host", "address", "health", "cpu_cores", "mem_mib"])
         + ("\n" + table(agents, ["agent", "address", "health", "pid", "restarts", "hosts"]) if m else ""))

