#!/usr/bin/env python3
"""Issue 14 part 4, "the MASB PA:DA question": what does MASB's PA:DA ≥ 3:1 (paper Table 3) need?
Result and reading: docs/results/masb-pada.md.

    scripts/pada_study.py run [--configs a,b] [--seeds 1,2,3] [--nodes 500] [--hours 3] [--out DIR]
    scripts/pada_study.py summarize [--configs ...] [--seeds 1,2,3] [--out DIR]   # tables: stdout + DIR/tables.md

``run`` executes each (configuration, seed) as its own process (``pada_study.py one ...``), one at
a time, niced, into ``DIR/<config>-s<seed>.npz`` (DIR = results/pada); finished runs are skipped,
so it resumes. Without ``--configs`` it runs every configuration but those in ``EXTRA``. Each run
is the model cell of ``cellctl run`` (same scenario files, same ``--set`` keys, same agents; the
cell is deterministic per seed), plus what ticks.csv does not keep: every 10 simulated minutes
after the warm-up, each node's used and requested CPU/memory; at the last tick, every task's use
(cores, MiB) for the offline repacking; and how many initial allocations had a top pick with
SIAS > 0 (the others went to the broker's zero-score fallback, lowest use first).

Variants that are not scenario keys (the third field of ``CONFIGS``) are applied in the child
process before the cell is built, without changing repository code: ``{"sias": {...}}`` replaces
``SCORES["sias"]`` by SIAS at other parameters; ``{"sias_load": "used" | "est"}`` makes the
broker's ``initial()`` score the nodes' use instead of their requests.

``summarize`` reads the runs and prints, per configuration, mean (min–max) over seeds of: the ASR
over the ticks after the warm-up and PA:DA; the per-node memory distribution; why DA nodes are
DA; PA:DA re-classified without DESIGN's 30-point spread test (the paper's literal PA band); and
PA:DA after an offline greedy repacking of the same tasks (an existence check: what a placement
with full knowledge could reach on this workload); per machine class, use and classes.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cellbed.policy.masb.pada_bound import (classify_counts, pada, repack_balanced,  # noqa: E402
                                            required_sigma, pa_share_normal)

OUT = REPO / "results" / "pada"
SC = REPO / "scenarios"
MASB, BESTFIT = SC / "masb-table3-masb.toml", SC / "masb-table3-bestfit.toml"
WARMUP_S = 1800.0          # ticks and snapshots before this are the warm start's transient
SNAP_EVERY_S = 600.0


def mem_load(x: float) -> list[str]:
    """Cell-wide used memory x (fraction), production memory requests scaled with it (0.70/0.65)."""
    return [f"workload.generator.target_used_mem={x:g}",
            f"workload.generator.target_prod_requested_mem={x * 0.70 / 0.65:.4f}"]


CPU_REQ_LOW = ["workload.generator.cpu_use_ratio_mean=0.75", "workload.generator.target_prod_requested_cpu=0.45",
               "workload.generator.near_zero_frac=0.2"]
"""Requested CPU ≈ 0.45/0.75 = 60 % of the cell instead of ≈ 100 %: SIAS (over requests, 0 above 90 %)
then scores > 0 on most nodes. (The near-zero share is lowered to 0.2 for the calibration to be feasible.)"""

EST_USE_OVER_REQ = np.array([0.45, 0.8])   # GeneratorConfig cpu_use_ratio_mean, mem_use_ratio_mean
HOMOG = 'workload.generator.machine_classes=[[0.5, 0.5, 1.0, "B"]]'   # GCD's commonest class, not §E.3's ten

# id: (scenario, --set overrides, score/placement overrides, label)
CONFIGS: dict[str, tuple[Path, list[str], dict, str]] = {
    "masb": (MASB, [], {}, "MASB as in Table 3 (SIAS over requests + SAN/SRAS), mem 65 %"),
    "bestfit": (BESTFIT, [], {}, "best fit, no migration, as in Table 3"),
    "masb-nosan": (MASB, ["policy.san.enabled=false"], {}, "MASB without SAN (no VM-LM)"),
    "masb-gpa": (MASB, ["policy.fit=gpa"], {}, "MASB, GPA fit test in SAN instead of the sum test"),
    "masb-sias-g3": (MASB, [], {"sias": {"gamma": 3.0}}, "MASB, SIAS γ = 3 (3× the disproportion penalty)"),
    "masb-cpureq60": (MASB, CPU_REQ_LOW, {}, "MASB, requested CPU ≈ 60 % of the cell instead of ≈ 100 %"),
    "masb-homog": (MASB, [HOMOG], {}, "MASB, every machine 0.5 CPU / 0.5 mem (16 cores / 32 GiB)"),
    "masb-sias-used": (MASB, [], {"sias_load": "used"}, "MASB, SIAS over the nodes' use (+ the task's request)"),
    "masb-sias-est": (MASB, [], {"sias_load": "est"}, "MASB, SIAS over the nodes' use + the task's expected use"),
    "masb-mem55": (MASB, mem_load(0.55), {}, "MASB, cell memory use 55 %"),
    "masb-mem50": (MASB, mem_load(0.50), {}, "MASB, cell memory use 50 %"),
    "masb-mem45": (MASB, mem_load(0.45), {}, "MASB, cell memory use 45 %"),
    "masb-sias-used-mem55": (MASB, mem_load(0.55), {"sias_load": "used"}, "MASB, SIAS over use, memory 55 %"),
    "bestfit-mem55": (BESTFIT, mem_load(0.55), {}, "best fit, memory 55 %"),
    "bestfit-mem50": (BESTFIT, mem_load(0.50), {}, "best fit, memory 50 %"),
}
EXTRA = ("masb-mem50", "bestfit-mem50")
"""Run only when named (``run --configs masb-mem50,bestfit-mem50``): the default set stays under
~40 min of wall time on a 2-core box."""
DEFAULT = [c for c in CONFIGS if c not in EXTRA]


# ---------------------------------------------------------------------------------------------
# one run (child process)
# ---------------------------------------------------------------------------------------------

def _patch_scores(scores: dict) -> None:
    from cellbed.policy import scores as S
    if "sias" in scores:
        S.SCORES["sias"] = functools.partial(S.sias_from_load, params=S.SiasParams(**scores["sias"]))
    if "sras" in scores:
        S.SCORES["sras"] = functools.partial(S.sras_from_load, params=S.SrasParams(**scores["sras"]))


def _count_initial(counter: dict, sias_load: str = "requested") -> None:
    """Wrap the broker's initial-allocation ranking: count calls and top picks with SIAS > 0.
    *sias_load* = "used": SIAS scores the nodes' used resources instead of their requests (the
    new task still counts with its request, as its use is unknown before it runs); "est": the
    nodes' use plus the task's *expected* use, its request × the generator's mean use/request
    ratios (CPU 0.45, memory 0.8)."""
    import cellbed.broker.agent as ba
    inner = ba.initial

    def initial(pool, match, cap, req, used, task_req, p, limit=None):
        load = req if sias_load == "requested" else used
        task = task_req * EST_USE_OVER_REQ if sias_load == "est" else task_req
        ranked, scanned, sc = inner(pool, match, cap, load, used, task, p, limit=limit)
        counter["calls"] += 1
        if ranked:
            counter["placed_candidates"] += 1
            counter["top_score_pos"] += ranked[0].score > 0
        return ranked, scanned, sc
    ba.initial = initial


def run_one(cid: str, seed: int, nodes: int, hours: float) -> Path:
    from cellbed.experiment.model import model_cell_params, workload_events
    from cellbed.experiment.scenario.file import load_scenario
    from cellbed.model.cell import ModelCell
    from cellbed.runtime.clock import run_virtual

    scen, sets, scores, _ = CONFIGS[cid]
    sc = load_scenario(scen, [f"cell.nodes={nodes}", f"run.duration_s={hours * 3600:g}", f"run.seed={seed}",
                              f"run.name={cid}"] + sets)
    _patch_scores(scores)
    counter = {"calls": 0, "placed_candidates": 0, "top_score_pos": 0}
    _count_initial(counter, scores.get("sias_load", "requested"))
    ticks, snaps = [], []
    holder: dict = {}

    def on_tick(t) -> None:
        ticks.append((t.t_s, t.idle, t.overloaded, t.sta, t.ta, t.pa, t.da, t.used_cpu, t.used_mem,
                      t.req_cpu, t.req_mem))
        if t.t_s + 1e-6 >= WARMUP_S and abs(t.t_s / SNAP_EVERY_S - round(t.t_s / SNAP_EVERY_S)) < 1e-9:
            hs = holder["cell"].host_states()
            snaps.append(np.array([(h.cap_cpu, h.cap_mem, h.used_cpu, h.used_mem, h.req_cpu, h.req_mem, h.vms)
                                   for h in hs], dtype=float))
        holder["last"] = t.t_s

    cell = ModelCell(model_cell_params(sc), workload_events(sc), on_tick=on_tick)
    holder["cell"] = cell
    wall0 = time.perf_counter()
    # tasks at the end, for the repacking: (node index, used cores, used MiB)
    orig_close = cell.frontend._close

    async def close(ticks_):
        tasks = []
        for i, h in enumerate(cell.hosts.values()):
            v = h.agent.view()
            for e in v.vms.values():
                tasks.append((i, e.cpu_used_cores, e.rss_mib))
        holder["tasks"] = np.array(tasks, dtype=float).reshape(-1, 3)
        holder["caps"] = np.array([h.agent.view().capacity for h in cell.hosts.values()], dtype=float)
        return await orig_close(ticks_)
    cell.frontend._close = close
    s = run_virtual(cell.run())
    wall = time.perf_counter() - wall0
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{cid}-s{seed}.npz"
    np.savez_compressed(path.with_suffix(".tmp.npz"), ticks=np.array(ticks), snaps=np.array(snaps),
                        tasks=holder["tasks"], caps=holder["caps"])
    os.replace(path.with_suffix(".tmp.npz"), path)
    meta = {"config": cid, "seed": seed, "nodes": nodes, "hours": hours, "sets": sets, "scores": scores,
            "wall_s": round(wall, 1), "initial": counter, "lost": len(s.lost), "duplicated": len(s.duplicated),
            "migrations": sum(1 for m in s.migrations if m.outcome == "succeeded"),
            "pending_end": s.tasks_pending}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return path


# ---------------------------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RunStats:
    sta: float
    ta: float
    pa: float
    da: float
    pada: float
    used_cpu: float
    used_mem: float
    req_cpu: float
    req_mem: float
    mem_sd: float            # across nodes, per cent points (mean over snapshots)
    mem_ge70: float          # share of active nodes with memory ≥ 70 %
    da_mem: float            # DA nodes by cause, share of active nodes: memory ≥ 70, CPU < 70
    da_cpu: float            # CPU ≥ 70, memory < 70
    da_spread: float         # both < 70, spread > 30
    pada_literal: float      # PA:DA without the spread test
    pada_repack: float       # after the greedy repacking of the last tick's tasks
    pada_repack_sd: float    # its memory σ
    pada_repack_literal: float   # repacked, without the spread test
    sias_pos: float          # initial allocations with a candidate whose top pick had SIAS > 0
    no_room: float           # initial allocation calls with no candidate (deferred, retried)
    migrations: float
    wall_s: float


def stats_of(cid: str, seed: int) -> RunStats:
    d = np.load(OUT / f"{cid}-s{seed}.npz")
    meta = json.loads((OUT / f"{cid}-s{seed}.json").read_text())
    t = d["ticks"]
    t = t[t[:, 0] + 1e-6 >= WARMUP_S]
    sta, ta, pa, da = (t[:, k].sum() for k in (3, 4, 5, 6))
    act = sta + ta + pa + da
    snaps = d["snaps"]
    sds, ge70, dm, dc, dsp, lit_pa, lit_da = [], [], [], [], [], 0, 0
    for s in snaps:
        busy = s[:, 6] > 0
        p = 100.0 * s[busy][:, 2:4] / s[busy][:, 0:2]
        ok = p.max(axis=1) <= 100.0           # overloaded nodes are outside the ASR
        p = p[ok]
        n = len(p)
        sds.append(p[:, 1].std())
        ge70.append((p[:, 1] >= 70).mean())
        c = classify_counts(p)
        da_mask = c["da_mask"]
        dm.append((da_mask & (p[:, 1] >= 70) & (p[:, 0] < 70)).sum() / n)
        dc.append((da_mask & (p[:, 0] >= 70) & (p[:, 1] < 70)).sum() / n)
        dsp.append((da_mask & (p.max(axis=1) < 70)).sum() / n)
        cl = classify_counts(p, spread=math.inf)
        lit_pa, lit_da = lit_pa + cl["pa"], lit_da + cl["da"]
    tasks, caps = d["tasks"], d["caps"]
    rp = repack_balanced(tasks[:, 1:3], caps)
    rc = classify_counts(rp)
    ini = meta["initial"]
    return RunStats(sta / act, ta / act, pa / act, da / act, pada(pa, da), t[:, 7].mean(), t[:, 8].mean(),
                    t[:, 9].mean(), t[:, 10].mean(), float(np.mean(sds)), float(np.mean(ge70)),
                    float(np.mean(dm)), float(np.mean(dc)), float(np.mean(dsp)), pada(lit_pa, lit_da),
                    pada(rc["pa"], rc["da"]), float(rp[:, 1].std()),
                    pada(*(lambda c: (c["pa"], c["da"]))(classify_counts(rp, spread=math.inf))),
                    ini["top_score_pos"] / ini["placed_candidates"] if ini["placed_candidates"] else math.nan,
                    1.0 - ini["placed_candidates"] / ini["calls"] if ini["calls"] else math.nan,
                    meta["migrations"], meta["wall_s"])


def _cell(vals, scale=1.0, nd=2) -> str:
    v = np.array(vals, dtype=float) * scale
    if np.all(np.isnan(v)):
        return "–"
    f = lambda x: "∞" if math.isinf(x) else f"{x:.{nd}f}"  # noqa: E731
    return f"{f(np.nanmean(v))} ({f(np.nanmin(v))}–{f(np.nanmax(v))})"


def mem_histogram(cid: str, seeds, bins=(0, 40, 50, 55, 60, 65, 70, 75, 80, 90, 100.0001)) -> list[float]:
    """Share of busy, not overloaded nodes per memory-use bin, pooled over snapshots and seeds."""
    h = np.zeros(len(bins) - 1)
    for seed in seeds:
        for s in np.load(OUT / f"{cid}-s{seed}.npz")["snaps"]:
            s = s[s[:, 6] > 0]
            p = 100.0 * s[:, 2:4] / s[:, 0:2]
            p = p[p.max(axis=1) <= 100.0]
            h += np.histogram(p[:, 1], bins=bins)[0]
    return list(h / h.sum())


def class_rows(cid: str, seeds) -> list[str]:
    """Per machine class (share ≥ 1 % of nodes): node share, mean CPU % / mem %, PA %, DA % and the
    DA share due to the spread test alone; busy, not overloaded nodes, pooled snapshots and seeds."""
    acc: dict = {}
    for seed in seeds:
        for s in np.load(OUT / f"{cid}-s{seed}.npz")["snaps"]:
            s = s[s[:, 6] > 0]
            p = 100.0 * s[:, 2:4] / s[:, 0:2]
            keep = p.max(axis=1) <= 100.0
            s, p = s[keep], p[keep]
            c = classify_counts(p)
            codes = np.where(c["da_mask"], 2, 0)
            pa_mask = (p.max(axis=1) < 70) & (p.max(axis=1) - p.min(axis=1) <= 30)
            codes[pa_mask] = 1
            for key in sorted({(round(a, 3), round(b, 3)) for a, b in s[:, 0:2]}):
                m = (np.round(s[:, 0], 3) == key[0]) & (np.round(s[:, 1], 3) == key[1])
                a = acc.setdefault(key, [0, 0.0, 0.0, 0, 0, 0, 0])
                a[0] += m.sum()
                a[1] += p[m, 0].sum()
                a[2] += p[m, 1].sum()
                a[3] += (codes[m] == 1).sum()
                a[4] += (codes[m] == 2).sum()
                a[5] += (c["da_mask"][m] & (p[m].max(axis=1) < 70)).sum()
                a[6] += len(s)
    total = sum(a[0] for a in acc.values())
    rows = []
    for (cc, cm), a in sorted(acc.items(), key=lambda kv: -kv[1][0]):
        if a[0] / total < 0.01:
            continue
        rows.append(f"| {cid} | {cc:g} cores / {cm:g} MiB | {100 * a[0] / total:.1f} | {a[1] / a[0]:.1f} | "
                    f"{a[2] / a[0]:.1f} | {100 * a[3] / a[0]:.1f} | {100 * a[4] / a[0]:.1f} | {100 * a[5] / a[0]:.1f} |")
    return rows


def summarize(seeds, configs) -> str:
    have = [c for c in configs if all((OUT / f"{c}-s{s}.npz").exists() for s in seeds)]
    st = {c: [stats_of(c, s) for s in seeds] for c in have}
    g = lambda c, f: [getattr(r, f) for r in st[c]]  # noqa: E731
    out = ["| config | what | --set / override |", "|---|---|---|"]
    for c in have:
        scen, sets, over, label = CONFIGS[c]
        what = ", ".join([f"`{x}`" for x in sets] + [f"`{k}={v}`" for k, v in over.items()]) or "–"
        out.append(f"| {c} | {label} ({scen.name}) | {what} |")
    out += ["", f"Model cell, 500 nodes, {json.loads((OUT / f'{have[0]}-s{seeds[0]}.json').read_text())['hours']:g} "
           f"simulated h per run, ticks and snapshots from {WARMUP_S / 60:g} min on; seeds {','.join(map(str, seeds))}; "
           "mean (min–max) over seeds.", "",
           "| config | STA % | TA % | PA % | DA % | PA:DA | used CPU % | used mem % | req CPU % | req mem % "
           "| top pick SIAS>0 % | no room % | migrations |", "|---|" + "---|" * 12]
    for c in have:
        out.append(f"| {c} | {_cell(g(c, 'sta'), 100)} | {_cell(g(c, 'ta'), 100)} | {_cell(g(c, 'pa'), 100)} | "
                   f"{_cell(g(c, 'da'), 100)} | {_cell(g(c, 'pada'))} | {_cell(g(c, 'used_cpu'), 100, 1)} | "
                   f"{_cell(g(c, 'used_mem'), 100, 1)} | {_cell(g(c, 'req_cpu'), 100, 1)} | "
                   f"{_cell(g(c, 'req_mem'), 100, 1)} | {_cell(g(c, 'sias_pos'), 100, 1)} | "
                   f"{_cell(g(c, 'no_room'), 100, 1)} | "
                   f"{_cell(g(c, 'migrations'), 1, 0)} |")
    out += ["", "| config | node mem σ (points) | nodes mem ≥ 70 % | DA: mem ≥ 70 | DA: CPU ≥ 70 | DA: spread > 30 "
            "| PA:DA w/o spread test | PA:DA repacked | repacked mem σ | PA:DA repacked w/o spread test |",
            "|---|" + "---|" * 9]
    for c in have:
        out.append(f"| {c} | {_cell(g(c, 'mem_sd'), 1, 1)} | {_cell(g(c, 'mem_ge70'), 100, 1)} | "
                   f"{_cell(g(c, 'da_mem'), 100, 1)} | {_cell(g(c, 'da_cpu'), 100, 1)} | "
                   f"{_cell(g(c, 'da_spread'), 100, 1)} | {_cell(g(c, 'pada_literal'))} | "
                   f"{_cell(g(c, 'pada_repack'))} | {_cell(g(c, 'pada_repack_sd'), 1, 1)} | "
                   f"{_cell(g(c, 'pada_repack_literal'))} |")
    bins = ["<40", "40–50", "50–55", "55–60", "60–65", "65–70", "70–75", "75–80", "80–90", "90–100"]
    out += ["", "Per-node memory use (busy nodes, pooled snapshots and seeds), share of nodes %:", "",
            "| config | " + " | ".join(bins) + " |", "|---|" + "---|" * len(bins)]
    for c in have:
        out.append(f"| {c} | " + " | ".join(f"{100 * x:.1f}" for x in mem_histogram(c, seeds)) + " |")
    out += ["", "Per machine class (busy nodes, pooled snapshots and seeds; % of the class's nodes):", "",
            "| config | capacity | nodes % | CPU % | mem % | PA % | DA % | DA by spread only % |",
            "|---|---|---|---|---|---|---|---|"]
    for c in have:
        out += class_rows(c, seeds)
    out += ["", "Normal-approximation check (memory only, STA+TA ignored): PA share = Φ((70 − μ)/σ); "
            "PA:DA ≥ 3 needs σ ≤ (70 − μ)/0.674.", "",
            "| config | μ mem % | σ | Φ((70−μ)/σ) % | σ needed for 3:1 |", "|---|---|---|---|---|"]
    for c in have:
        mu, sd = float(np.mean(g(c, "used_mem"))) * 100, float(np.mean(g(c, "mem_sd")))
        out.append(f"| {c} | {mu:.1f} | {sd:.1f} | {100 * pa_share_normal(mu, sd):.1f} | "
                   f"{required_sigma(mu, 3.0):.1f} |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------

def main() -> None:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--configs", default=",".join(DEFAULT))
    r.add_argument("--seeds", default="1,2,3")
    r.add_argument("--nodes", type=int, default=500)
    r.add_argument("--hours", type=float, default=3.0)
    o = sub.add_parser("one")
    o.add_argument("config")
    o.add_argument("seed", type=int)
    o.add_argument("--nodes", type=int, default=500)
    o.add_argument("--hours", type=float, default=3.0)
    s = sub.add_parser("summarize")
    s.add_argument("--configs", default=",".join(CONFIGS))
    for x in (r, o, s):
        x.add_argument("--out", default=str(OUT), help="results folder (default results/pada)")
    s.add_argument("--seeds", default="1,2,3")
    a = ap.parse_args()
    OUT = Path(a.out).resolve()
    if a.cmd == "one":
        print(run_one(a.config, a.seed, a.nodes, a.hours))
    elif a.cmd == "run":
        t0 = time.perf_counter()
        for cid in a.configs.split(","):
            for seed in map(int, a.seeds.split(",")):
                if (OUT / f"{cid}-s{seed}.npz").exists():
                    continue
                t1 = time.perf_counter()
                subprocess.run(["nice", "-n", "10", sys.executable, __file__, "one", cid, str(seed),
                                "--nodes", str(a.nodes), "--hours", str(a.hours), "--out", str(OUT)],
                               check=True, cwd=REPO)
                print(f"== {cid} seed {seed}: {time.perf_counter() - t1:.0f} s wall", flush=True)
        print(f"== all: {time.perf_counter() - t0:.0f} s wall", flush=True)
    else:
        seeds = [int(x) for x in a.seeds.split(",")]
        text = summarize(seeds, a.configs.split(","))
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "tables.md").write_text(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
