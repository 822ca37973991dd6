"""cellctl's command line: every verb's arguments, and which sub-command module's function runs it.

Kept apart from the sub-command modules so that building the parser imports none of them:
`handler(module, function)` (given by cellbed/cli/main.py) loads the module only when the verb runs.

Conventions (as kubectl and virsh users type them):
- the global options (--json, --cell, --state-root, -v) are accepted before or after the verb, on
  every sub-command: each sub-parser inherits them with a suppressed default, so a value given
  after the verb wins and one not given leaves the top-level default;
- every value is checked here, before any call (cellbed/cli/argtypes.py), and a refusal is one line
  naming the flag and the allowed range, exit code 2.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable, NoReturn

from cellbed.cell.record import DEFAULT_STATE_ROOT
from cellbed.cli.argtypes import (explain_share, address, dask_address, dirty_rate, float_in, host_name, int_in, key_value, list_of,
                                  on_off, or_blank, vm_name)
from cellbed.domain import vm as vmdom
from cellbed.domain.identity import Role

Handler = Callable[[str, str], Callable[[argparse.Namespace], Any]]
"""(sub-command module under cellbed.cli, function name) -> the function to run."""

DEFAULT_CELL = "default"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the command, the flag, what is allowed), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _global_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    d = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p.add_argument("--cell", default=d(os.environ.get("CELLBED_CELL", DEFAULT_CELL)),
                   help=f"cell name (default ${{CELLBED_CELL}} or {DEFAULT_CELL})")
    p.add_argument("--state-root", default=d(os.environ.get("CELLBED_STATE_ROOT", DEFAULT_STATE_ROOT)),
                   help=f"where cells keep their state (default $CELLBED_STATE_ROOT or {DEFAULT_STATE_ROOT})")
    p.add_argument("--json", action="store_true", default=d(False), help="machine-readable output")
    p.add_argument("-v", "--verbose", action="store_true", default=d(False),
                   help="debug logging, and a traceback on unexpected errors")


_COMMON = Parser(add_help=False)
_global_options(_COMMON, defaults=False)


def _add(sub, name: str, **kw) -> argparse.ArgumentParser:
    """A sub-command that also takes the global options after the verb."""
    return sub.add_parser(name, parents=[_COMMON], **kw)


def _group(sub, name: str, help: str) -> Any:
    return _add(sub, name, help=help).add_subparsers(dest="sub", required=True, metavar="COMMAND")


def build_parser(handler: Handler) -> argparse.ArgumentParser:
    ap = Parser(prog="cellctl", description="Cellbed command line")
    _global_options(ap, defaults=True)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _cell(sub, handler)
    _vm(sub, handler)
    _add(sub, "nodes", help="capacity and usage per host").set_defaults(fn=handler("vm_cmd", "cmd_nodes"))
    _add(sub, "migrations", help="migration history with measured costs").set_defaults(
        fn=handler("vm_cmd", "cmd_migrations"))
    _bench(sub, handler)
    _report(sub, handler)
    _run(sub, handler)
    _sweep(sub, handler)
    _compare(sub, handler)
    _chaos(sub, handler)
    _masb(sub, handler)
    _megha(sub, handler)
    _pki(sub, handler)
    _policy(sub, handler)
    p = _add(sub, "explain", help="one explained decision of a results folder (decisions.jsonl): why this host")
    p.add_argument("results", help="a results folder (or its decisions.jsonl)")
    p.add_argument("id", help="the decision's id")
    p.set_defaults(fn=handler("explain_cmd", "cmd_explain"))
    _ui(sub, handler)
    return ap


def _policy(sub, handler: Handler) -> None:
    pp = _group(sub, "policy", "scheduling policies: the stages, what is installed, a contract check")
    p = _add(pp, "list", help="every stage, the key that selects it and the policies installed for it")
    p.set_defaults(fn=handler("policy_cmd", "cmd_list"))
    p = _add(pp, "check", help="fuzz a policy against its stage's contract (exit 1 on a violation)",
             description="Call the policy on generated inputs of its stage (hypothesis) and report each kind of "
                         "violation with a minimal input: a broken contract, an exception, a changed input, a "
                         "different answer for the same input and rng seed, a call over the budget.")
    p.add_argument("ref", help="NAME (entry point), package.module:attr or path/file.py:attr")
    p.add_argument("--stage", default="", help="the stage's key (e.g. overload, realloc_score); default: the "
                                                "stage the policy declares")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a parameter (repeatable)")
    p.add_argument("--examples", type=int_in(10, 100_000), default=300, help="inputs per kind (default 300)")
    p.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0)
    p.add_argument("--budget-ms", type=float_in(0.1, 600_000.0), default=1000.0, help="per call (default 1000)")
    p.set_defaults(fn=handler("policy_cmd", "cmd_check"))


# --- the cell and its VMs ----------------------------------------------------------------
def _cell(sub, handler: Handler) -> None:
    cp = _group(sub, "cell", "the single-box cell")
    p = _add(cp, "up", help="build a cell of N namespace hosts")
    p.add_argument("--hosts", type=int_in(1, 32), default=3)
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    p.add_argument("--subnet", default="10.231.0.0/24", help="private subnet the cell owns")
    p.add_argument("--host-cpus", type=list_of(float_in(0.05, 64, "cores"), 32), default=[0.5],
                   help="CPU capacity per host, cores (one value or one per host, comma-separated)")
    p.add_argument("--host-mem-mib", type=list_of(int_in(128, 1 << 20, "MiB"), 32), default=[1024],
                   help="guest memory capacity per host, MiB (one value or one per host)")
    p.add_argument("--monitor-period-s", type=float_in(0.1, 3600, "s"), default=5.0)
    p.add_argument("--ssh", action="store_true", help="an sshd per host, keys under the cell's state folder")
    p.add_argument("--bare", action="store_true",
                   help="with --ssh: no libvirtd, node daemon or mosquitto; provision the hosts with ansible/")
    p.add_argument("--san", action="store_true", help="MASB: a broker agent on the bridge, SAN in every node daemon")
    p.add_argument("--san-set", action="append", type=key_value, metavar="KEY=VALUE",
                   help="SanConfig override, e.g. max_util=0.8 (repeatable)")
    p.add_argument("--policy", action="append", default=[], metavar="STAGE=REF",
                   help="a stage's policy for every agent: STAGE=NAME|module:attr|file.py:attr, or a parameter "
                        "STAGE.PARAM=VALUE (repeatable; `cellctl policy list` shows the stages)")
    p.add_argument("--megha", action="store_true",
                   help="Megha: GMs and LMs (cellbed-controller) on the bridge, the hosts partitioned among the LMs")
    p.add_argument("--gms", type=int_in(1, 8), default=1, help="with --megha: Global Masters")
    p.add_argument("--lms", type=int_in(1, 32), default=1, help="with --megha: Local Masters (at most one per host)")
    p.add_argument("--standby", action="store_true", help="with --megha: a standby instance for every LM")
    p.add_argument("--explain", type=explain_share, default=0.01, metavar="all|SHARE",
                   help="the share of SAN rounds and Megha placements the agents explain (default 1 %%)")
    p.add_argument("--insecure", action="store_true",
                   help="no CA: plaintext, unauthenticated gRPC, MQTT and libvirt (isolated boxes only)")
    p.set_defaults(fn=handler("cell_cmd", "cmd_cell_up"))
    p = _add(cp, "inventory", help="an Ansible inventory for a cell brought up with --ssh")
    p.add_argument("--out", help="write it to this file (default: print)")
    p.add_argument("--mqtt-host", type=host_name, help="the host that runs mosquitto (default: the first)")
    p.set_defaults(fn=handler("cell_cmd", "cmd_cell_inventory"))
    _add(cp, "down", help="remove exactly what up created").set_defaults(fn=handler("cell_cmd", "cmd_cell_down"))
    _add(cp, "status", help="hosts and agent health").set_defaults(fn=handler("cell_cmd", "cmd_cell_status"))


def _workload_args(p, defaults: bool) -> None:
    p.add_argument("--cpu-load", type=float_in(*vmdom.CPU_LOAD_RANGE), default=0.1 if defaults else None,
                   help="fraction of each vCPU, 0..1")
    p.add_argument("--dirty-mib-s", type=dirty_rate, default=0.0 if defaults else None, help="MiB/s, or max")
    p.add_argument("--wss-mib", type=int_in(0, vmdom.max_wss_mib(vmdom.MEM_MIB_RANGE[1]), "MiB"), default=None,
                   help="working set, MiB (at most the guest's memory - 80)")


def add_migration_args(p) -> None:
    p.add_argument("--bandwidth-mib-s", type=int_in(*vmdom.BANDWIDTH_RANGE, "MiB/s"), default=0, help="0 = unlimited")
    p.add_argument("--max-downtime-ms", type=int_in(*vmdom.DOWNTIME_MS_RANGE, "ms"), default=0,
                   help="0 = QEMU default (300 ms)")
    p.add_argument("--auto-converge", action="store_true")
    p.add_argument("--postcopy", action="store_true")
    p.add_argument("--timeout-s", type=float_in(*vmdom.TIMEOUT_S_RANGE, "s"), default=0,
                   help="completion timeout; 0 = daemon default")
    p.add_argument("--timeout-policy", choices=["abort", "auto-converge", "postcopy"], default="abort")


def _vm(sub, handler: Handler) -> None:
    vp = _group(sub, "vm", "virtual machines")
    p = _add(vp, "start", help="boot a VM running the synthetic workload on a host")
    p.add_argument("--host", type=host_name, required=True)
    p.add_argument("--name", type=vm_name)
    p.add_argument("--mem-mib", type=int_in(*vmdom.MEM_MIB_RANGE, "MiB"), default=128)
    p.add_argument("--vcpus", type=int_in(*vmdom.VCPUS_RANGE), default=1)
    p.add_argument("--production", action="store_true")
    p.add_argument("--priority", type=int_in(*vmdom.PRIORITY_RANGE), default=0)
    _workload_args(p, True)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_start"))
    _add(vp, "list", help="every VM of the cell").set_defaults(fn=handler("vm_cmd", "cmd_vm_list"))
    p = _add(vp, "stop", help="stop and remove a VM")
    p.add_argument("name", type=vm_name)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_stop"))
    p = _add(vp, "set-workload", help="change a running VM's workload")
    p.add_argument("name", type=vm_name)
    _workload_args(p, False)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_set_workload"))
    p = _add(vp, "migrate", help="live-migrate a VM, with progress")
    p.add_argument("name", type=vm_name)
    p.add_argument("--to", type=host_name, required=True)
    add_migration_args(p)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_migrate"))
    p = _add(vp, "abort-migration", help="abort a VM's running migration")
    p.add_argument("name", type=vm_name)
    p.set_defaults(fn=handler("vm_cmd", "cmd_vm_abort"))


def _bench(sub, handler: Handler) -> None:
    bp = _group(sub, "bench", "measurements on a real cell")
    p = _add(bp, "migration", help="sweep memory x working set x dirty rate (x bandwidth); fit the cost model")
    p.add_argument("--mem-mib", type=list_of(int_in(*vmdom.MEM_MIB_RANGE, "MiB")), default=[128, 256, 512])
    p.add_argument("--wss-mib", type=list_of(int_in(0, vmdom.max_wss_mib(vmdom.MEM_MIB_RANGE[1]), "MiB")),
                   default=None, help="comma list of working sets (default: half the guest's memory); pairs whose "
                                      "working set exceeds the guest's memory - 80 MiB are left out")
    p.add_argument("--dirty-mib-s", type=list_of(dirty_rate), default=[0.0, 8.0, 32.0], help="comma list; max allowed")
    p.add_argument("--bandwidth-mib-s", type=list_of(int_in(*vmdom.BANDWIDTH_RANGE, "MiB/s")), default=[0],
                   help="comma list; 0 = unlimited")
    p.add_argument("--repeat", type=int_in(1, 100), default=1)
    p.add_argument("--max-downtime-ms", type=int_in(*vmdom.DOWNTIME_MS_RANGE, "ms"), default=0)
    p.add_argument("--postcopy", action="store_true")
    p.add_argument("--auto-converge", action="store_true")
    p.add_argument("--timeout-s", type=float_in(1, vmdom.TIMEOUT_S_RANGE[1], "s"), default=120.0,
                   help="completion timeout of each migration (policy abort)")
    p.add_argument("--tls", type=list_of(on_off, 2), default=None,
                   help="comma list of on/off: every point with and without TLS for migration data "
                        "(default: the node's default, on unless the cell is insecure)")
    p.add_argument("--src", type=host_name, default="h1")
    p.add_argument("--dst", type=host_name, default="h2")
    p.add_argument("--csv", default="migration-bench.csv")
    p.add_argument("--fit", metavar="OUT", default="",
                   help="fit the migration cost model to the records and write its calibration file (JSON)")
    p.add_argument("--fit-from", metavar="CSV", action="append", default=[],
                   help="with --fit: fit from this bench CSV instead of running a sweep (repeatable)")
    p.set_defaults(fn=handler("bench", "cmd_bench_migration"))


# --- experiments -------------------------------------------------------------------------
def _report(sub, handler: Handler) -> None:
    p = _add(
        sub, "report", help="report.md + PNG plots for a results folder, or a comparison of several",
        description="One DIR: write report.md, summary.json and the plots into DIR (or --out). "
                    "Several DIRs: side-by-side tables, comparison.csv and overlaid plots into --out. "
                    "Folders whose events.jsonl lacks run_completed are refused. A sweep's folder (cellctl sweep), "
                    "or --sweep DIR: sweep.md and sweep.csv, per configuration the mean and min-max over seeds.")
    p.add_argument("dirs", nargs="*", metavar="DIR", help="results folders written by cellctl run, or a sweep's folder")
    p.add_argument("--sweep", metavar="SWEEPDIR", help="a sweep's folder (cellctl sweep --out)")
    p.add_argument("--out", metavar="DIR", help="where to write (one run: default its folder; several: required)")
    p.set_defaults(fn=handler("report_cmd", "cmd_report"))


def _scenario_args(p, out_help: str) -> None:
    p.add_argument("scenario", metavar="SCENARIO.toml")
    p.add_argument("--out", metavar="DIR", help=out_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="override a scenario key (repeatable)")


def _run(sub, handler: Handler) -> None:
    p = _add(
        sub, "run", help="run a scenario (model or real cell) into a results folder with its report",
        description="Run SCENARIO.toml and write manifest.json, events.jsonl, ticks.csv, migrations.csv, "
                    "allocations.csv and report.md with plots into --out. --set overrides any scenario key "
                    "(dotted, e.g. run.seed=7, cell.nodes=500, policy.san.enabled=false). --out must be a new or "
                    "empty folder, or, with --overwrite, the folder of a previous run (whose files are replaced).")
    _scenario_args(p, "results folder (default: results/<run name>-<UTC time>)")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run in --out (its report too)")
    p.add_argument("--no-report", action="store_true", help="skip report.md and the plots (cellctl report later)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", metavar="FROM:TO",
                   help="cProfile the window FROM:TO of simulated minutes (model cells) into "
                        "profile.pstats/.txt/.json in the results folder")
    p.add_argument("--explain", type=explain_share, metavar="all|SHARE",
                   help="explain this share of the decisions in decisions.jsonl (default: run.explain, 1 %%); "
                        "all = every decision (small runs)")
    p.set_defaults(fn=handler("run_cmd", "cmd_run"))


def _sweep(sub, handler: Handler) -> None:
    p = _add(
        sub, "sweep", help="run scenarios x a --set grid x seeds on Dask workers, resumably",
        description="Run every (scenario, grid point, seed) of SPEC.toml as a cellctl run on Dask workers: a "
                    "LocalCluster sized to the cores and memory, or --scheduler's cluster. Each run writes "
                    "OUT/<scenario stem>/<key=value,...>/seed-<n>/. Rerun the same command to resume: completed runs "
                    "of the same scenario are skipped, incomplete ones replaced. Failed runs are retried once; "
                    "exit 1 if any failed.")
    p.add_argument("spec", metavar="SPEC.toml")
    p.add_argument("--out", metavar="DIR", help="the sweep's folder (default: results/<sweep name>)")
    p.add_argument("--scheduler", type=dask_address, default=None,
                   help="an existing Dask cluster, tcp://HOST:8786 or tls://HOST:8786 (default: a LocalCluster)")
    p.add_argument("--workers", type=int_in(1, 256), default=None,
                   help="LocalCluster worker processes (default: the cores, fewer if memory is short)")
    p.add_argument("--mem-per-run-mib", type=int_in(64, 1 << 22, "MiB"), default=None,
                   help="memory one run needs, for the LocalCluster's size (default: estimated from cell.nodes)")
    p.add_argument("--tls-ca-file", metavar="FILE", help="with tls://: the cluster's CA certificate")
    p.add_argument("--tls-cert", metavar="FILE", help="with tls://: this client's certificate")
    p.add_argument("--tls-key", metavar="FILE", help="with tls://: this client's key")
    p.add_argument("--overwrite", action="store_true",
                   help="replace completed runs whose scenario, overrides or seed changed (refused otherwise)")
    p.add_argument("--no-report", action="store_true", help="no report.md and plots per run (cellctl report later)")
    p.add_argument("--dry-run", action="store_true", help="check the spec and show each run's state; run nothing")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(fn=handler("sweep_cmd", "cmd_sweep"))


def _compare(sub, handler: Handler) -> None:
    p = _add(sub, "compare", help="a real-cell scenario on the real cell and on its model twin, side by side",
             description="Run SCENARIO.toml (cell.kind = 'real') on a real cell into OUT/real (or take --real-from), "
                         "fit the guest overhead from its per-VM samples, run the same VMs on the model twin "
                         "(cell.kind = 'twin') into OUT/model, and write OUT/compare.md, compare.json, compare.csv "
                         "and overlay plots.")
    _scenario_args(p, "the comparison's folder (default: results/compare-<name>-<UTC time>)")
    p.add_argument("--real-from", metavar="DIR", help="an existing real run of the same scenario (no real run now)")
    p.add_argument("--fit-from", metavar="DIR",
                   help="fit the twin's guest overhead and migration link from this other real run (out of sample)")
    p.add_argument("--no-fit", action="store_true",
                   help="fit nothing: the twin's guests cost their workload, the link is the calibration's")
    p.add_argument("--overwrite", action="store_true", help="replace a previous comparison's real run in OUT/real")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(fn=handler("compare_cmd", "cmd_compare"))


def _chaos(sub, handler: Handler) -> None:
    p = _add(sub, "chaos", help="a seeded fault-injection campaign on the cell, with an invariant checker",
             description="Run -n live migrations (and --san SAN rounds, --megha Megha launches), each with a fault "
                         "from a seeded schedule at a phase, on the cell; after each, wait until it settles and check "
                         "that every VM runs in one libvirt and is listed by one daemon, intact, and that every "
                         "migration has one truthful record and no lease outlives it. Writes chaos.jsonl, "
                         "summary.txt, manifest.json and timeline.png; exit 1 on any violation.")
    p.add_argument("-n", "--migrations", type=int_in(0, 10_000), default=12, help="live migrations (default 12)")
    p.add_argument("--san", type=int_in(0, 10_000), default=0, help="SAN rounds (a cell up with --san)")
    p.add_argument("--megha", type=int_in(0, 10_000), default=0, help="Megha launches (a cell up with --megha)")
    p.add_argument("--faults", default="", metavar="KIND,...",
                   help="only these fault kinds (default: every kind that applies; `cellctl chaos --faults ?` lists them)")
    p.add_argument("--seed", type=int_in(0, 2**31 - 1), default=1)
    p.add_argument("--vms", type=int_in(1, 16), default=2, help="guests the campaign keeps running (default 2)")
    p.add_argument("--out", metavar="DIR", help="results folder (default: results/chaos-<cell>-<seed>)")
    p.add_argument("--overwrite", action="store_true", help="replace a previous campaign's folder")
    p.set_defaults(fn=handler("chaos_cmd", "cmd_chaos"))


# --- MASB and Megha ----------------------------------------------------------------------
def _masb(sub, handler: Handler) -> None:
    bp = _group(sub, "broker", "MASB broker agents")
    p = _add(bp, "cache", help="what a broker believes: node, age, capacity, used, class")
    p.add_argument("--broker", type=or_blank(address), default="", help="HOST:PORT (default: the cell's broker)")
    p.set_defaults(fn=handler("masb_cmd", "cmd_broker_cache"))
    p = _add(sub, "san", help="active and recent SAN negotiations on each host; `san explain ID`: why a round "
                              "chose its target")
    p.add_argument("--limit", type=int_in(1, 1000), default=20, help="recent negotiations per host")
    p.set_defaults(fn=handler("masb_cmd", "cmd_san"))
    sp = p.add_subparsers(dest="san_cmd", required=False, metavar="[explain]")
    e = _add(sp, "explain", help="an explained SAN round of the live cell: the broker's candidates and scores, each "
                                 "target's answer with its numbers, the order, the view's age, the messages")
    e.add_argument("id", help="the round's san_id (cellctl san lists them)")
    e.add_argument("--host", type=or_blank(host_name), default="", help="the host that ran it (default: ask each)")
    e.set_defaults(fn=handler("explain_cmd", "cmd_san_explain"))


def _megha_common(p, gm: bool = True, lm: bool = False) -> None:
    p.add_argument("--controller", default="",
                   help="controller TOML (default $CELLBED_CONTROLLER, ./controller.toml, or the cell's, "
                        "from cell up --megha)")
    if gm:
        p.add_argument("--gm", type=or_blank(address), default="", help="a GM's HOST:PORT (instead of the controller config)")
    if lm:
        p.add_argument("--lm", type=or_blank(address), default="", help="an LM's HOST:PORT (instead of the controller config)")


def _megha(sub, handler: Handler) -> None:
    p = _add(sub, "submit", help="submit a task to Megha; prints its placement and allocation time")
    p.add_argument("--cpu", type=float_in(0.001, 1024, "cores"), required=True, help="requested CPU, cores")
    p.add_argument("--mem", type=float_in(1, 1 << 24, "MiB"), required=True,
                   help="requested memory, MiB (the VM's memory)")
    p.add_argument("--constraint", action="append", default=[], metavar="K=V",
                   help="placement constraint on a host attribute: K=V, K!=V, K<N, K>N (repeatable)")
    p.add_argument("--user", default="", help="owner; must have a queue in the controller config")
    p.add_argument("--production", action="store_true", help="production task (priority 10 unless --priority)")
    p.add_argument("--priority", type=int_in(*vmdom.PRIORITY_RANGE), default=None, help="0..11")
    p.add_argument("--name", type=or_blank(vm_name), default="", help="task id = VM name (default: the GM assigns one)")
    p.add_argument("--duration-s", type=float_in(0, 30 * 86400, "s"), default=0.0, help="run time, s; 0 = until stopped")
    p.add_argument("--vcpus", type=int_in(0, vmdom.VCPUS_RANGE[1]), default=0, help="vCPUs (default ceil(--cpu))")
    p.add_argument("--cpu-load", type=float_in(*vmdom.CPU_LOAD_RANGE), default=0.0,
                   help="guest workload CPU fraction per vCPU, 0..1")
    p.add_argument("--wss-mib", type=int_in(0, vmdom.max_wss_mib(vmdom.MEM_MIB_RANGE[1]), "MiB"), default=0,
                   help="guest working set, MiB")
    p.add_argument("--wait-s", type=float_in(0, 3600, "s"), default=180.0, help="wait this long for the task to start, s")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_submit"))
    p = _add(sub, "task", help="a Megha task's status: queue position and reason, or placement and allocation time")
    p.add_argument("name", type=vm_name)
    p.add_argument("--wait-s", type=float_in(0, 3600, "s"), default=0.0, help="wait this long for it to start, s")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_task"))
    gp = _group(sub, "gm", "Megha Global Masters")
    p = _add(gp, "view", help="a GM's view of every LM, with its staleness, and its counters")
    p.add_argument("--all", action="store_true", help="every GM in the controller config")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_gm_view"))
    lp = _group(sub, "lm", "Megha Local Masters")
    p = _add(lp, "partitions", help="each LM's partitions: nodes N and logical nodes N', with use and counters")
    _megha_common(p, gm=False, lm=True)
    p.set_defaults(fn=handler("megha_cmd", "cmd_lm_partitions"))
    p = _add(sub, "queues", help="users' shares, usage, queue lengths and preemptions")
    _megha_common(p)
    p.set_defaults(fn=handler("megha_cmd", "cmd_queues"))


# --- certificates ------------------------------------------------------------------------
def _pki(sub, handler: Handler) -> None:
    pp = _group(sub, "pki", "a cell CA and certificates for lab servers (the Ansible roles use these)")
    p = _add(pp, "init", help="create the cell's CA in DIR, or install the operator's (kept if present)")
    p.add_argument("--dir", required=True, help="the CA's folder (0700; keys 0600)")
    p.add_argument("--days", type=int_in(1, 3650, "days"), default=30)
    p.add_argument("--ca-cert", default="", help="the operator's CA certificate (with --ca-key)")
    p.add_argument("--ca-key", default="", help="the operator's CA key")
    p.set_defaults(fn=handler("pki_cmd", "cmd_pki_init"))
    p = _add(pp, "issue", help="a certificate for one identity (kept if still good)")
    p.add_argument("--dir", required=True, help="the CA's folder; the certificate goes there as ROLE-NAME.crt/.key")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--role", choices=[r.value for r in Role], help="the identity's role")
    who.add_argument("--server", action="store_true",
                     help="a server certificate with no Cellbed identity (the cell's mosquitto), as service-NAME.crt")
    p.add_argument("--name", type=host_name, required=True, help="h1, ba1, gm1, lm1a, admin; with --server: mqtt")
    p.add_argument("--address", action="append", default=[], help="an IP address the identity serves on (repeatable)")
    p.add_argument("--days", type=int_in(1, 3650, "days"), default=30)
    p.set_defaults(fn=handler("pki_cmd", "cmd_pki_issue"))


# --- the web UI --------------------------------------------------------------------------
def _ui(sub, handler: Handler) -> None:
    p = _add(sub, "ui", help="a read-only web app: the live cell, and results folders (URL with a token)",
             description="Serve the live cell named by --cell (if it is up) and the RESULTS folders (runs, or "
                         "`cellctl compare` folders) as a web app, on 127.0.0.1 by default; prints the URL, "
                         "whose token every request must carry. --listen on any other address needs TLS: "
                         "--tls-cert/--tls-key, or a certificate that the cell's CA issues for that address.")
    p.add_argument("results", nargs="*", metavar="RESULTS", help="results folders to open in the run view")
    p.add_argument("--listen", default="127.0.0.1", metavar="HOST:PORT",
                   help="address to serve on (default 127.0.0.1:8470; port 0 = any free port)")
    p.add_argument("--tls-cert", default="", metavar="FILE", help="server certificate (PEM) for TLS")
    p.add_argument("--tls-key", default="", metavar="FILE", help="its key (PEM)")
    p.add_argument("--no-live", action="store_true", help="serve the RESULTS only, not the cell")
    p.add_argument("--refresh-s", type=float_in(0.2, 60, "s"), default=2.0,
                   help="how often the hosts' usage is read again besides the pushed events (default 2)")
    p.set_defaults(fn=handler("ui_cmd", "cmd_ui"))
