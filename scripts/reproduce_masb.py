#!/usr/bin/env python3
"""MASB Tables 3–7 at reduced scale on the model cell (issue 5, item 6), and the 12.5k-node scale
benchmark (acceptance 5).

    scripts/reproduce_masb.py run [--tables 3,4,5,6,7] [--nodes 500] [--hours 6] [--t7-hours 3]
    scripts/reproduce_masb.py summarize      # docs/results/masb-table*.{csv,md} + comparison plots
    scripts/reproduce_masb.py scale [--nodes 12500] [--hours 1.5] [--profile-from 70] [--profile-minutes 5]

``run`` executes every run of the chosen tables, one at a time, each in its own process
(``cellctl run`` with --set overrides on the ready scenarios), into ``results/masb-repro/<id>``;
runs already completed are skipped, so it can be resumed. ``summarize`` reads the completed
folders and writes the small tables committed under docs/results/ plus, per table,
``cellctl report`` comparison plots into ``results/masb-repro/table<N>/`` (regenerated, not
committed). ``scale`` runs the 12,500-node GCD-shaped cell with SAN on for a window of simulated
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
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cellbed.experiment import load_run, summarize  # noqa: E402 (after the repository is on the path)
from cellbed.experiment.profiling import parts_table  # noqa: E402
from cellbed.experiment.report import write_report  # noqa: E402

PY = sys.executable
RESULTS = REPO / "results" / "masb-repro"
DOCS = REPO / "docs" / "results"
SC = REPO / "scenarios"


def runs(nodes: int, hours: float, t7_hours: float, seeds: tuple[int, ...] = (1,)) -> dict[str, list]:
    """table → [(run id, scenario file, overrides, configuration label, seed)]. Seed 1's ids carry
    no suffix; other seeds' end in -s<seed>."""
    masb = SC / "masb-table3-masb.toml"
    t6 = [("t6-sas-only", SC / "masb-table6-sas-only.toml", []), ("t3-masb", masb, []),
          ("t6-siasgain-sras", SC / "masb-table6-siasgain-sras.toml", []),
          ("t6-sias-srasgain", SC / "masb-table6-sias-srasgain.toml", []),
          ("t6-siasgain-srasgain", masb, ["policy.initial_score=sias_gain", "policy.realloc_score=sras_gain"])]
    per_config = {
        "3": [("t3-bestfit", SC / "masb-table3-bestfit.toml", []), ("t3-masb", masb, [])],
        "4": [("t3-masb", masb, [])] + [(f"t4-m{m:.2f}", masb, [f"workload.multiplier={m:.2f}"])
                                        for m in (1.02, 1.04, 1.06)],
        "5": [("t3-masb", masb, [])] + [(f"t5-c{c:.2f}", masb, [f"workload.compaction={c:.2f}"])
                                        for c in (0.01, 0.02, 0.03)],
        "6": t6,
        # beyond the paper's range, to find where overload passes 0.5 % in this model
        "4x": [(f"t4-m{m:.2f}", masb, [f"workload.multiplier={m:.2f}"]) for m in (1.10, 1.20, 1.30, 1.40, 1.50)],
    }
    out: dict[str, list] = {}
    for tab, cfgs in per_config.items():
        out[tab] = [(cid if seed == 1 else f"{cid}-s{seed}", scen,
                     [f"cell.nodes={nodes}", f"run.duration_s={hours * 3600:g}", f"run.seed={seed}"] + sets, cid, seed)
                    for seed in seeds for cid, scen, sets in cfgs]
    out["7"] = [(f"t7-x{k}", masb, [f"cell.nodes={nodes * k}", f"run.duration_s={t7_hours * 3600:g}", "run.seed=1"],
                 f"t7-x{k}", 1) for k in (1, 2, 4, 8)]
    return out


def completed(out: Path) -> bool:
    ev = out / "events.jsonl"
    if not ev.is_file():
        return False
    lines = ev.read_text().strip().splitlines()
    return bool(lines) and json.loads(lines[-1]).get("kind") == "run_completed"


def cmd_run(a) -> None:
    table = runs(a.nodes, a.hours, a.t7_hours, a.seed_list)
    done: set[str] = set()
    for tab in a.tables.split(","):
        for rid, scen, sets, _, _ in table[tab]:
            out = RESULTS / rid
            if rid in done or completed(out):
                done.add(rid)
                continue
            if out.exists():
                shutil.rmtree(out)      # an interrupted run: start it again
            cmd = [PY, "-m", "cellbed.cli.main", "run", str(scen), "--out", str(out), "--set", f"run.name={rid}"]
            for s in sets:
                cmd += ["--set", s]
            print(f"== {rid}: {' '.join(cmd[3:])}", flush=True)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, cwd=REPO)
            print(f"== {rid}: {time.perf_counter() - t0:.0f} s wall", flush=True)
            done.add(rid)


# ---------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------

