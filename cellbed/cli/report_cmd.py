"""``cellctl report DIR [DIR...] [--out DIR]``: regenerate a run's report.md and plots, or compare runs.

Kept apart from cellctl's cell commands: it needs no cell, no gRPC and no root.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from cellbed.experiment.report import write_report


def register(subparsers) -> None:
    """Add this sub-command to *subparsers* (what ArgumentParser.add_subparsers returned)."""
    """Add the ``report`` command to cellctl's subparsers."""
    p = subparsers.add_parser(
        "report", help="report.md + PNG plots for a results folder, or a comparison of several",
        description="One DIR: write report.md, summary.json and the plots into DIR (or --out). "
                    "Several DIRs: side-by-side tables, comparison.csv and overlaid plots into --out. "
                    "Folders whose events.jsonl lacks run_completed are refused.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results folders written by cellctl run")
    p.add_argument("--out", metavar="DIR", help="where to write (one run: default its folder; several: required)")
    p.set_defaults(fn=cmd_report)


def cmd_report(args: argparse.Namespace) -> None:

    md = write_report(args.dirs, args.out)
    written = sorted(str(p) for p in Path(md).parent.iterdir() if p.suffix in (".md", ".png", ".json", ".csv")
                     and p.name not in ("ticks.csv", "migrations.csv", "allocations.csv", "manifest.json"))
    if getattr(args, "json", False):
        print(json.dumps({"report": str(md), "files": written}, indent=1))
    else:
        print(md)
