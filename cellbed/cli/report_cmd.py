"""``cellctl report DIR [DIR...] [--out DIR]``: regenerate a run's report.md and plots, or compare runs.

Kept apart from cellctl's cell commands: it needs no cell, no gRPC and no root.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellbed.experiment.report import write_report


def cmd_report(args: argparse.Namespace) -> None:
    md = write_report(args.dirs, args.out)
    written = sorted(str(p) for p in Path(md).parent.iterdir() if p.suffix in (".md", ".png", ".json", ".csv")
                     and p.name not in ("ticks.csv", "migrations.csv", "allocations.csv", "manifest.json"))
    if getattr(args, "json", False):
        print(json.dumps({"report": str(md), "files": written}, indent=1))
    else:
        print(md)
