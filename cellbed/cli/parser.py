"""cellctl's command line: every verb's arguments, and which sub-command module's function runs it.

Kept apart from the sub-command modules so that building the parser imports none of them:
`handler(module, function)` (given by cellbed/cli/main.py) loads the module only when the verb runs.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from cellbed.cell.record import DEFAULT_STATE_ROOT

Handler = Callable[[str, str], Callable[[argparse.Namespace], Any]]
"""(sub-command module under cellbed.cli, function name) -> the function to run."""


def build_parser(handler: Handler) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cellctl", description="Cellbed command line")
    ap.add_argument("--cell", default=os.environ.get("CELLBED_CELL", "default"), help="cell name")
    ap.add_argument("--state-root", default=DEFAULT_STATE_ROOT, help="where cells keep their state")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _cell(sub, handler)
    _vm(sub, handler)
    sub.add_parser("nodes", help="capacity and usage per host").set_defaults(fn=handler("vm_cmd", "cmd_nodes"))
    sub.add_parser("migrations", help="migration history with measured costs").set_defaults(
        fn=handler("vm_cmd", "cmd_migrations"))
    _bench(sub, handler)
    _report(sub, handler)
    _run(sub, handler)
    _masb(sub, handler)
    _megha(sub, handler)
    return ap


# --- the cell and its VMs ----------------------------------------------------------------
def _cell(sub, handler: Handler) -> None:
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
    p.set_defaults(fn=handler("cell_cmd", "cmd_cell_up"))
    p = cp.add_parser("inventory", help="an Ansible inventory for a cell brought up with --ssh")
    p.add_argument("--out", help="write it to this file (default: print)")
    p.add_argument("--mqtt-host", help="the host that runs mosquitto (default: the first)")
    p.set_defaults(fn=handler("cell_cmd", "cmd_cell_inventory"))
    cp.add_parser("down", help="remove exactly what up created").set_defaults(fn=handler("cell_cmd", "cmd_cell_down"))
    cp.add_parser("status", help="hosts and agent health").set_defaults(fn=handler("cell_cmd", "cmd_cell_status"))


def _workload_args(p, defaults: bool) -> None:
    p.add_argument("--cpu-load", type=float, default=0.1 if defaults else None, help="fraction of each vCPU, 0..1")
    p.add_argument("--dirty-mib-s", default="0" if defaults else None, help="MiB/s, or max")
    p.add_argument("--wss-mib", type=int, default=None, help="working set, MiB")


def add_migration_args(p) -> None:
    p.add_argument("--bandwidth-mib-s", type=int, default=0, help="0 = unlimited")
    p.add_argument("--max-downtime-ms", type=int, default=0, help="0 = QEMU default (300 ms)")
    p.add_argument("--auto-converge", action="store_true")
    p.add_argument("--postcopy", action="store_true")
    p.add_argument("--timeout-s", type=float, default=0, help="completion timeout; 0 = daemon default")
    p.add_argument("--timeout-policy", choices=["abort", "auto-converge", "postcopy"], default="abort")


def _vm(sub, handler: Handler) -> None:
    vp = sub.add_parser("vm", help="virtual machines").add_subparsers(dest="sub", required=True)
    p = vp.add_parser("start")
    p.add_argument("--host", required=True)
    p.add_argument("--name")
    p.add_argument("--mem-mib", type=int, default=128)
    p.add_argument("--vcpus", type=int, default=1)
    p.add_argument("--production", action="store_true")
    p.add_argument("--priority", type=int, default=0)
    _workload_args(p, True)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_start"))
    vp.add_parser("list").set_defaults(fn=handler("vm_cmd", "cmd_vm_list"))
    p = vp.add_parser("stop")
    p.add_argument("name")
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_stop"))
    p = vp.add_parser("set-workload")
    p.add_argument("name")
    _workload_args(p, False)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_set_workload"))
    p = vp.add_parser("migrate")
    p.add_argument("name")
    p.add_argument("--to", required=True)
    add_migration_args(p)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_migrate"))
    p = vp.add_parser("abort-migration")
    p.add_argument("name")
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_abort"))


def _bench(sub, handler: Handler) -> None:
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
    p.set_defaults(fn=handler("bench", "cmd_bench_migration"))


# --- experiments -------------------------------------------------------------------------
def _report(sub, handler: Handler) -> None:
    p = sub.add_parser(
        "report", help="report.md + PNG plots for a results folder, or a comparison of several",
        description="One DIR: write report.md, summary.json and the plots into DIR (or --out). "
                    "Several DIRs: side-by-side tables, comparison.csv and overlaid plots into --out. "
                    "Folders whose events.jsonl lacks run_completed are refused.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results folders written by cellctl run")
    p.add_argument("--out", metavar="DIR", help="where to write (one run: default its folder; several: required)")
    p.set_defaults(fn=handler("report_cmd", "cmd_report"))


def _run(sub, handler: Handler) -> None:
    p = sub.add_parser(
        "run", help="run a scenario (model or real cell) into a results folder with its report",
        description="Run SCENARIO.toml and write manifest.json, events.jsonl, ticks.csv, migrations.csv, "
                    "allocations.csv and report.md with plots into --out. --set overrides any scenario key "
                    "(dotted, e.g. run.seed=7, cell.nodes=500, policy.san.enabled=false).")
    p.add_argument("scenario", metavar="SCENARIO.toml")
    p.add_argument("--out", metavar="DIR", help="results folder (default: results/<run name>-<UTC time>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key (repeatable)")
    p.add_argument("--overwrite", action="store_true", help="reuse --out even if it already holds a run")
    p.add_argument("--no-report", action="store_true", help="skip report.md and the plots (cellctl report later)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", metavar="FROM:TO",
                   help="cProfile the window FROM:TO of simulated minutes (model cells) into "
                        "profile.pstats/.txt/.json in the results folder")
    p.set_defaults(fn=handler("run_cmd", "cmd_run"))


# --- MASB and Megha ----------------------------------------------------------------------
def _masb(sub, handler: Handler) -> None:
    bp = sub.add_parser("broker", help="MASB broker agents").add_subparsers(dest="sub", required=True)
    p = bp.add_parser("cache", help="what a broker believes: node, age, capacity, used, class")
    p.add_argument("--broker", default="", help="HOST:PORT (default: the cell's broker)")
    p.set_defaults(fn=handler("masb_cmd", "cmd_broker_cache"))
    p = sub.add_parser("san", help="active and recent SAN negotiations on each host")
    p.add_argument("--limit", type=int, default=20, help="recent negotiations per host")
    p.set_defaults(fn=handler("masb_cmd", "cmd_san"))


def _megha_common(p, gm: bool = True, lm: bool = False) -> None:
    p.add_argument("--controller", default="", help="controller TOML (default $CELLBED_CONTROLLER or ./controller.toml)")
    if gm:
        p.add_argument("--gm", default="", help="a GM's HOST:PORT (instead of the controller config)")
    if lm:
        p.add_argument("--lm", default="", help="an LM's HOST:PORT (instead of the controller config)")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")


def _megha(sub, handler: Handler) -> None:
    p = sub.add_parser("submit", help="submit a task to Megha; prints its placement and allocation time")
    p.add_argument("--cpu", type=float, required=True, help="requested CPU, cores")
    p.add_argument("--mem", type=float, required=True, help="requested memory, MiB (the VM's memory)")
    p.add_argument("--constraint", action="append", default=[], metavar="K=V",
                   help="placement constraint on a host attribute: K=V, K!=V, K<N, K>N (repeatable)")
    p.add_argument("--user", default="", help="owner; must have a queue in the controller config")
    p.add_argument("--production", action="store_true", help="production task (priority 10 unless --priority)")
    p.add_argument("--priority", type=int, default=None, help="0..11")
    p.add_argument("--name", default="", help="task id = VM name (default: the GM assigns one)")
    p.add_argument("--duration-s", type=float, default=0.0, help="run time, s; 0 = until stopped")
    p.add_argument("--vcpus", type=int, default=0, help="vCPUs (default ceil(--cpu))")
    p.add_argument("--cpu-load", type=float, default=0.0, help="guest workload CPU fraction per vCPU, 0..1")
    p.add_argument("--wss-mib", type=int, default=0, help="guest working set, MiB")
    p.add_argument("--wait-s", type=float, default=180.0, help="wait this long for the task to start, s")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_submit"))
    p = sub.add_parser("task", help="a Megha task's status: queue position and reason, or placement and allocation time")
    p.add_argument("name")
    p.add_argument("--wait-s", type=float, default=0.0, help="wait this long for it to start, s")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_task"))
    gp = sub.add_parser("gm", help="Megha Global Masters").add_subparsers(dest="sub", required=True)
    p = gp.add_parser("view", help="a GM's view of every LM, with its staleness, and its counters")
    p.add_argument("--all", action="store_true", help="every GM in the controller config")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_gm_view"))
    lp = sub.add_parser("lm", help="Megha Local Masters").add_subparsers(dest="sub", required=True)
    p = lp.add_parser("partitions", help="each LM's partitions: nodes N and logical nodes N', with use and counters")
    _megha_common(p, gm=False, lm=True)
    p.set_defaults(fn=handler("megha_cmd", "cmd_lm_partitions"))
    p = sub.add_parser("queues", help="users' shares, usage, queue lengths and preemptions")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_queues"))
