"""``cellctl sweep SPEC.toml [--out DIR] [--scheduler tcp|tls://HOST:PORT]``: every (scenario, grid
point, seed) of a sweep spec as a ``cellctl run`` on Dask workers, resumable (issue 16).

The spec and every run's scenario are checked before anything starts (cellbed/experiment/sweep/plan.py);
the runs go to a LocalCluster or an existing Dask cluster (cellbed/experiment/sweep/run.py).
Progress goes to stderr, the outcome to stdout. Exit codes: 0 every run done, 1 a run failed (after
its retry; the others ran), 2 a refused spec or folder, 128 + the signal that stopped the sweep.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from distributed.security import Security

from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.runner import check_workload, driver_for
from cellbed.experiment.scenario.file import Scenario
from cellbed.experiment.sweep.plan import load_spec, plan_sweep, run_state
from cellbed.experiment.sweep.progress import hms
from cellbed.experiment.sweep.run import run_sweep

TLS_FLAGS = ("--tls-ca-file", "--tls-cert", "--tls-key")


def check_runnable(sc: Scenario) -> None:
    """What `cellctl run` would refuse before writing anything: the driver, the trace files."""
    driver_for(sc)
    check_workload(sc)


def client_security(args: argparse.Namespace) -> Security | None:
    """The client's TLS for --scheduler tls://...; None for a LocalCluster (it makes its own) and
    for tcp:// (plaintext, with a warning)."""
    files = [args.tls_ca_file, args.tls_cert, args.tls_key]
    given = [f for f, v in zip(TLS_FLAGS, files) if v]
    if not args.scheduler or not args.scheduler.startswith("tls://"):
        if given:
            raise InvalidArgument(f"{given[0]}: only with --scheduler tls://HOST:PORT "
                                  "(a LocalCluster makes its own temporary certificates)")
        if args.scheduler:
            print(f"cellctl sweep: WARNING: {args.scheduler} is plaintext and unauthenticated: whoever reaches it can "
                  "run code on its workers; use tls:// with certificates (--tls-ca-file, --tls-cert, --tls-key)",
                  file=sys.stderr)
        return None
    if len(given) != 3:
        missing = [f for f, v in zip(TLS_FLAGS, files) if not v]
        raise InvalidArgument(f"--scheduler {args.scheduler}: give {', '.join(missing)} as well")
    for flag, f in zip(TLS_FLAGS, files):
        if not os.path.isfile(f):
            raise InvalidArgument(f"{flag} {f}: no such file")
    return Security(tls_ca_file=files[0], tls_client_cert=files[1], tls_client_key=files[2], require_encryption=True)


def cmd_sweep(args: argparse.Namespace) -> None:
    spec = load_spec(args.spec)
    plan = plan_sweep(spec, check=check_runnable)
    out = Path(args.out) if args.out else Path("results") / spec.name
    security = client_security(args)
    as_json = getattr(args, "json", False)
    if args.dry_run:
        rows = [{"key": r.key, "state": run_state(r.folder(out), r.scenario_hash)[0], "scenario": str(r.scenario),
                 "overrides": list(r.overrides), "folder": str(r.folder(out))} for r in plan.runs]
        if as_json:
            print(json.dumps({"name": spec.name, "out": str(out), "runs": rows}, indent=1))
        else:
            for r in rows:
                print(f"{r['state']:10s} {r['key']}   --set {' --set '.join(r['overrides'])}")
            print(f"sweep {spec.name}: {len(rows)} runs into {out}")
        return
    res = run_sweep(plan, out, scheduler=args.scheduler, security=security, workers=args.workers,
                    mem_per_run_mib=args.mem_per_run_mib, overwrite=args.overwrite, report=not args.no_report,
                    stream=None if args.quiet else sys.stderr)
    if as_json:
        print(json.dumps(res.as_json(), indent=1, default=str))
    else:
        print(f"sweep {res.name}: {res.ran} ran, {res.skipped} skipped, {len(res.failed)} failed of {res.total} runs "
              f"in {hms(res.wall_s)}; results {res.out}; summary: cellctl report {res.out}")
    if res.stopped:
        print(f"cellctl sweep: stopped by signal {res.stopped}; {len(res.interrupted)} run(s) interrupted (their "
              "folders end with run_failed); rerun the same command to resume", file=sys.stderr)
        raise SystemExit(128 + res.stopped)
    if res.failed:
        for f in res.failed:
            print(f"cellctl sweep: {f['key']} failed twice (exit {f['rc']}): {f['tail'][-200:]}; log {f['log']}",
                  file=sys.stderr)
        raise SystemExit(1)
