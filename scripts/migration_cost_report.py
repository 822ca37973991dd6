#!/usr/bin/env python3
"""The held-out error tables of a migration cost calibration, as Markdown (docs/results/fidelity.md):
per quantity the median, p90 and max relative error over the held-out migrations, per migration and
per configuration (against the median of its repeats), beside the repeats' own noise, overall and
per mode (pre-copy with and without a bandwidth or downtime limit, auto-converge, post-copy); and
the fitted parameters.

    .venv/bin/python scripts/migration_cost_report.py docs/results/migration-cost/sweep.csv \\
        docs/results/migration-cost/calibration.json
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cellbed.policy.migration import costfile, costfit  # noqa: E402

QUANTITIES = ("time", "bytes", "downtime", "iterations", "wall")
LABELS = {"time": "total time", "bytes": "bytes sent", "downtime": "downtime", "iterations": "iterations",
          "wall": "wall time of the call"}


def _pct(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def _group(r: costfit.Record) -> str:
    if r.mode != "precopy":
        return r.mode + (" under a limit" if r.bandwidth_mib_s > 0 else "")
    if r.bandwidth_mib_s > 0:
        return "pre-copy, bandwidth limit"
    return "pre-copy, 50 ms downtime limit" if r.max_downtime_ms else "pre-copy, no limit"


def table(recs: list[costfit.Record], p) -> list[str]:
    s = costfit.full_summary(recs, p)
    out = ["| quantity | migrations | median % | p90 % | max % | configurations | median % | p90 % | max % "
           "| repeat noise: median % | p90 % |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for q in QUANTITIES:
        m, c, n = s["per_migration"][q], s["per_configuration"][q], s["repeat_noise"][q]
        if not m["n"]:
            continue
        out.append(f"| {LABELS[q]} | {m['n']} | {_pct(m['median_pct'])} | {_pct(m['p90_pct'])} | {_pct(m['max_pct'])} "
                   f"| {c['n']} | {_pct(c['median_pct'])} | {_pct(c['p90_pct'])} | {_pct(c['max_pct'])} "
                   f"| {_pct(n['median_pct'])} | {_pct(n['p90_pct'])} |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="bench CSVs (the sweep)")
    ap.add_argument("calibration", help="the calibration file fitted from them")
    a = ap.parse_args(argv)
    cal = costfile.read(a.calibration)
    rows = []
    for path in a.csv:
        with open(path, newline="") as f:
            rows += list(csv.DictReader(f))
    recs = costfit.records_from_rows(rows)
    held_keys = set(cal.doc["split"]["held_out_configs"])
    held = [r for r in recs if costfit.config_key(r) in held_keys]
    fit = [r for r in recs if costfit.config_key(r) not in held_keys]
    print(f"### Held-out configurations ({len(held)} migrations, {len({costfit.config_key(r) for r in held})} "
          f"configurations; fit on {len(fit)}, {len({costfit.config_key(r) for r in fit})})\n")
    print("\n".join(table(held, cal.params)))
    print("\n### Held out, by mode\n")
    print("| mode | quantity | migrations | median % | p90 % | max % | configurations | median % |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for g in sorted({_group(r) for r in recs}):
        sub = [r for r in held if _group(r) == g]
        if not sub:
            print(f"| {g} | (no held-out configuration) | | | | | | |")
            continue
        s = costfit.full_summary(sub, cal.params)
        for q in QUANTITIES[:4]:
            m, c = s["per_migration"][q], s["per_configuration"][q]
            print(f"| {g} | {LABELS[q]} | {m['n']} | {_pct(m['median_pct'])} | {_pct(m['p90_pct'])} "
                  f"| {_pct(m['max_pct'])} | {c['n']} | {_pct(c['median_pct'])} |")
    print("\n### In sample (the fit set)\n")
    print("\n".join(table(fit, cal.params)))
    print("\n### Parameters\n")
    print("| parameter | value |\n|---|---:|")
    for k, v in cal.doc["params"].items():
        print(f"| `{k}` | {v if isinstance(v, (int, str)) else f'{v:.4g}'} |")


if __name__ == "__main__":
    main()
