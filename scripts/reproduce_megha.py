#!/usr/bin/env python3
"""The Megha paper's figures at reduced scale on the model cell, through `cellctl sweep` (issue 16,
item 5): allocation time vs cluster size (seed 001 Figs 3-4, 6 and 8) and vs GM x LM counts
(Fig. 9), 3 seeds each.

    scripts/reproduce_megha.py run [--figures size,gmlm] [--workers N]
    scripts/reproduce_megha.py summarize [--figures size,gmlm] [--results DIR] [--docs DIR]

``run`` executes the sweeps ``sweeps/megha-size.toml`` and ``sweeps/megha-gmlm.toml`` (scenarios
``megha-jobs-{megha,central,sampling}.toml``: the Poisson-jobs workload on a warm cell) into
``results/megha-figures/<spec>/``; completed runs are skipped, so it can be resumed.
``summarize`` reads the completed run folders and writes ``docs/results/megha-size.{md,csv}`` and
``megha-gmlm.{md,csv}`` (one row per configuration: *mean (min–max)* over the seeds; the CSV has
every seed), keeping each page's hand-written "## Reading" section, and the plots into the
results folder (regenerated, not committed).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cellbed.controller.megha.alloc import PARTS  # noqa: E402 (after the repository is on the path)
from cellbed.experiment import load_run, summarize  # noqa: E402
from cellbed.experiment.sweep.plan import load_spec, plan_sweep  # noqa: E402
from megha_bench_lib import keep_reading, pyplot, save_fig  # noqa: E402 (scripts/ is this script's folder)
from sweep_tables import completed, num, run_completed, run_sweep, spread  # noqa: E402

RESULTS = REPO / "results" / "megha-figures"
DOCS = REPO / "docs" / "results"
FIGURES = {"size": "megha-size", "gmlm": "megha-gmlm"}
COUNTERS = ("launch_requests", "repartitions", "inconsistency_internal", "inconsistency_external", "requeued",
            "probes", "claims_refused")


def cmd_run(a) -> None:
    for fig in a.figures.split(","):
        run_sweep(REPO / "sweeps" / f"{FIGURES[fig]}.toml", Path(a.results) / FIGURES[fig], a.workers, REPO)


def run_values(run, folder: Path) -> dict:
    """One completed run's numbers (*run*: its load_run): tasks, allocation-time percentiles and
    max, the parts' shares, the front-end's and LMs' counters, its cost."""
    s = summarize(run)
    done = run_completed(folder)
    a = run.allocations(["outcome", "total_ms"])
    placed = a["total_ms"][a["outcome"] == "placed"]
    t, fe, lm = done["tasks"], done.get("frontend", {}), done.get("lm", {})
    return {"tasks": t["arrivals"], "placed": t["placed"], "pending": t["pending"],
         "p50": s.alloc_p50_ms, "p90": s.alloc_p90_ms, "p99": s.alloc_p99_ms, "p99.9": s.alloc_p999_ms,
         "max": float(placed.max()) if len(placed) else float("nan"),
         **{f"{p}_share": s.part_share.get(p, float("nan")) for p in PARTS},
         **{f"{p}_p50": s.part_median_ms.get(p, float("nan")) for p in PARTS},
         **{k: fe.get(k, 0) for k in COUNTERS},
         "lm_inconsistency_internal": lm.get("inconsistency_internal", 0),
         "lm_inconsistency_external": lm.get("inconsistency_external", 0),
         "cpu_s": done["cpu_s"], "peak_rss_mib": done["peak_rss_mib"]}


def collect(spec: Path, results: Path) -> tuple[list[dict], list[str]]:
    """Every completed run of *spec* as a row (the configuration's keys, the seed, its values),
    in the plan's order, and the keys of the planned runs that are missing."""
    plan = plan_sweep(load_spec(spec))
    rows, missing = [], []
    for r in plan.runs:
        folder = r.folder(results)
        if not completed(folder):
            missing.append(r.key)
            continue
        run = load_run(folder)
        sc = run.manifest["scenario"]
        fe, m = sc["policy"]["frontend"], sc["policy"]["megha"]
        rows.append({"frontend": fe, "nodes": sc["cell"]["nodes"], "gms": "" if fe == "sampling" else m["gms"],
                     "lms": "" if fe == "sampling" else m["lms"], "seed": r.seed, **run_values(run, folder)})
    return rows, missing


