"""``cellctl run SCENARIO.toml [--out DIR] [--set key=value ...]``: run one scenario, write its
results folder and report (DESIGN §10.4, §12).

Model cells need nothing else; real cells need root (namespaces, libvirtd, QEMU) like
``cellctl cell up``. A progress bar goes to stderr; the report path goes to stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cellbed.experiment.scenario.file import load_scenario
from cellbed.experiment.runner import run_scenario
from cellbed.experiment.profiling import parse_window


def cmd_run(args: argparse.Namespace) -> None:
    overrides = list(args.overrides or []) + ([f"run.explain={args.explain!r}"] if args.explain is not None else [])
    sc = load_scenario(args.scenario, overrides)
    window = None
    if args.profile:
        window = parse_window(args.profile)
    out = Path(args.out) if args.out else Path("results") / f"{sc.run.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    res = run_scenario(sc, out, progress=None if args.quiet else sys.stderr, overwrite=args.overwrite,
                       report=not args.no_report, profile=window)
    if getattr(args, "json", False):
        print(json.dumps({"results": str(res.path), "report": str(res.report) if res.report else None,
                          "summary": res.summary}, indent=1, default=str))
    else:
        s = res.summary
        print(f"run {sc.run.name}: {s.get('simulated_s', 0) / 60:.0f} simulated min in {s.get('wall_s', 0):.0f} s wall, "
              f"peak RSS {s.get('peak_rss_mib', 0):.0f} MiB; results {res.path}"
              + (f"; report {res.report}" if res.report else ""))