def load(rid: str):
    run = load_run(RESULTS / rid)
    return run, summarize(run)


def _f(x):
    """A number for the CSV/averaging (NaN/inf kept as float)."""
    return float(x) if x is not None else math.nan


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
        ("nodes", lambda r, s, a: s.nodes_mean, 0), ("scale", lambda r, s, a: f"{s.nodes_mean / a.nodes:g}×", None),
        ("sim h", lambda r, s, a: s.duration_s / 3600, 1), ("tasks added", lambda r, s, a: _done(r, "added"), 0),
        ("running (mean)", lambda r, s, a: s.tasks_running_mean, 0), *ASR_COLS,
        ("migrations", lambda r, s, a: s.migrations, 0),
        ("wall s", lambda r, s, a: r.completed.get("wall_s", math.nan), 0),
        ("sim min / wall min", lambda r, s, a: r.completed.get("sim_min_per_wall_min", math.nan), 1),
        ("peak RSS MiB", lambda r, s, a: r.completed.get("peak_rss_mib", math.nan), 0)]),
}


TABLES["4x"] = (TABLES["4x"][0], TABLES["4"][1])


def _fmt(v, d) -> str:
    if isinstance(v, str):
        return v
    v = float(v)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "inf"
    return f"{v:.{d}f}"


def cmd_summarize(a) -> None:
    have = {p.name for p in RESULTS.iterdir() if completed(p)} if RESULTS.is_dir() else set()
    table = runs(a.nodes, a.hours, a.t7_hours, a.seed_list)
    setup = ("Model cell (virtual time; the same NodeAgent/SanAgent/BrokerAgent code as a real cell), GCD-shaped "
             f"generator (digest §E), {a.nodes} nodes, {a.hours:g} simulated hours unless stated, 3 broker agents, "
             "60-s ticks. Regenerate: `scripts/reproduce_masb.py run --seeds ...` then "
             "`scripts/reproduce_masb.py summarize --seeds ...`; comparison plots: results/masb-repro/table<N>/.")
    DOCS.mkdir(parents=True, exist_ok=True)
    for tab in a.tables.split(","):
        title, cols = TABLES[tab]
        entries = [(rid, cid, seed) for rid, _, _, cid, seed in table[tab] if rid in have]
        if not entries:
            continue
        per_run = []
        for rid, cid, seed in entries:
            run, s = load(rid)
            per_run.append((rid, cid, seed, [fn(run, s, a) for _, fn, _ in cols]))
        header = [c for c, _, _ in cols]
        with open(DOCS / f"masb-table{tab}.csv", "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["run", "config", "seed", *header])
            for rid, cid, seed, vals in per_run:
                w.writerow([rid, cid, seed, *[v if isinstance(v, str) else _f(v) for v in vals]])
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
                if d is None or isinstance(vals[0], str):
                    cells.append(vals[0])
                    continue
                x = np.array([_f(v) for v in vals])
                if n == 1 or np.isnan(x).all():
                    cells.append(_fmt(x[0], d))
                else:
                    cells.append(f"{_fmt(np.nanmean(x), d)} ({_fmt(np.nanmin(x), d)}–{_fmt(np.nanmax(x), d)})")
            rows.append([cid, str(n), *cells])
        md += ["| config | seeds | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 2)]
        md += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
        md += ["", setup, "With several seeds a cell reads *mean (min–max)*; per-seed rows are in the CSV.", ""]
        md += NOTES.get(tab, [])
        (DOCS / f"masb-table{tab}.md").write_text("\n".join(md) + "\n")
        print(f"wrote docs/results/masb-table{tab}.csv/.md ({len(per_run)} runs)")
        seed1 = [rid for rid, _, seed in entries if seed == entries[0][2]]
        if len(seed1) > 1:
            write_report([RESULTS / x for x in seed1], RESULTS / f"table{tab}")


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
        p.add_argument("--tables", default="3,4,5,6,7")
        p.add_argument("--nodes", type=int, default=500)
        p.add_argument("--hours", type=float, default=6.0)
        p.add_argument("--t7-hours", type=float, default=3.0)
        p.add_argument("--seeds", default="1", help="comma list of run seeds for Tables 3–6 (e.g. 1,2,3)")
    p = sub.add_parser("scale")
    p.add_argument("--nodes", type=int, default=12500)
    p.add_argument("--hours", type=float, default=1.5)
    p.add_argument("--profile-from", type=float, default=70.0, help="simulated minute the profile starts")
    p.add_argument("--profile-minutes", type=float, default=5.0)
    a = ap.parse_args()
    a.seed_list = tuple(int(x) for x in getattr(a, "seeds", "1").split(","))
    notes = DOCS / "notes.json"
    if notes.is_file():
        NOTES.update(json.loads(notes.read_text()))
    {"run": cmd_run, "summarize": cmd_summarize, "scale": cmd_scale}[a.cmd](a)


if __name__ == "__main__":
    main()
