"""The Megha paper's sweeps on the model cell: allocation time vs cluster size and vs GM x LM counts, their CSVs, plots and results pages."""
from __future__ import annotations

import os

import numpy as np
from megha_bench_lib import (
    COUNTER_KEYS,
    WORKLOAD_SHAPE,
    keep_reading,
    point_row,
    pyplot,
    read_rows_csv,
    run_model_point,
    save_fig,
    write_rows_csv,
)

from cellbed.controller.megha.alloc import PARTS  # after megha_bench_lib: it puts the repository on the path


# --- sweep-size: allocation time vs cluster size (seed 001 Figs 6 and 8) ----------------------------------


def sweep_size(sizes, frontends=("megha", "central", "sampling"), *, gms: int = 10, lms: int = 10,
               base_nodes: int = 10_000, base_job_rate: float = 100.0, duration_s: float = 20.0, fill: float = 0.8,
               seed: int = 1, drain_s: float = 120.0, quiet: bool = False, on_row=None) -> list[dict]:
    """One row per (size, front-end). The workload keeps its shape and scales with the cell: jobs
    arrive at base_job_rate * nodes / base_nodes per s for duration_s, so the offered load per node
    and the initial fill are the same at every size and the task count grows with the node count.
    Megha keeps gms x lms fixed (the paper's Fig. 8 holds 10 GMs x 10 LMs); central is 1 x 1."""
    rows = []
    for n in sizes:
        rate = base_job_rate * n / base_nodes
        for fe in frontends:
            p = run_model_point(fe, n, min(gms, n), min(lms, n), seed=seed, duration_s=duration_s, job_rate=rate,
                                fill=fill, drain_s=drain_s, quiet=quiet)
            rows.append(point_row(p))
            if on_row is not None:
                on_row(rows)
    return rows


# --- sweep-gmlm: allocation time vs GM x LM counts at a fixed size (seed 001 Fig. 9) -----------------------


def sweep_gmlm(nodes: int, gms_list, lms_list, *, job_rate: float = 100.0, duration_s: float = 20.0,
               fill: float = 0.8, seed: int = 1, drain_s: float = 120.0, quiet: bool = False,
               on_row=None) -> list[dict]:
    """One row per (GMs, LMs), Megha only, same cell size and workload (users = one queue per GM,
    jobs round-robin over them, so every configuration sees the same tasks at the same times)."""
    rows = []
    for g in gms_list:
        for l in lms_list:
            p = run_model_point("megha", nodes, g, l, seed=seed, duration_s=duration_s, job_rate=job_rate, fill=fill,
                                drain_s=drain_s, quiet=quiet)
            rows.append(point_row(p))
            if on_row is not None:
                on_row(rows)
    return rows


def fmt_ms(x: float) -> str:
    return "–" if x != x else (f"{x:.2f}" if x < 100 else f"{x:.0f}")


def fmt_pct(x: float) -> str:
    return "–" if x != x else f"{x:.1%}"


def accounting_line(rows: list[dict]) -> str:
    bad = [r for r in rows if r["unaccounted"] or r["duplicate_records"]
           or r["placed"] + r["pending"] + r["rejected"] != r["tasks"]]
    head = ("Every point ended with the model cell's no-double-allocation check passing (every model task on one "
            "host, no host over capacity, LM invariants)")
    if not bad:
        return head + " and every task accounted for exactly once (placed, or pending at the drain deadline)."
    return head + "; task accounting FAILED at: " + ", ".join(
        f"{r['frontend']} {r['nodes']} nodes {r['gms']}x{r['lms']} (unaccounted {r['unaccounted']}, "
        f"duplicate records {r['duplicate_records']})" for r in bad) + "."


def inconsistency_agreement(rows: list[dict]) -> str:
    bad = [r for r in rows if r["frontend"] != "sampling" and (
        r["inconsistency_internal"] != r["lm_inconsistency_internal"]
        or r["inconsistency_external"] != r["lm_inconsistency_external"])]
    if not bad:
        return "the two counts agree in every row"
    return "they DIFFER at " + ", ".join(
        f"{r['gms']}x{r['lms']} (GM {r['inconsistency_internal']}/{r['inconsistency_external']}, "
        f"LM {r['lm_inconsistency_internal']}/{r['lm_inconsistency_external']})" for r in bad)


