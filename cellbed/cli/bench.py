"""cellctl bench migration: sweep guest memory x working set x dirty rate x bandwidth (x TLS on/off
for the migration data) on a real cell and write every MigrationRecord to CSV, plus a table of
medians per cell of the sweep. With --fit OUT, fit the migration cost model to the sweep's records
and write its calibration file; --fit-from CSV fits from earlier sweeps without running anything.

Each point of the sweep boots one guest on --src, waits until the guest's own page-write counter
shows its dirty rate (so that the record's guest_dirty_mib_s is the rate the migration met, not a
boot-time 0), and migrates it --repeat times back and forth between --src and --dst."""
from __future__ import annotations

import asyncio
import csv
import dataclasses
import hashlib
import itertools
import math
import os
import statistics
import sys
import time

from cellbed.domain import errors
from cellbed.domain import vm as vmdom
from cellbed.cli.common import OUTCOME_NAMES, Cell, emit, msg_dict, table
from cellbed.policy.migration import costfile, costfit
from cellbed.v1 import node_pb2 as npb

CSV_FIELDS = ["mem_mib", "wss_mib", "dirty_mib_s", "bandwidth_mib_s", "max_downtime_ms", "postcopy", "auto_converge",
              "tls", "repeat", "src", "dst",
              "outcome", "wall_ms", "time_elapsed_ms", "downtime_ms", "setup_time_ms", "data_total_bytes",
              "memory_processed_bytes", "memory_iteration", "memory_dirty_rate", "guest_dirty_mib_s",
              "sampled_dirty_mib_s", "memory_bps", "postcopy_switched",
              "boot_s", "detail"]

WARM_DEADLINE_S = 20.0
"""How long a point waits for its guest's dirty rate to show before migrating anyway (the record's
guest_dirty_mib_s then says what the guest measured)."""


