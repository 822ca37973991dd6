"""cellctl bench migration: sweep guest memory x dirty rate x bandwidth (x TLS on/off for the
migration data) on a real cell and write every MigrationRecord to CSV, plus a table of medians per
cell of the sweep."""
from __future__ import annotations

import csv
import itertools
import math
import os
import statistics

from cellbed.domain import errors
from cellbed.cli.common import OUTCOME_NAMES, Cell, emit, migrate, msg_dict, table
from cellbed.v1 import node_pb2 as npb

CSV_FIELDS = ["mem_mib", "wss_mib", "dirty_mib_s", "bandwidth_mib_s", "max_downtime_ms", "postcopy", "tls", "repeat",
              "outcome", "wall_ms", "time_elapsed_ms", "downtime_ms", "setup_time_ms", "data_total_bytes",
              "memory_processed_bytes", "memory_iteration", "memory_dirty_rate", "guest_dirty_mib_s",
              "sampled_dirty_mib_s", "memory_bps", "postcopy_switched",
              "boot_s", "detail"]


def bench_wss(mem_mib: int) -> int:
    """Working set for a guest of mem_mib: half its memory, within what the guest can hold."""
    return max(8, min(mem_mib // 2, mem_mib - 80))


async def cmd_bench_migration(args) -> None:
    await bench_migration(Cell(args), args)


async def bench_migration(cell, args) -> list[dict]:
    mems = list(args.mem_mib)
    dirties = ["max" if math.isinf(d) else d for d in args.dirty_mib_s]
    bws = list(args.bandwidth_mib_s)
    tlses = getattr(args, "tls", None) or [None]   # None: the node's default (on unless insecure)
    errors.check_range("--repeat", args.repeat, 1, 100)
    rows = []
    for mem, dirty, bw, tls in itertools.product(mems, dirties, bws, tlses):
        for i in range(args.repeat):
            name = f"bench-{mem}-{str(dirty).replace('.', 'p')}-{bw}-{'d' if tls is None else int(tls)}-{i}"
            w = npb.Workload(cpu_load=0.05, wss_mib=bench_wss(mem))
            if dirty == "max":
                w.dirty_max = True
            else:
                w.dirty_mib_s = dirty
            async with cell.client(args.src) as cl:
                vm = (await cl.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(
                    name=name, mem_mib=mem, vcpus=1, workload=w)), timeout=300)).vm
            try:
                rec = await migrate(cell, name, args.dst, npb.MigrationOptions(
                    bandwidth_mib_s=bw, max_downtime_ms=args.max_downtime_ms, postcopy=args.postcopy,
                    completion_timeout_s=120, tls=tls), show_progress=False)
            finally:
                v = await cell.find_vm(name)
                async with cell.client(v.host) as cl:
                    await cl.call("StopVm", npb.StopVmRequest(name=name), timeout=60)
            d = msg_dict(rec)
            row = {k: d.get(k, "") for k in CSV_FIELDS}
            row.update(mem_mib=mem, wss_mib=bench_wss(mem), dirty_mib_s=dirty, bandwidth_mib_s=bw,
                       max_downtime_ms=args.max_downtime_ms, postcopy=args.postcopy, tls=rec.tls, repeat=i,
                       outcome=OUTCOME_NAMES[rec.outcome], boot_s=round(vm.boot_to_workload_s, 2))
            rows.append(row)
            print(f"  mem {mem} MiB dirty {dirty} MiB/s bw {bw or 'unlimited'} tls {'on' if rec.tls else 'off'}: "
                  f"{row['outcome']} "
                  f"total {rec.time_elapsed_ms:.0f} ms downtime {rec.downtime_ms:.0f} ms "
                  f"{rec.memory_processed_bytes / 2**20:.1f} MiB sent ({rec.memory_iteration} iterations)", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        wr.writeheader()
        wr.writerows(rows)
    summary = []
    for (mem, dirty, bw, tls), grp in itertools.groupby(rows, key=lambda r: (r["mem_mib"], r["dirty_mib_s"],
                                                                             r["bandwidth_mib_s"], r["tls"])):
        grp = list(grp)
        ok = [r for r in grp if r["outcome"] == "succeeded"]
        med = (lambda k: f"{statistics.median(float(r[k]) for r in ok):.0f}") if ok else (lambda k: "-")
        summary.append({"mem_mib": mem, "wss_mib": bench_wss(mem), "dirty_mib_s": dirty, "bw_mib_s": bw or "unl",
                        "tls": "on" if tls else "off",
                        "ok": f"{len(ok)}/{len(grp)}", "total_ms": med("time_elapsed_ms"),
                        "downtime_ms": med("downtime_ms"),
                        "total_MiB": f"{statistics.median(float(r['data_total_bytes']) for r in ok) / 2**20:.1f}" if ok else "-",
                        "sent_MiB": f"{statistics.median(float(r['memory_processed_bytes']) for r in ok) / 2**20:.1f}" if ok else "-",
                        "iter": med("memory_iteration"), "boot_s": f"{statistics.median(r['boot_s'] for r in grp):.1f}"})
    emit(args, {"csv": args.csv, "summary": summary, "rows": rows},
         f"wrote {len(rows)} migrations to {args.csv} (medians of successful runs):\n"
         + table(summary, ["mem_mib", "wss_mib", "dirty_mib_s", "bw_mib_s", "tls", "ok", "total_ms", "downtime_ms",
                           "total_MiB", "sent_MiB",
                           "iter", "boot_s"]))
    return rows