def box_line(rows: list[dict]) -> str:
    loads = [r["loadavg_1m"] for r in rows]
    return (f"Measured (finished {rows[-1]['finished_utc']} UTC) on this project's {os.cpu_count()}-core box, shared "
            f"with other CPU-heavy work (1-min load average {min(loads):.1f}-{max(loads):.1f} at the end of the "
            f"points); sweep wall time {sum(r['wall_s'] for r in rows):.0f} s (build + run + check of every point); "
            f"peak RSS of the benchmark process {max(r['peak_rss_mib'] for r in rows)} MiB. Wall times are as measured "
            f"on that shared box, for scale only.")


def sweep_rows(args, name: str, run) -> list[dict]:
    path = os.path.join(args.out, name)
    if args.render_only:
        return read_rows_csv(path)
    rows = run(lambda rs: write_rows_csv(path + ".partial", rs))     # the points so far, if it is stopped
    write_rows_csv(path, rows)
    if os.path.exists(path + ".partial"):
        os.remove(path + ".partial")
    return rows


def bench_sweep_size(args) -> str:
    sizes = [int(x) for x in args.sizes.split(",")]
    frontends = args.frontends.split(",")
    rows = sweep_rows(args, "megha-size.csv", lambda on_row: sweep_size(
        sizes, frontends, gms=args.gms, lms=args.lms, base_nodes=args.base_nodes, base_job_rate=args.base_job_rate,
        duration_s=args.duration_s, fill=args.fill, seed=args.seed, drain_s=args.drain_s, on_row=on_row))
    png = _size_plot(args, rows, sizes, frontends)
    md_path = os.path.join(args.out, "megha-size.md")
    reading = keep_reading(md_path)
    lines = [
        "# Megha: allocation time vs cluster size (seed 001 Figs 6 and 8, reduced scale)\n",
        f"Model cell in virtual time (the unchanged GM/LM/NodeAgent and sampling code, `cellbed/model/megha.py`). "
        f"Megha {args.gms} GMs x {args.lms} LMs at every size (the paper's Fig. 8 holds 10 x 10), central 1 x 1, "
        f"sampling d = 2 with {args.gms} schedulers. Nodes 4 cores / 16 GiB; one-way message delay 0.5 ms; LM updates "
        f"every 10 s; modelled processing (CostModel defaults: GM match 20 µs + 10 ns per node scanned, LM validation 30 µs).\n",
        f"Workload, scaled to the cell: seed {args.seed}, {WORKLOAD_SHAPE}; jobs arrive at "
        f"{args.base_job_rate:g}/s per {args.base_nodes:,} nodes (so {args.base_job_rate / args.base_nodes * 1000:g}/s "
        f"per 1,000 nodes) for {args.duration_s:g} s; every node starts {args.fill:.0%} full on average (background "
        f"tasks ending within {2 * args.duration_s:g} s). The offered load per node and the fill are the same at every "
        f"size; the task count grows with the cell. Drain: up to {args.drain_s:g} s of virtual time after the last arrival.\n",
        "| nodes | front-end | tasks | offered load | placed | pending | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | "
        "queueing | processing | worker queue | communication | wall s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['nodes']:,} | {r['frontend']} | {r['tasks']:,} | {r['offered_load']:.1%} | {r['placed']:,} | "
                     f"{r['pending']} | {fmt_ms(r['p50'])} | {fmt_ms(r['p90'])} | {fmt_ms(r['p99'])} | {fmt_ms(r['p99.9'])} | "
                     f"{fmt_ms(r['max'])} | " + " | ".join(fmt_pct(r[f'{p}_share']) for p in PARTS) + f" | {r['wall_s']:.0f} |")
    lines.append("\nParts: share of the summed allocation time of placed tasks (queueing = framework queueing: GM "
                 "queue and LM lock; worker queue = sampling's reservation queue). Median of each part, ms:\n")
    lines.append("| nodes | front-end | framework queueing | processing | worker queueing | communication |\n"
                 "|---:|---|---:|---:|---:|---:|")
    for r in rows:
        lines.append(f"| {r['nodes']:,} | {r['frontend']} | " + " | ".join(f"{r[f'{p}_p50']:.3f}" for p in PARTS) + " |")
    lines.append("\nCounters (GM side; inconsistencies are refusals by an LM of a stale request, internal = in the "
                 "GM's own partition, external = a repartition):\n")
    lines.append("| nodes | front-end | launch requests | repartitions | inconsistency internal | inconsistency "
                 "external | requeued | probes | claims refused |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        own = ("probes", "claims_refused") if r["frontend"] == "sampling" else COUNTER_KEYS[:5]
        lines.append(f"| {r['nodes']:,} | {r['frontend']} | "
                     + " | ".join(str(r[k]) if k in own else "–" for k in COUNTER_KEYS) + " |")
    lines.append("\n" + accounting_line(rows) + "\n")
    cmd = (f"scripts/bench_megha.py sweep-size --sizes {args.sizes} --gms {args.gms} --lms {args.lms} "
           f"--duration-s {args.duration_s:g} --base-job-rate {args.base_job_rate:g} --seed {args.seed}")
    lines += sweep_md_tail(rows, png, "allocation time vs cluster size", cmd, "megha-size.csv", "point")
    return "\n".join(lines) + reading


def _size_plot(args, rows: list[dict], sizes: list[int], frontends: list[str]) -> str:
    """megha-size.png: p50/p99 vs cluster size, and the parts' shares per point ("" without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return ""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    for fe, color in zip(frontends, ("C0", "C1", "C2", "C3")):
        rs = [r for r in rows if r["frontend"] == fe]
        x = [r["nodes"] for r in rs]
        for q, style in (("p50", "-o"), ("p99", "--s")):
            a1.plot(x, [r[q] for r in rs], style, color=color, ms=4, label=f"{fe} {q}")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xticks(sizes, [f"{n:,}" for n in sizes], fontsize=7)
    a1.minorticks_off()
    a1.set_xlabel("nodes")
    a1.set_ylabel("allocation time, ms")
    a1.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=7, ncol=2)
    width = 0.8 / max(1, len(frontends))
    bottoms = np.zeros(len(rows))
    xs = np.array([sizes.index(r["nodes"]) + (frontends.index(r["frontend"]) - (len(frontends) - 1) / 2) * width
                   for r in rows])
    for part, color in zip(PARTS, ("C4", "C5", "C6", "C7")):
        h = np.array([r[f"{part}_share"] if r[f"{part}_share"] == r[f"{part}_share"] else 0.0 for r in rows])
        a2.bar(xs, h, width * 0.95, bottom=bottoms, color=color, label=part.replace("_ms", ""))
        bottoms += h
    a2.set_xticks(range(len(sizes)), [f"{n // 1000}k" if n % 1000 == 0 else f"{n / 1000:g}k" for n in sizes])
    a2.set_xlabel("nodes (bars: " + ", ".join(frontends) + ")")
    a2.set_ylabel("share of summed allocation time")
    a2.legend(fontsize=7, loc="lower right")
    return save_fig(fig, os.path.join(args.out, "megha-size.png"))


def bench_sweep_gmlm(args) -> str:
    gms_list = [int(x) for x in args.gms.split(",")]
    lms_list = [int(x) for x in args.lms.split(",")]
    rows = sweep_rows(args, "megha-gmlm.csv", lambda on_row: sweep_gmlm(
        args.nodes, gms_list, lms_list, job_rate=args.job_rate, duration_s=args.duration_s, fill=args.fill,
        seed=args.seed, drain_s=args.drain_s, on_row=on_row))
    png = ""
    plt = pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        for ax, q in zip(axes, ("p50", "p99")):
            for g in gms_list:
                rs = [r for r in rows if r["gms"] == g]
                ax.plot([str(r["lms"]) for r in rs], [r[q] for r in rs], "-o", ms=4, label=f"{g} GM")
            ax.set_xlabel("LMs")
            ax.set_ylabel(f"{q} allocation time, ms")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"Megha, {args.nodes:,} nodes: allocation time vs GMs x LMs", fontsize=9)
        png = save_fig(fig, os.path.join(args.out, "megha-gmlm.png"))
    md_path = os.path.join(args.out, "megha-gmlm.md")
    reading = keep_reading(md_path)
    r0 = rows[0]
    lines = [
        f"# Megha: allocation time vs GM x LM counts (seed 001 Fig. 9, reduced scale: {args.nodes:,} nodes)\n",
        "Model cell in virtual time (the unchanged GM/LM/NodeAgent code). One user queue per GM, jobs round-robin "
        "over the users, so every configuration gets the same tasks at the same times. Each LM owns an equal block "
        "of nodes, cut into one partition per GM. Nodes 4 cores / 16 GiB; one-way message delay 0.5 ms; LM updates "
        "every 10 s; modelled processing (GM match 20 µs + 10 ns per node scanned, LM validation 30 µs). "
        "1 GM x 1 LM is the `central` baseline.\n",
        f"Workload: seed {args.seed}, {WORKLOAD_SHAPE}; {r0['tasks']:,} tasks, jobs at {args.job_rate:g}/s for "
        f"{args.duration_s:g} s (offered load {r0['offered_load']:.1%} of the cell's CPU), the cell {args.fill:.0%} full "
        f"on average at the start.\n",
        "| GMs | LMs | placed | pending | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | queueing | processing | "
        "communication | launch req. | repartitions | incons. internal | incons. external | requeued | wall s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['gms']} | {r['lms']} | {r['placed']:,} | {r['pending']} | {fmt_ms(r['p50'])} | {fmt_ms(r['p90'])} | "
                     f"{fmt_ms(r['p99'])} | {fmt_ms(r['p99.9'])} | {fmt_ms(r['max'])} | "
                     f"{fmt_pct(r['framework_queue_ms_share'])} | {fmt_pct(r['processing_ms_share'])} | "
                     f"{fmt_pct(r['communication_ms_share'])} | {r['launch_requests']:,} | {r['repartitions']} | "
                     f"{r['inconsistency_internal']} | {r['inconsistency_external']} | {r['requeued']} | "
                     f"{r['wall_s']:.0f} |")
    lines.append("\nqueueing / processing / communication: share of the summed allocation time of placed tasks "
                 "(worker queueing is 0 for Megha: the LM validated the node). Inconsistencies are counted by the GMs "
                 f"(refused requests) and by the LMs (refusals): {inconsistency_agreement(rows)}. requeued: tasks "
                 "sent back to the tail of their queue because nothing fitted in the GM's view.\n")
    lines.append(accounting_line(rows) + "\n")
    cmd = (f"scripts/bench_megha.py sweep-gmlm --nodes {args.nodes} --gms {args.gms} --lms {args.lms} "
           f"--job-rate {args.job_rate:g} --duration-s {args.duration_s:g} --seed {args.seed}")
    lines += sweep_md_tail(rows, png, "allocation time vs GMs x LMs", cmd, "megha-gmlm.csv", "configuration")
    return "\n".join(lines) + reading


def sweep_md_tail(rows: list[dict], png: str, alt: str, cmd: str, csv_name: str, row_is: str) -> list[str]:
    """The end of a sweep's markdown: plot, box line, how to regenerate."""
    out = [f"![{alt}]({os.path.basename(png)})\n"] if png else []
    out.append(box_line(rows) + "\n")
    out.append(f"Regenerate (tables, CSV and plot; the Reading section below is kept): `.venv/bin/python {cmd}` "
               f"(CSV: {csv_name}, one row per {row_is} with every percentile, part and counter).\n")
    return out