def configs(rows: list[dict], keys: tuple[str, ...]) -> list[tuple[tuple, list[dict]]]:
    """Rows grouped by the configuration *keys*, in first-appearance order."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return list(out.items())


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})


def pct(group: list[dict], key: str) -> str:
    x = [num(r[key]) * 100 for r in group]
    return spread(x, 1) + " %"


def ms(group: list[dict], key: str) -> str:
    return spread([r[key] for r in group], 2)


def count(group: list[dict], key: str) -> str:
    return spread([r[key] for r in group], 0 if all(isinstance(r[key], int) for r in group) else 1)


def accounting(rows: list[dict]) -> str:
    bad = [r for r in rows if r["placed"] + r["pending"] != r["tasks"]]
    ok = "Every run accounted for every task exactly once (placed, or pending at the drain's end), and " \
         "passed the model cell's no-double-allocation check (every task on one host, no host over capacity, " \
         "LM invariants), without which it would not have completed."
    return ok if not bad else "Task accounting FAILED in: " + ", ".join(
        f"{r['frontend']} {r['nodes']} seed {r['seed']}" for r in bad) + "."


def missing_line(missing: list[str]) -> list[str]:
    return [f"**Missing runs** (not completed, left out): {', '.join(missing)}.", ""] if missing else []


SETUP = ("Model cell in virtual time: the unchanged GM, LM, NodeAgent and sampling code "
         "(`cellbed/model/megha.py`). Nodes 4 cores / 16 GiB; one-way message delay 0.5 ms; LM updates every "
         "10 s; modelled processing (CostModel defaults: GM match 20 µs + 10 ns per node scanned, LM validation "
         "30 µs, sampling decision 5 µs). Workload (`workload.source = \"jobs\"`): Poisson jobs of 1-32 tasks (55 % "
         "single-task), 0.25-2 cores, 256-4096 MiB, log-uniform 2-60 s from the task's start, 50 % of jobs "
         "constrained, at 10 jobs/s per 1,000 nodes; every node starts 80 % full on average (background tasks "
         "ending within 2 x the arrivals' span); each run ends when every task has started, or 120 s after the "
         "last arrival.")


def size_page(rows: list[dict], missing: list[str], results: Path) -> str:
    lines = ["# Megha: allocation time vs cluster size (seed 001 Figs 3-4, 6 and 8, 1,000-50,000 nodes)", "",
             SETUP + " 20 s of arrivals; Megha 10 GMs x 10 LMs at every size (Fig. 8 holds 10 x 10), central 1 x 1, "
             "sampling d = 2 with 10 schedulers. The load per node and the fill are the same at every size.", "",
             "Each cell: *mean (min–max)* over seeds 1-3 (`sweeps/megha-size.toml`); every seed's row is in "
             "megha-size.csv. Allocation time in ms; parts are shares of the summed allocation time of placed tasks.",
             "", "| nodes | front-end | seeds | tasks | pending | p50 ms | p99 ms | max ms | queueing | processing "
             "| worker queue | communication |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (fe, n), g in configs(rows, ("frontend", "nodes")):
        lines.append(f"| {n:,} | {fe} | {len(g)} | {count(g, 'tasks')} | {count(g, 'pending')} | {ms(g, 'p50')} | "
                     f"{ms(g, 'p99')} | {ms(g, 'max')} | " + " | ".join(pct(g, f"{p}_share") for p in PARTS) + " |")
    lines += ["", "Counters, mean over the seeds (GM side; an inconsistency is an LM's refusal of a stale request: "
              "internal = in the GM's own partition, external = a repartition):", "",
              "| nodes | front-end | launch requests | repartitions | incons. internal | incons. external | requeued "
              "| probes | claims refused | CPU s per run |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (fe, n), g in configs(rows, ("frontend", "nodes")):
        own = ("probes", "claims_refused") if fe == "sampling" else COUNTERS[:5]
        cells = [f"{np.mean([r[k] for r in g]):.0f}" if k in own else "–" for k in COUNTERS]
        lines.append(f"| {n:,} | {fe} | " + " | ".join(cells) + f" | {np.mean([r['cpu_s'] for r in g]):.0f} |")
    plot = size_plot(rows, results)
    lines += ["", accounting(rows), ""] + missing_line(missing)
    lines += [f"Plot (regenerated, not committed): `{plot}`." if plot else "", "",
              "Regenerate: `scripts/reproduce_megha.py run --figures size` (54 runs through `cellctl sweep`), then "
              "`scripts/reproduce_megha.py summarize --figures size`."]
    return "\n".join(lines) + "\n"


def gmlm_page(rows: list[dict], missing: list[str], results: Path) -> str:
    lines = ["# Megha: allocation time vs GM x LM counts (seed 001 Fig. 9, at the paper's 30,000 workers)", "",
             SETUP + " 30,000 nodes, 5 s of arrivals (about 5,500 tasks). One user queue per GM, jobs round-robin "
             "over the users. Each LM owns an equal block of nodes, cut into one partition per GM. 1 GM x 1 LM is "
             "the central baseline.", "",
             "Each cell: *mean (min–max)* over seeds 1-3 (`sweeps/megha-gmlm.toml`); every seed's row is in "
             "megha-gmlm.csv.", "",
             "| GMs | LMs | seeds | pending | p50 ms | p99 ms | max ms | queueing | processing | communication | "
             "launch req. | repartitions | incons. internal | incons. external | requeued |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (g_, l_), g in configs(rows, ("gms", "lms")):
        lines.append(f"| {g_} | {l_} | {len(g)} | {count(g, 'pending')} | {ms(g, 'p50')} | {ms(g, 'p99')} | "
                     f"{ms(g, 'max')} | {pct(g, 'framework_queue_ms_share')} | {pct(g, 'processing_ms_share')} | "
                     f"{pct(g, 'communication_ms_share')} | "
                     + " | ".join(f"{np.mean([r[k] for r in g]):.0f}" for k in COUNTERS[:5]) + " |")
    agree = all(r["inconsistency_internal"] == r["lm_inconsistency_internal"]
                and r["inconsistency_external"] == r["lm_inconsistency_external"] for r in rows)
    lines += ["", "Inconsistencies are counted by the GMs (refused requests) and by the LMs (refusals): "
              + ("the two counts agree in every run." if agree else "the two counts DIFFER in some runs (see the CSV)."),
              "", accounting(rows), ""] + missing_line(missing)
    plot = gmlm_plot(rows, results)
    lines += [f"Plot (regenerated, not committed): `{plot}`." if plot else "", "",
              "Regenerate: `scripts/reproduce_megha.py run --figures gmlm` (48 runs through `cellctl sweep`), then "
              "`scripts/reproduce_megha.py summarize --figures gmlm`."]
    return "\n".join(lines) + "\n"


def size_plot(rows: list[dict], results: Path) -> str:
    plt = pyplot()
    if plt is None or not rows:
        return ""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (fe,), g in configs(rows, ("frontend",)):
        for q, style in (("p50", "-o"), ("p99", "--s")):
            pts = [(n, np.mean([r[q] for r in gg])) for (n,), gg in configs(g, ("nodes",))]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=4, label=f"{fe} {q}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("allocation time, ms (mean of seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _rel(save_fig(fig, str(results / "megha-size.png")))


def gmlm_plot(rows: list[dict], results: Path) -> str:
    plt = pyplot()
    if plt is None or not rows:
        return ""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, q in zip(axes, ("p50", "p99")):
        for (g_,), g in configs(rows, ("gms",)):
            pts = [(str(l_), np.mean([r[q] for r in gg])) for (l_,), gg in configs(g, ("lms",))]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=4, label=f"{g_} GM")
        ax.set_xlabel("LMs")
        ax.set_ylabel(f"{q} allocation time, ms")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _rel(save_fig(fig, str(results / "megha-gmlm.png")))


def _rel(path: str) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


def summarize_figure(fig: str, spec: Path, results: Path, docs: Path) -> Path | None:
    """Figure *fig*'s page and CSV in *docs* from the completed runs of *spec* in *results*
    (None if no run completed); the page's "## Reading" section is kept."""
    rows, missing = collect(spec, results)
    name = FIGURES[fig]
    if not rows:
        print(f"{name}: no completed run in {results}")
        return None
    docs.mkdir(parents=True, exist_ok=True)
    write_csv(docs / f"{name}.csv", rows)
    page = (size_page if fig == "size" else gmlm_page)(rows, missing, results)
    md = docs / f"{name}.md"
    md.write_text(page + keep_reading(str(md)))
    print(f"wrote {md} and {name}.csv ({len(rows)} runs, {len(missing)} missing)")
    return md


def cmd_summarize(a) -> None:
    for fig in a.figures.split(","):
        name = FIGURES[fig]
        summarize_figure(fig, REPO / "sweeps" / f"{name}.toml", Path(a.results) / name, Path(a.docs))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("run", "summarize"):
        p = sub.add_parser(cmd)
        p.add_argument("--figures", default="size,gmlm", help="comma-separated: size, gmlm")
        p.add_argument("--results", default=str(RESULTS), help="the sweeps' folders (default results/megha-figures)")
        if cmd == "run":
            p.add_argument("--workers", type=int, default=0, help="LocalCluster workers (0: cellctl sweep's choice)")
        else:
            p.add_argument("--docs", default=str(DOCS), help="where the pages go (default docs/results)")
    a = ap.parse_args(argv)
    for f in a.figures.split(","):
        if f not in FIGURES:
            ap.error(f"--figures: {f!r} is not one of {', '.join(FIGURES)}")
    (cmd_run if a.cmd == "run" else cmd_summarize)(a)


if __name__ == "__main__":
    main()
