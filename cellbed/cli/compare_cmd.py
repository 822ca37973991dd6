"""``cellctl compare SCENARIO.toml [--out DIR] [--real-from DIR] [--set k=v ...]``: a real-cell
scenario on the real cell and on its model twin, side by side (cellbed/experiment/compare/run.py).
Exit codes: 0 done (differences are reported, not failures), 2 refused input."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cellbed.experiment.compare.run import compare
from cellbed.experiment.compare.table import fmt, fmt_rel
from cellbed.experiment.scenario.file import load_scenario


def cmd_compare(args: argparse.Namespace) -> None:
    sc = load_scenario(args.scenario, args.overrides)
    out = Path(args.out) if args.out else Path("results") / f"compare-{sc.run.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    c = compare(sc, out, real_from=args.real_from, fit=not args.no_fit, fit_from=args.fit_from,
                progress=None if args.quiet else sys.stderr, overwrite=args.overwrite)
    if getattr(args, "json", False):
        print((out / "compare.json").read_text(), end="")
        return
    for r in c.rows:
        print(f"{r.metric:24s} {r.unit:18s} real {fmt(r.real):>10s}  model {fmt(r.model):>10s}  {fmt_rel(r)}")
    print(f"{len(c.over)} of {len(c.rows)} metrics differ by more than 10 %; {out / 'compare.md'}")
