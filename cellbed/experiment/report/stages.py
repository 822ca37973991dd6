"""The report's policy sections (DESIGN §17): the policies the run's agents loaded, with their
identity, and each stage's time per call (seed 002's TC metric), from manifest.json's
``policies`` and ``stages.csv``."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from cellbed.experiment.markdown import md_table
from cellbed.experiment.report.plots import figure
from cellbed.experiment.results.files import STAGES


def read_stages(run_dir: Path) -> list[dict]:
    p = Path(run_dir) / STAGES
    if not p.exists():
        return []
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def policy_rows(manifest: dict) -> list[tuple]:
    rows = []
    for p in manifest.get("policies") or []:
        where = p.get("dist") and f"{p['dist']} {p.get('dist_version', '')}".strip() or p.get("target", "")
        params = ", ".join(f"{k}={v}" for k, v in sorted((p.get("params") or {}).items()))
        rows.append((p.get("key", ""), p.get("refarch", ""), p.get("name", ""), p.get("origin", ""), where,
                     (p.get("sha256") or "")[:12], params or "—", ", ".join(p.get("agents", [])) or "—"))
    return rows


def plot_stage_times(stages: list[dict], path: Path) -> bool:
    """Mean and p95 time per call of each (stage, policy), log scale; calls in the labels."""
    stages = [s for s in stages if int(s["calls"])]
    if not stages:
        return False
    labels = [f"{s['stage']}\n{s['policy'].split(' (')[0]}\n{int(s['calls']):,} calls" for s in stages]
    mean = np.array([float(s["mean_us"]) for s in stages])
    p95 = np.array([float(s["p95_us"]) for s in stages])
    fig = figure(max(6.0, 1.1 * len(stages)), 4.0)
    ax = fig.add_subplot()
    x = np.arange(len(stages))
    ax.bar(x - 0.2, np.maximum(mean, 1e-3), 0.4, label="mean")
    ax.bar(x + 0.2, np.maximum(p95, 1e-3), 0.4, label="p95 (bucket bound)")
    ax.set_yscale("log")
    ax.set_ylabel("µs per call")
    ax.set_xticks(x, labels, fontsize=7)
    ax.legend()
    ax.set_title("Time per call of each stage's policy")
    fig.savefig(path, dpi=110)
    return True


def sections(run_dir: Path, manifest: dict, out: Path) -> list[str]:
    lines: list[str] = []
    rows = policy_rows(manifest)
    if rows:
        lines += ["## Policies loaded", "",
                  f"What the agents loaded (errors {manifest.get('policy_mode', '?')}; "
                  f"{manifest.get('policy_errors', 0)} refused decisions).", "",
                  md_table(["key", "stage", "policy", "origin", "from", "sha256", "parameters", "agents"], rows), ""]
    stages = read_stages(run_dir)
    if stages:
        cols = ["stage", "policy", "calls", "errors", "examined", "total_s", "mean_us", "p95_us", "max_us"]
        lines += ["## Time per stage", "", "From `stages.csv` (p95: the upper bound of its ~19 % bucket).", "",
                  md_table(cols, [[s[c] for c in cols] for s in stages]), ""]
        if plot_stage_times(stages, out / "stages.png"):
            lines += ["![time per stage](stages.png)", ""]
    return lines
