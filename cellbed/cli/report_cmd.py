"""``cellctl report DIR [DIR...] [--out DIR]``: regenerate a run's report.md and plots, or compare runs;
``cellctl report SWEEPDIR`` (or ``--sweep SWEEPDIR``): a sweep's sweep.md and sweep.csv.

Kept apart from cellctl's cell commands: it needs no cell, no gRPC and no root.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.report.write import write_report
from cellbed.experiment.sweep.report import is_sweep, write_sweep_report


def cmd_report(args: argparse.Namespace) -> None:
    sweep = getattr(args, "sweep", None)
    if sweep and args.dirs:
        raise InvalidArgument("give results folders, or --sweep SWEEPDIR, not both")
    if not sweep and not args.dirs:
        raise InvalidArgument("give a results folder (or several), a sweep's folder, or --sweep SWEEPDIR")
    if sweep or (len(args.dirs) == 1 and is_sweep(args.dirs[0])):
        md = write_sweep_report(sweep or args.dirs[0], args.out)
        written = [str(md), str(md.with_suffix(".csv"))]
    else:
        md = write_report(args.dirs, args.out)
        written = sorted(str(p) for p in Path(md).parent.iterdir() if p.suffix in (".md", ".png", ".json", ".csv")
                         and p.name not in ("ticks.csv", "migrations.csv", "allocations.csv", "manifest.json"))
    if getattr(args, "json", False):
        print(json.dumps({"report": str(md), "files": written}, indent=1))
    else:
        print(md)
