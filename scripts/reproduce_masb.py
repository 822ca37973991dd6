#!/usr/bin/env python3
"""MASB Tables 3–7 at reduced scale on the model cell (issue 5, item 6), and the 12.5k-node scale
benchmark (acceptance 5).

    scripts/reproduce_masb.py run [--tables 3,4,5,6,7,4x] [--workers N]
    scripts/reproduce_masb.py summarize [--tables ...]   # docs/results/masb-table*.{csv,md} + plots
    scripts/reproduce_masb.py scale [--nodes 12500] [--hours 1.5] [--profile-from 70] [--profile-minutes 5]

``run`` executes every run of the chosen tables with ``cellctl sweep`` (issue 16) on the specs in
``sweeps/masb-t*.toml`` (500 nodes, 6 simulated hours, seeds 1-3; Table 7: 500 to 4,000 nodes, 3
hours), into ``results/masb-tables/<spec>/``; completed runs are skipped, so it can be resumed.
``summarize`` reads the completed folders and writes the small tables committed under
docs/results/ plus, per table, ``cellctl report`` comparison plots of seed 1 into
``results/masb-tables/table<N>/`` (regenerated, not committed). ``scale`` runs the 12,500-node GCD-shaped cell with SAN on for a window of simulated
time, cProfiles a few simulated minutes after the warm start, and writes
docs/results/scale-benchmark.md (warm start, steady simulated min per wall min, peak RSS, where
the time goes).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import pstats
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cellbed.experiment import load_run, summarize  # noqa: E402 (after the repository is on the path)
from cellbed.experiment.profiling import parts_table  # noqa: E402
from cellbed.experiment.report.write import write_report  # noqa: E402
from cellbed.experiment.sweep.plan import load_spec, plan_sweep  # noqa: E402
from sweep_tables import completed, num, run_sweep, spread  # noqa: E402 (scripts/ is on the path: this script's folder)

PY = sys.executable
RESULTS = REPO / "results" / "masb-tables"
SWEEPS = REPO / "sweeps"
DOCS = REPO / "docs" / "results"
SC = REPO / "scenarios"


TABLE_SWEEPS = {"3": ["masb-t3"], "4": ["masb-t3", "masb-t4"], "4x": ["masb-t4x"], "5": ["masb-t3", "masb-t5"],
                "6": ["masb-t3", "masb-t6"], "7": ["masb-t7"]}
"""The sweep specs (sweeps/<name>.toml) whose runs make each table: Tables 4-6 share Table 3's
MASB run as their baseline (SIAS + SRAS, workload 1.00, no compaction)."""
BASELINE = ("masb-t3", "masb-table3-masb")


def config_id(r) -> str:
    """The configuration's label in the tables: the scenario, then the grid point's values."""
    stem = r.stem.removeprefix("masb-").replace("table3-", "t3-").replace("table6-", "t6-")
    vals = dict(r.grid)
    if "workload.multiplier" in vals:
        return f"t4-m{vals['workload.multiplier']:.2f}"
    if "workload.compaction" in vals:
        return f"t5-c{vals['workload.compaction']:.2f}"
    if "cell.nodes" in vals:
        return f"t7-x{vals['cell.nodes'] // 500}"
    return stem


def runs(tab: str) -> list[tuple[str, Path, str, int]]:
    """Table *tab*'s runs: [(run id, results folder, configuration label, seed)], from its sweep
    specs. Seed 1's ids carry no suffix; other seeds' end in -s<seed>."""
    out = []
    for name in TABLE_SWEEPS[tab]:
        plan = plan_sweep(load_spec(SWEEPS / f"{name}.toml"))
        for r in plan.runs:
            if name == BASELINE[0] and tab != "3" and r.stem != BASELINE[1]:
                continue
            cid = config_id(r)
            out.append((cid if r.seed == 1 else f"{cid}-s{r.seed}", r.folder(RESULTS / name), cid, r.seed))
    return out


def cmd_run(a) -> None:
    """Every sweep the chosen tables need, each through `cellctl sweep` (resumable: a completed
    run is skipped)."""
    names = list(dict.fromkeys(n for tab in a.tables.split(",") for n in TABLE_SWEEPS[tab]))
    for name in names:
        run_sweep(SWEEPS / f"{name}.toml", RESULTS / name, a.workers, REPO)


# ---------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------

def load(folder: Path):
    run = load_run(folder)
    return run, summarize(run)


# per table: title, [(column, function(run, summary, args) -> number or text, decimals)]
def _pct(attr):
    return lambda run, s, a: getattr(s, attr) * 100.0


ASR_COLS = [("STA %", _pct("asr_sta"), 2), ("TA %", _pct("asr_ta"), 2), ("PA %", _pct("asr_pa"), 2),
            ("DA %", _pct("asr_da"), 2), ("PA:DA", lambda r, s, a: s.pa_da_ratio, 2),
            ("idle %", _pct("idle_mean"), 2), ("overloaded mean %", _pct("overloaded_mean"), 3),
            ("overloaded max %", _pct("overloaded_max"), 2),
            ("ticks > 0.5 % overloaded (%)", _pct("ticks_over_threshold"), 1)]


def _done(r, key):
    return r.completed.get("tasks", {}).get(key, math.nan)


TABLES = {
    "3": ("MASB Table 3 (reduced scale): Borg-like best fit without migration vs MASB", [
        ("front-end", lambda r, s, a: r.manifest["scenario"]["policy"]["frontend"], None),
        ("SAN", lambda r, s, a: "on" if r.manifest["scenario"]["policy"]["san"]["enabled"] else "off", None),
        *ASR_COLS, ("used CPU %", _pct("used_cpu_mean"), 2), ("used mem %", _pct("used_mem_mean"), 2),
        ("migrations", lambda r, s, a: s.migrations, 0), ("pending at end", lambda r, s, a: _done(r, "pending"), 0),
        ("lost", lambda r, s, a: _done(r, "lost"), 0), ("duplicated", lambda r, s, a: _done(r, "duplicated"), 0)]),
    "4": ("MASB Table 4 (reduced scale): workload 100–106 %", [
        ("workload %", lambda r, s, a: r.manifest["scenario"]["workload"]["multiplier"] * 100, 0),
        ("tasks added", lambda r, s, a: _done(r, "added"), 0),
        ("running (mean)", lambda r, s, a: s.tasks_running_mean, 0),
        ("used CPU %", _pct("used_cpu_mean"), 2), ("used mem %", _pct("used_mem_mean"), 2),
        *ASR_COLS, ("migrations", lambda r, s, a: s.migrations, 0),
        ("pending at end", lambda r, s, a: _done(r, "pending"), 0)]),
    "4x": ("MASB Table 4 extended beyond the paper (reduced scale): workload 110–150 %", None),
    "5": ("MASB Table 5 (reduced scale): cell compaction 100 → 97 %", [
        ("cell %", lambda r, s, a: (1 - r.manifest["scenario"]["workload"]["compaction"]) * 100, 0),
        ("nodes", lambda r, s, a: s.nodes_mean, 0), ("tasks added", lambda r, s, a: _done(r, "added"), 0),
        ("used CPU %", _pct("used_cpu_mean"), 2), ("used mem %", _pct("used_mem_mean"), 2),
        *ASR_COLS, ("migrations", lambda r, s, a: s.migrations, 0),
        ("pending at end", lambda r, s, a: _done(r, "pending"), 0)]),
    "6": ("MASB Table 6 (reduced scale): scoring functions vs migration cost", [
        ("scores (initial + re-allocation)", lambda r, s, a: (f"{r.manifest['scenario']['policy']['initial_score']} + "
                                                              f"{r.manifest['scenario']['policy']['realloc_score']}").upper(),
         None),
        ("migrations", lambda r, s, a: s.migrations, 0), ("attempts", lambda r, s, a: s.migration_attempts, 0),
        ("total GiB", lambda r, s, a: s.migration_bytes / 2**30, 1),
        ("MiB / migration", lambda r, s, a: s.bytes_per_migration / 2**20, 0),
        ("refused %", _pct("refusal_rate"), 1), *ASR_COLS]),
    "7": ("MASB Table 7 (reduced scale): 1×, 2×, 4×, 8× scale", [
        ("nodes", lambda r, s, a: s.nodes_mean, 0), ("scale", lambda r, s, a: f"{s.nodes_mean / 500:g}×", None),
        ("sim h", lambda r, s, a: s.duration_s / 3600, 1), ("tasks added", lambda r, s, a: _done(r, "added"), 0),
        ("running (mean)", lambda r, s, a: s.tasks_running_mean, 0), *ASR_COLS,
        ("migrations", lambda r, s, a: s.migrations, 0),
        ("wall s", lambda r, s, a: r.completed.get("wall_s", math.nan), 0),
        ("sim min / wall min", lambda r, s, a: r.completed.get("sim_min_per_wall_min", math.nan), 1),
        ("peak RSS MiB", lambda r, s, a: r.completed.get("peak_rss_mib", math.nan), 0)]),
}


TABLES["4x"] = (TABLES["4x"][0], TABLES["4"][1])


def cmd_summarize(a) -> None:
    setup = ("Model cell (virtual time; the same NodeAgent/SanAgent/BrokerAgent code as a real cell), GCD-shaped "
             "generator (digest §E), 500 nodes, 6 simulated hours unless stated, 3 broker agents, 60-s ticks. "
             "Regenerate: `scripts/reproduce_masb.py run` (every run through `cellctl sweep` on the specs in "
             "sweeps/masb-t*.toml, into results/masb-tables/), then `scripts/reproduce_masb.py summarize`; "
             "comparison plots: results/masb-tables/table<N>/.")
    DOCS.mkdir(parents=True, exist_ok=True)
    for tab in a.tables.split(","):
        title, cols = TABLES[tab]
        entries = [(rid, folder, cid, seed) for rid, folder, cid, seed in runs(tab) if completed(folder)]
        if not entries:
            continue
        per_run = []
        folders = {}
        for rid, folder, cid, seed in entries:
            folders[rid] = folder
            run, s = load(folder)
            per_run.append((rid, cid, seed, [fn(run, s, a) for _, fn, _ in cols]))
        header = [c for c, _, _ in cols]
        with open(DOCS / f"masb-table{tab}.csv", "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["run", "config", "seed", *header])
            for rid, cid, seed, vals in per_run:
                w.writerow([rid, cid, seed, *[v if isinstance(v, str) else num(v) for v in vals]])
        # markdown: one row per configuration, mean over seeds (min–max when several)
        md = [f"# {title}", ""]
        configs = list(dict.fromkeys(cid for _, cid, _, _ in per_run))
        rows = []
        for cid in configs:
            group = [v for _, c, _, v in per_run if c == cid]
            n = len(group)
            cells = []
            for j, (_, _, d) in enumerate(cols):
                vals = [g[j] for g in group]
                cells.append(vals[0] if d is None or isinstance(vals[0], str) else spread(vals, d))
            rows.append([cid, str(n), *cells])
        md += ["| config | seeds | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 2)]
        md += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
        md += ["", setup, "With several seeds a cell reads *mean (min–max)*; per-seed rows are in the CSV.", ""]
        md += NOTES.get(tab, [])
        (DOCS / f"masb-table{tab}.md").write_text("\n".join(md) + "\n")
        print(f"wrote docs/results/masb-table{tab}.csv/.md ({len(per_run)} runs)")
        seed1 = [folders[rid] for rid, _, _, seed in entries if seed == 1]
        if len(seed1) > 1:
            write_report(seed1, RESULTS / f"table{tab}")


NOTES: dict[str, list[str]] = {}
"""Per-table notes appended under the generated tables (filled from docs/results/notes.json if present)."""


# ---------------------------------------------------------------------------
# scale benchmark
# ---------------------------------------------------------------------------

def cmd_scale(a) -> None:
    """One long run at a.nodes with a cProfile window after the warm start; the figures come
    from its ticks.csv (wall_s per tick), its summary and profile.json/.pstats."""
    out = REPO / "results" / f"scale-{a.nodes}"
    if not completed(out):
        if out.exists():
            shutil.rmtree(out)
        prof = f"{a.profile_from:g}:{a.profile_from + a.profile_minutes:g}"
        subprocess.run([PY, "-m", "cellbed.cli.main", "run", str(SC / "masb-table3-masb.toml"), "--out", str(out),
                        "--no-report", "--profile", prof,
                        "--set", f"cell.nodes={a.nodes}", "--set", f"run.duration_s={a.hours * 3600:g}",
                        "--set", "run.seed=1", "--set", f"run.name=scale-{a.nodes}"], check=True, cwd=REPO)
    write_scale_md(out, a)


def scale_figures(out: Path) -> dict:
    """Warm start vs steady state from ticks.csv: the warm start ends at the first tick with no
    task waiting; the steady rate is simulated minutes per wall minute over the ticks after it,
    leaving out the profiled window (cProfile slows it)."""
    run = load_run(out)
    t = run.ticks
    summ = run.completed.get("summary", run.completed)
    prof = json.loads((out / "profile.json").read_text()) if (out / "profile.json").is_file() else None
    t_s, wall, pend = t["t_s"], t["wall_s"], t["tasks_pending"]
    settled = np.flatnonzero(pend == 0)
    k0 = int(settled[0]) if len(settled) else len(t_s) - 1
    rates = []
    for i in range(k0 + 1, len(t_s)):
        if prof and prof["from_s"] < t_s[i] <= prof["to_s"]:
            continue
        dw = wall[i] - wall[i - 1]
        if dw > 0:
            rates.append(((t_s[i] - t_s[i - 1]) / 60.0) / (dw / 60.0))
    steady = float(np.median(rates)) if rates else float("nan")
    return {"nodes": int(t["nodes"][-1]), "sim_s": float(t_s[-1]), "wall_s": float(wall[-1]),
            "warm_sim_s": float(t_s[k0]), "warm_wall_s": float(wall[k0]), "steady_rate": steady,
            "steady_ticks": len(rates), "rss": summ.get("peak_rss_mib"), "tasks": int(t["tasks_running"][-1]),
            "migrations": int(t["migrations_succeeded"].sum()), "over_mean": float(np.mean(t["overloaded"] / t["nodes"])),
            "prof": prof, "summary": summ}


def write_scale_md(out: Path, a) -> None:
    f = scale_figures(out)
    day_min = 1440.0 / f["steady_rate"] if f["steady_rate"] > 0 else float("nan")
    lines = [
        f"# Scale benchmark: MASB model cell, {f['nodes']:,} nodes, GCD-shaped workload, SAN on",
        "",
        f"Command: `scripts/reproduce_masb.py scale --nodes {a.nodes} --hours {a.hours:g} "
        f"--profile-from {a.profile_from:g} --profile-minutes {a.profile_minutes:g}` "
        f"(one `cellctl run` of scenarios/masb-table3-masb.toml, seed 1; figures from its ticks.csv `wall_s`).",
        "",
        "| figure | value |", "|---|---|",
        f"| simulated | {f['sim_s'] / 60:.0f} min in {f['wall_s'] / 60:.1f} wall min |",
        f"| warm start (initial population placed, no task waiting) | {f['warm_sim_s'] / 60:.0f} simulated min in "
        f"{f['warm_wall_s'] / 60:.1f} wall min |",
        f"| steady state, simulated min per wall min (median over {f['steady_ticks']} ticks, profiled window "
        f"excluded) | **{f['steady_rate']:.2f}** |",
        f"| a simulated day at that rate | {day_min:.0f} wall min ({day_min / 60:.1f} h); goal ≤ 30 min |",
        f"| peak RSS | {f['rss']:,.0f} MiB |" if f["rss"] else "| peak RSS | n/a |",
        f"| tasks running at the end | {f['tasks']:,} |",
        f"| migrations | {f['migrations']:,} |",
        f"| overloaded nodes, mean share | {100 * f['over_mean']:.3f} % |",
    ]
    if f["prof"]:
        p = f["prof"]
        lines += ["", f"Profiled window: simulated {p['from_s'] / 60:.0f}–{p['to_s'] / 60:.0f} min, "
                      f"{p['wall_s']:.0f} s wall / {p['cpu_s']:.0f} s CPU under cProfile. Where the time goes "
                      "(cumulative share of the window):", ""]
        lines += profile_breakdown(out / "profile.pstats")
    lines += ["", *NOTES.get("scale", [])]
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "scale-benchmark.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("wrote docs/results/scale-benchmark.md")




def profile_breakdown(path: Path) -> list[str]:
    st = pstats.Stats(str(path))
    out = parts_table(path)
    out += ["", "Top functions by own time:", "", "| function | calls | own s |", "|---|---:|---:|"]
    for k, v in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]:
        out.append(f"| `{Path(k[0]).name}:{k[1]} {k[2]}` | {v[1]:,} | {v[2]:.1f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "summarize"):
        p = sub.add_parser(name)
        p.add_argument("--tables", default="3,4,5,6,7,4x")
        if name == "run":
            p.add_argument("--workers", type=int, default=0, help="LocalCluster workers (0: cellctl sweep's choice)")
    p = sub.add_parser("scale")
    p.add_argument("--nodes", type=int, default=12500)
    p.add_argument("--hours", type=float, default=1.5)
    p.add_argument("--profile-from", type=float, default=70.0, help="simulated minute the profile starts")
    p.add_argument("--profile-minutes", type=float, default=5.0)
    a = ap.parse_args()
    notes = DOCS / "notes.json"
    if notes.is_file():
        NOTES.update(json.loads(notes.read_text()))
    {"run": cmd_run, "summarize": cmd_summarize, "scale": cmd_scale}[a.cmd](a)


if __name__ == "__main__":
    main()
