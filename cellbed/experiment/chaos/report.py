"""A chaos campaign's results (issue 12): the summary per operation, fault kind and phase
(attempts, outcomes, recoveries, violations), the time to settle after a daemon restart (p50,
p99), a timeline plot, and the manifest. Pure over the history rows, except ``write``."""
from __future__ import annotations

import collections
import json
import os

import numpy as np

from cellbed.experiment.markdown import md_table

RECOVERED = {"succeeded", "failed", "aborted", "refused"}     # the VM ended intact on one end


def summary_rows(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        groups[(r["op"], r["fault"], r["phase"])].append(r)
    out = []
    for (op, fault, phase), rs in sorted(groups.items()):
        outcomes = collections.Counter(x["outcome"] for r in rs for x in r.get("records", []))
        out.append({"op": op, "fault": fault, "phase": phase, "attempts": len(rs),
                    "injected": sum(1 for r in rs if "nothing" not in r.get("injected", "")),
                    "outcomes": ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "-",
                    "reconciled": sum(x["reconciled"] for r in rs for x in r.get("records", [])),
                    "recovered": sum(1 for r in rs if not r["violations"]),
                    "violations": sum(len(r["violations"]) for r in rs)})
    return out


def restart_settle_s(rows: list[dict]) -> list[float]:
    """Seconds from a killed daemon's restart to the settled cell (its migration reconciled)."""
    return [r["settled_unix_s"] - r["recovered_unix_s"] for r in rows
            if r["fault"] in ("kill_src_daemon", "kill_dst_daemon")]


def text(rows: list[dict], manifest: dict) -> str:
    sr = summary_rows(rows)
    cols = ["op", "fault", "phase", "attempts", "injected", "outcomes", "reconciled", "recovered", "violations"]
    lines = [f"chaos campaign on cell {manifest['cell']}, seed {manifest['seed']}: {len(rows)} steps, "
             f"{sum(len(r['violations']) for r in rows)} violation(s)", "",
             md_table(cols, [[str(r[c]) for c in cols] for r in sr])]
    rs = restart_settle_s(rows)
    if rs:
        lines += ["", f"after a node daemon restart, the cell settled (migration reconciled) in p50 "
                      f"{np.percentile(rs, 50):.1f} s, p99 {np.percentile(rs, 99):.1f} s (n={len(rs)})"]
    bad = [(r["step"], v) for r in rows for v in r["violations"]]
    if bad:
        lines += ["", "violations:"] + [f"  step {s}: {v}" for s, v in bad]
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    kinds = sorted({r["fault"] for r in rows})
    fig = Figure(figsize=(10, 1.2 + 0.35 * len(kinds)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    t0 = min(r["t0"] for r in rows)
    colour = {"succeeded": "tab:green", "failed": "tab:blue", "aborted": "tab:blue", "refused": "tab:gray",
              "lost": "tab:orange"}
    for r in rows:
        y = kinds.index(r["fault"])
        outs = [x["outcome"] for x in r.get("records", [])] or ["-"]
        c = "tab:red" if r["violations"] else colour.get(outs[-1], "tab:purple")
        ax.plot([r["t0"] - t0, r["settled_unix_s"] - t0], [y, y], color=c, lw=4, solid_capstyle="butt")
        ax.plot([r["injected_unix_s"] - t0], [y], "k|", ms=10)
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_xlabel("seconds since the campaign started (bar: step until settled; tick: fault injected)")
    ax.set_title("green succeeded, blue failed/aborted (VM on source), orange lost, grey refused, red violation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write(out: str, rows: list[dict], manifest: dict) -> str:
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({**manifest, "steps": len(rows), "violations": sum(len(r["violations"]) for r in rows),
                   "summary": summary_rows(rows)}, f, indent=1)
    t = text(rows, manifest)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(t + "\n")
    if rows:
        plot(rows, os.path.join(out, "timeline.png"))
    return t
