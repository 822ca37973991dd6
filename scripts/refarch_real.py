#!/usr/bin/env python3
"""The reference architecture's §V-B on real VMs (issue 29): the 2 x 2 subset (FIFO and SRTF task
order x First-Fit and Best-Fit allocation, the outside package examples/refarch-policies) of
scenarios/refarch-real.toml, each with ``cellctl compare`` (a real 3-host cell, then its model
twin), one after the other; then the table of the four, real beside twin, in Markdown.

    sudo .venv/bin/python scripts/refarch_real.py --out results/refarch-real        # about 30 min
    .venv/bin/python scripts/refarch_real.py --out results/refarch-real --table-only

A configuration whose folder already has compare.json is not run again (the command resumes).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "refarch-real.toml"
ORDERS = ("fifo", "srtf")
ALLOCS = ("firstfit", "bestfit")
METRICS = (("TRT mean", "s"), ("JMS mean", "s"), ("NJSL mean", ""), ("JWT mean", "s"))


def run_one(out: Path, order: str, alloc: str, sets: list[str]) -> None:
    if (out / "compare.json").exists():
        print(f"{out.name}: done already", file=sys.stderr)
        return
    cmd = [sys.executable, "-m", "cellbed.cli.main", "compare", str(SCENARIO), "--out", str(out), "--overwrite",
           "--set", f"policy.task_order=refarch.{order}", "--set", f"policy.allocation=refarch.{alloc}"]
    for s in sets:
        cmd += ["--set", s]
    print("$", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)


def table(root: Path) -> str:
    head = "| T2 × R5 | " + " | ".join(f"{m} real | {m} twin" for m, _ in METRICS) + " | tasks | wall s (real) |"
    lines = [head, "|" + "---|" * (2 + 2 * len(METRICS) + 1)]
    for order in ORDERS:
        for alloc in ALLOCS:
            d = root / f"{order}-{alloc}"
            if not (d / "compare.json").exists():
                continue
            body = json.loads((d / "compare.json").read_text())
            got = {r["metric"]: r for r in body["metrics"]}
            real = json.loads((d / "real" / "events.jsonl").read_text().splitlines()[-1])
            cells = []
            for m, _ in METRICS:
                r = got.get(m, {})
                cells += [_fmt(r.get("real")), _fmt(r.get("model"))]
            lines.append(f"| {order.upper()}-{alloc.upper()} | " + " | ".join(cells) +
                         f" | {real['tasks']['added']} | {real['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.2f}" if abs(x) < 10 else f"{x:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more scenario overrides")
    ap.add_argument("--table-only", action="store_true", help="only print the table of what has run")
    a = ap.parse_args()
    if not a.table_only:
        for order in ORDERS:
            for alloc in ALLOCS:
                run_one(a.out / f"{order}-{alloc}", order, alloc, a.set)
    md = table(a.out)
    (a.out / "table.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
