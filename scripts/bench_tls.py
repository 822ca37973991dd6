#!/usr/bin/env python3
"""The cost of TLS for live migration (issue 13, part 3): migration time and downtime of the same
guests with the migration data over TLS (VIR_MIGRATE_TLS, the cell's certificates) and in
plaintext, on a 2-host single-box cell. Both modes run in interleaved rounds (each round: every
memory size, TLS on then off), so that both see the same machine load; every migration is
verified as usual (cellctl bench migration's code, cellbed/cli/bench.py).

    .venv/bin/python scripts/bench_tls.py [--rounds 3] [--mem-mib 128,512] [--dirty-mib-s 8]
    .venv/bin/python scripts/bench_tls.py --use-cell NAME     # an existing (secure) cell

By default it builds its own cell (--cell ltb, --subnet 10.231.17.0/24) and removes it at the end.
Prints, per guest size, the medians per mode and the ratio TLS / plaintext, and writes every
record to --csv. No assertion: the figures go in the report.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cellbed.cell import cell as cellmod  # noqa: E402
from cellbed.cli.bench import CSV_FIELDS, bench_migration  # noqa: E402
from cellbed.cli.common import Cell, table  # noqa: E402

# (record field, label, scale): libvirt's total time and downtime, the migrate call's wall time, the
# transfer rate (memory_bps, in MiB/s).
FIGURES = (("time_elapsed_ms", "total_ms", 1), ("downtime_ms", "downtime_ms", 1), ("wall_ms", "wall_ms", 1),
           ("memory_bps", "MiB_s", 2 ** -20))


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="migrations per size and mode (>= 3 for a median)")
    ap.add_argument("--mem-mib", default="128,512")
    ap.add_argument("--dirty-mib-s", type=float, default=8.0)
    ap.add_argument("--use-cell", default="", help="an existing cell (not removed); default: build one")
    ap.add_argument("--cell", default="ltb")
    ap.add_argument("--subnet", default="10.231.17.0/24")
    ap.add_argument("--host-cpus", type=float, default=1.0)
    ap.add_argument("--host-mem-mib", type=int, default=1280)
    ap.add_argument("--state-root", default="")
    ap.add_argument("--csv", default="build/bench/tls-migration.csv")
    return ap.parse_args(argv)


def bench_args(a: argparse.Namespace, cell: str, state_root: str, csv_path: str) -> argparse.Namespace:
    """One round of `cellctl bench migration --tls on,off` (repeat 1)."""
    return argparse.Namespace(cell=cell, state_root=state_root, json=False, csv=csv_path,
                              mem_mib=[int(m) for m in a.mem_mib.split(",")], dirty_mib_s=[a.dirty_mib_s],
                              bandwidth_mib_s=[0], repeat=1, max_downtime_ms=0, postcopy=False,
                              tls=[True, False], src="h1", dst="h2")


async def rounds(a: argparse.Namespace, cell: str, state_root: str, tmp: str) -> list[dict]:
    rows = []
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}", flush=True)
        args = bench_args(a, cell, state_root, os.path.join(tmp, f"round{r}.csv"))
        for row in await bench_migration(Cell(args), args):
            rows.append({**row, "repeat": r})
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for mem in sorted({r["mem_mib"] for r in rows}):
        med = {}
        for tls in (True, False):
            ok = [r for r in rows if r["mem_mib"] == mem and r["tls"] is tls and r["outcome"] == "succeeded"]
            med[tls] = {k: statistics.median(float(r[k]) * sc for r in ok) if ok else float("nan")
                        for k, _, sc in FIGURES}
            med[tls]["n"] = len(ok)
        line = {"mem_mib": mem, "n_tls/plain": f"{med[True]['n']}/{med[False]['n']}"}
        for k, label, _ in FIGURES:
            on, off = med[True][k], med[False][k]
            line[f"{label} tls"], line[f"{label} plain"] = f"{on:.0f}", f"{off:.0f}"
            line[f"{label} ratio"] = f"{on / off:.2f}" if off else "-"
        out.append(line)
    return out


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    tmp = tempfile.mkdtemp(prefix="cellbed-bench-tls-migration-")
    state_root = a.state_root or (cellmod.DEFAULT_STATE_ROOT if a.use_cell else os.path.join(tmp, "cells"))
    cell = a.use_cell or a.cell
    if not a.use_cell:
        print(f"cell {cell}: 2 hosts of {a.host_cpus} core / {a.host_mem_mib} MiB on {a.subnet}", flush=True)
        cellmod.up(cell, 2, subnet=a.subnet, host_cpus=[a.host_cpus], host_mem_mib=[a.host_mem_mib],
                   root=state_root, monitor_period_s=2.0)
    try:
        rows = asyncio.run(rounds(a, cell, state_root, tmp))
    finally:
        if not a.use_cell:
            cellmod.down(cell, state_root)
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.csv)), exist_ok=True)
    with open(a.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        wr.writeheader()
        wr.writerows(rows)
    s = summary(rows)
    cols = ["mem_mib", "n_tls/plain"] + [f"{label} {m}" for _, label, _ in FIGURES for m in ("tls", "plain", "ratio")]
    print(f"\nmigration with TLS vs plaintext, medians of successful runs, dirty {a.dirty_mib_s} MiB/s "
          f"({len(rows)} migrations in {a.csv}):\n" + table(s, cols))


if __name__ == "__main__":
    main()