def bench_wss(mem_mib: int) -> int:
    """Working set for a guest of mem_mib: half its memory, within what the guest can hold."""
    return max(8, min(mem_mib // 2, mem_mib - 80))


@dataclasses.dataclass(frozen=True)
class Point:
    mem: int
    wss: int
    dirty: float | str          # MiB/s, or "max"
    bw: int
    tls: bool | None            # None: the node's default (on unless insecure)


def plan(args) -> tuple[list[Point], list[str]]:
    """Every point of the sweep, and a note per (memory, working set) pair left out because the
    working set does not fit the guest. InvalidArgument when no pair fits."""
    dirties = ["max" if math.isinf(d) else d for d in args.dirty_mib_s]
    tlses = getattr(args, "tls", None) or [None]
    wsses = getattr(args, "wss_mib", None)
    pairs, skipped = [], []
    for mem in args.mem_mib:
        for wss in (wsses or [bench_wss(mem)]):
            if wss > vmdom.max_wss_mib(mem):
                skipped.append(f"wss {wss} MiB on a {mem} MiB guest (at most {vmdom.max_wss_mib(mem)} MiB)")
            else:
                pairs.append((mem, wss))
    if not pairs:
        raise errors.InvalidArgument(f"--wss-mib: no working set fits any --mem-mib guest; allowed 0..guest "
                                     f"memory - 80 MiB, got {', '.join(skipped)}")
    return [Point(m, w, d, b, t) for (m, w), d, b, t in itertools.product(pairs, dirties, args.bandwidth_mib_s,
                                                                           tlses)], skipped


async def cmd_bench_migration(args) -> None:
    fit_from = getattr(args, "fit_from", None) or []
    if fit_from:
        if not args.fit:
            raise errors.InvalidArgument("--fit-from: needs --fit OUT, the calibration file to write")
        rows, sources = [], []
        for path in fit_from:
            got = read_rows(path)
            rows += got
            sources.append((path, len(got)))
        write_fit(args, rows, sources)
        return
    if args.fit:
        costfile.check_writable(args.fit, "--fit")
    rows = await bench_migration(Cell(args), args)
    if args.fit:
        write_fit(args, [{k: str(v) for k, v in r.items()} for r in rows], [(args.csv, len(rows))])


def read_rows(path: str) -> list[dict]:
    """The rows of a bench CSV (this command's --csv); InvalidArgument naming the file otherwise."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise errors.InvalidArgument(f"--fit-from {path}: cannot read it ({e})") from None
    missing = [k for k in costfit.CSV_NEEDS if rows and k not in rows[0]]
    if not rows or missing:
        raise errors.InvalidArgument(f"--fit-from {path}: not a bench CSV with rows "
                                     f"({'no rows' if not rows else 'missing columns ' + ', '.join(missing)})")
    return rows


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_fit(args, rows: list[dict], sources: list[tuple[str, int]]) -> None:
    """Fit the cost model to *rows* (split into fit and held-out configurations by the documented
    rule) and write the calibration file --fit, with its provenance and errors."""
    try:
        recs = costfit.records_from_rows(rows)
        res = costfit.fit(recs)
    except ValueError as e:
        raise errors.InvalidArgument(f"--fit: {e} (from {', '.join(p for p, _ in sources)})") from None
    prov = {"sources": [{"path": p, "sha256": _sha256(p), "rows": n} for p, n in sources],
            "command": " ".join(["cellctl"] + sys.argv[1:]), "created_unix_s": round(time.time(), 3)}
    doc = costfile.document(res, prov)
    costfile.write(args.fit, doc)
    err = [{"set": s, "kind": k, "quantity": q, "n": e["n"], "median_pct": f"{e['median_pct']:.1f}",
            "p90_pct": f"{e['p90_pct']:.1f}", "max_pct": f"{e['max_pct']:.1f}"}
           for s in ("fit", "held_out") for k in ("per_migration", "per_configuration")
           for q, e in doc["errors"][s][k].items() if e["n"]]
    emit(args, doc, f"fitted {res.n_fit} migrations ({res.n_fit_configs} configurations), held out "
                    f"{res.n_held_out} ({res.n_held_out_configs}); wrote {args.fit}\n"
                    + table(err, ["set", "kind", "quantity", "n", "median_pct", "p90_pct", "max_pct"]))


async def _settled(cell, host: str, dst: str, name: str, dirty: float | str) -> None:
    """Wait, at most WARM_DEADLINE_S, until the guest's own dirty-rate counter, as its host's
    monitor last read it, shows the workload running (at least half a finite target; above
    1 MiB/s for max), and until *dst*, which the guest may just have left, no longer lists it
    (a monitor sample taken before the guest left can list it for one more period)."""
    want = 0.0 if dirty != "max" and dirty <= 0 else 1.0 if dirty == "max" else 0.5 * float(dirty)
    end = time.monotonic() + WARM_DEADLINE_S
    while time.monotonic() < end:
        async with cell.client(host) as cl:
            here = [v for v in (await cl.call("ListVms", npb.ListVmsRequest(), timeout=10)).vms if v.spec.name == name]
        async with cell.client(dst) as cl:
            there = [v for v in (await cl.call("ListVms", npb.ListVmsRequest(), timeout=10)).vms
                     if v.spec.name == name]
        if not there and (want == 0 or any(v.guest_dirty_mib_s >= want for v in here)):
            return
        await asyncio.sleep(0.5)


async def _stop(cell, name: str, at: str) -> None:
    """Stop the guest where its last migration left it (a host that it just left may list it for a
    moment longer), else wherever the cell finds it."""
    for host in (at, None):
        try:
            host = host or (await cell.find_vm(name)).host
            async with cell.client(host) as cl:
                await cl.call("StopVm", npb.StopVmRequest(name=name), timeout=60)
            return
        except errors.NotFound:
            if host != at:
                raise


async def bench_migration(cell, args) -> list[dict]:
    errors.check_range("--repeat", args.repeat, 1, 100)
    points, skipped = plan(args)
    for s in skipped:
        print(f"  skipped: {s}", flush=True)
    auto = bool(getattr(args, "auto_converge", False))
    timeout_s = float(getattr(args, "timeout_s", 0) or 120)
    ends = (args.src, args.dst)
    rows = []
    for k, p in enumerate(points):
        name = f"bench-{k}-{p.mem}m-{os.getpid() % 10000}"
        w = npb.Workload(cpu_load=0.05, wss_mib=p.wss)
        if p.dirty == "max":
            w.dirty_max = True
        else:
            w.dirty_mib_s = p.dirty
        async with cell.client(args.src) as cl:
            vm = (await cl.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(
                name=name, mem_mib=p.mem, vcpus=1, workload=w)), timeout=300)).vm
        at = args.src
        try:
            for i in range(args.repeat):
                src, dst = ends[i % 2], ends[(i + 1) % 2]
                await _settled(cell, src, dst, name, p.dirty)
                opts = npb.MigrationOptions(bandwidth_mib_s=p.bw, max_downtime_ms=args.max_downtime_ms,
                                            postcopy=args.postcopy, auto_converge=auto,
                                            completion_timeout_s=timeout_s, tls=p.tls)
                async with cell.client(src) as cl:      # where the last migration left it
                    rec = (await cl.call("MigrateVm", npb.MigrateVmRequest(name=name, dest_host=dst, options=opts),
                                         timeout=timeout_s * 3 + 300)).record
                d = msg_dict(rec)
                row = {k: d.get(k, "") for k in CSV_FIELDS}
                row.update(mem_mib=p.mem, wss_mib=p.wss, dirty_mib_s=p.dirty, bandwidth_mib_s=p.bw,
                           max_downtime_ms=args.max_downtime_ms, postcopy=args.postcopy, auto_converge=auto,
                           tls=rec.tls, repeat=i, src=src, dst=dst, outcome=OUTCOME_NAMES[rec.outcome],
                           boot_s=round(vm.boot_to_workload_s, 2))
                rows.append(row)
                at = dst if rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED else src
                print(f"  mem {p.mem} wss {p.wss} MiB dirty {p.dirty} MiB/s (guest {rec.guest_dirty_mib_s:.1f}) "
                      f"bw {p.bw or 'unlimited'} tls {'on' if rec.tls else 'off'} {src}->{dst}: {row['outcome']} "
                      f"total {rec.time_elapsed_ms:.0f} ms downtime {rec.downtime_ms:.0f} ms "
                      f"{rec.memory_processed_bytes / 2**20:.1f} MiB sent ({rec.memory_iteration} iterations)",
                      flush=True)
                if rec.outcome != npb.MIGRATION_OUTCOME_SUCCEEDED:
                    break   # where the guest is (and whether it is sound) is no longer known for a ping-pong
        finally:
            await _stop(cell, name, at)
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        wr.writeheader()
        wr.writerows(rows)
    emit(args, {"csv": args.csv, "summary": summary(rows), "rows": rows},
         f"wrote {len(rows)} migrations to {args.csv} (medians of successful runs):\n"
         + table(summary(rows), ["mem_mib", "wss_mib", "dirty_mib_s", "bw_mib_s", "tls", "ok", "total_ms",
                                 "downtime_ms", "total_MiB", "sent_MiB", "iter", "boot_s"]))
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for (mem, wss, dirty, bw, tls), grp in itertools.groupby(
            rows, key=lambda r: (r["mem_mib"], r["wss_mib"], r["dirty_mib_s"], r["bandwidth_mib_s"], r["tls"])):
        grp = list(grp)
        ok = [r for r in grp if r["outcome"] == "succeeded"]
        med = (lambda k: f"{statistics.median(float(r[k]) for r in ok):.0f}") if ok else (lambda k: "-")
        mib = (lambda k: f"{statistics.median(float(r[k]) for r in ok) / 2**20:.1f}") if ok else (lambda k: "-")
        out.append({"mem_mib": mem, "wss_mib": wss, "dirty_mib_s": dirty, "bw_mib_s": bw or "unl",
                    "tls": "on" if tls else "off", "ok": f"{len(ok)}/{len(grp)}", "total_ms": med("time_elapsed_ms"),
                    "downtime_ms": med("downtime_ms"), "total_MiB": mib("data_total_bytes"),
                    "sent_MiB": mib("memory_processed_bytes"), "iter": med("memory_iteration"),
                    "boot_s": f"{statistics.median(r['boot_s'] for r in grp):.1f}"})
    return out
