#!/usr/bin/env python3
"""The migration cost model's sweep (issue 14, part 1): real live migrations on a 2-host
single-box cell over guest memory x working set x dirty rate x bandwidth limit, plus auto-converge,
post-copy and a tighter downtime limit, each point migrated --repeat times back and forth; then the
fit (`cellctl bench migration --fit-from ... --fit OUT`), whose held-out errors are the result.

    .venv/bin/python scripts/bench_migration_cost.py --out docs/results/migration-cost
    .venv/bin/python scripts/bench_migration_cost.py --segments precopy --repeat 1   # a quick look
    .venv/bin/python scripts/bench_migration_cost.py --use-cell NAME                # an existing cell

By default it builds its own cell (--cell cfit on --subnet 10.231.23.0/24, hosts of 0.9 core /
1280 MiB, node monitors every second so that a guest's dirty rate shows soon after boot) and
removes it at the end, also on failure or Ctrl-C. Writes OUT/sweep.csv (every record of every
segment, the bench's columns plus `segment`), OUT/<segment>.csv, and OUT/calibration.json.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cellbed.cell import cell as cellmod  # noqa: E402
from cellbed.cli.bench import CSV_FIELDS, bench_migration  # noqa: E402
from cellbed.cli.common import Cell  # noqa: E402

MAX = float("inf")
# name -> the bench's arguments for that part of the sweep. The working sets that do not fit a
# guest (more than its memory - 80 MiB) are left out by the bench.
SEGMENTS: dict[str, dict] = {
    # pre-copy, no bandwidth limit: 9 (memory, working set) pairs x 3 dirty rates
    "precopy": dict(mem_mib=[128, 256, 512], wss_mib=[16, 48, 160, 320], dirty_mib_s=[0.0, 16.0, 64.0],
                    bandwidth_mib_s=[0]),
    # pre-copy under a bandwidth limit below and near the link's own rate (dirty rate / limit <= 0.25)
    "limit": dict(mem_mib=[128, 256, 512], wss_mib=[48, 160, 320], dirty_mib_s=[0.0, 8.0],
                  bandwidth_mib_s=[32, 128]),
    # a tighter downtime limit (50 ms instead of QEMU's 300 ms)
    "downtime50": dict(mem_mib=[128, 256, 512], wss_mib=[48, 160], dirty_mib_s=[0.0, 16.0], bandwidth_mib_s=[0],
                       max_downtime_ms=50),
    # auto-converge where pre-copy alone converges slowly or never: as fast as the guest can, and
    # a dirty rate near the limit
    "autoconverge": dict(mem_mib=[256, 512], wss_mib=[160], dirty_mib_s=[MAX, 128.0], bandwidth_mib_s=[0],
                         auto_converge=True),
    "autoconverge-limit": dict(mem_mib=[256, 512], wss_mib=[160], dirty_mib_s=[48.0], bandwidth_mib_s=[64],
                               auto_converge=True),
    # post-copy after the first pass
    "postcopy": dict(mem_mib=[128, 256, 512], wss_mib=[48, 160, 320], dirty_mib_s=[64.0, MAX], bandwidth_mib_s=[0],
                     postcopy=True),
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/bench/migration-cost", help="folder for the CSVs and the calibration")
    ap.add_argument("--segments", default=",".join(SEGMENTS), help=f"comma list of {', '.join(SEGMENTS)}")
    ap.add_argument("--repeat", type=int, default=3, help="migrations per point (back and forth)")
    ap.add_argument("--timeout-s", type=float, default=60.0, help="completion timeout per migration")
    ap.add_argument("--use-cell", default="", help="an existing cell (not removed); default: build one")
    ap.add_argument("--cell", default="cfit")
    ap.add_argument("--subnet", default="10.231.23.0/24")
    ap.add_argument("--host-cpus", type=float, default=0.9)
    ap.add_argument("--host-mem-mib", type=int, default=1280)
    ap.add_argument("--state-root", default=cellmod.DEFAULT_STATE_ROOT)
    ap.add_argument("--no-fit", action="store_true", help="only the sweep")
    a = ap.parse_args(argv)
    bad = [s for s in a.segments.split(",") if s not in SEGMENTS]
    if bad:
        ap.error(f"--segments: unknown {', '.join(bad)}; allowed {', '.join(SEGMENTS)}")
    return a


def bench_args(a: argparse.Namespace, cell: str, seg: str, csv_path: str) -> argparse.Namespace:
    base = dict(cell=cell, state_root=a.state_root, json=False, csv=csv_path, repeat=a.repeat, max_downtime_ms=0,
                postcopy=False, auto_converge=False, timeout_s=a.timeout_s, tls=None, src="h1", dst="h2",
                wss_mib=None, fit="", fit_from=[])
    return argparse.Namespace(**{**base, **SEGMENTS[seg]})


def write_csv(path: Path, rows: list[dict], fields: list[str]) -> None:
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=fields)
        wr.writeheader()
        wr.writerows(rows)


async def sweep(a: argparse.Namespace, cell: str, out: Path) -> list[dict]:
    rows: list[dict] = []
    for seg in a.segments.split(","):
        t0 = time.monotonic()
        print(f"segment {seg}: {SEGMENTS[seg]}", flush=True)
        args = bench_args(a, cell, seg, str(out / f"{seg}.csv"))
        seg_rows = await bench_migration(Cell(args), args)
        rows += [{**r, "segment": seg} for r in seg_rows]
        write_csv(out / "sweep.csv", rows, CSV_FIELDS + ["segment"])     # what is done so far survives a failure
        print(f"segment {seg}: {len(seg_rows)} migrations in {time.monotonic() - t0:.0f} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cell = a.use_cell or a.cell
    t0 = time.monotonic()
    if not a.use_cell:
        print(f"cell {cell}: 2 hosts of {a.host_cpus} core / {a.host_mem_mib} MiB on {a.subnet}", flush=True)
        cellmod.up(cell, 2, subnet=a.subnet, host_cpus=[a.host_cpus], host_mem_mib=[a.host_mem_mib],
                   root=a.state_root, monitor_period_s=1.0)
    try:
        rows = asyncio.run(sweep(a, cell, out))
    finally:
        if not a.use_cell:
            cellmod.down(cell, a.state_root)
    print(f"sweep: {len(rows)} migrations in {(time.monotonic() - t0) / 60:.1f} min -> {out / 'sweep.csv'}", flush=True)
    if not a.no_fit:
        cmd = [str(REPO / ".venv" / "bin" / "cellctl"), "bench", "migration", "--fit-from", str(out / "sweep.csv"),
               "--fit", str(out / "calibration.json")]
        print("$ " + " ".join(cmd), flush=True)
        raise SystemExit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
