"""The report's PNG plots, one run's and the comparison's (matplotlib is imported when plotting)."""
from __future__ import annotations

import math
from pathlib import Path
import numpy as np
from cellbed.experiment.results.reader import Run
from cellbed.experiment.report.summary import (
    ASR_COLOURS,
    OVERLOAD_THRESHOLD,
    PARTS,
    Summary,
    asr_shares,
    fmt_ms,
    fmt_pct,
)


def figure(w: float = 9.0, h: float = 4.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def time_axis(t_s: np.ndarray) -> tuple[np.ndarray, str]:
    span = float(t_s[-1] - t_s[0]) if t_s.size else 0.0
    return (t_s / 3600.0, "simulated time (h)") if span >= 3 * 3600 else (t_s / 60.0, "simulated time (min)")


def cdf_points(x: np.ndarray, max_points: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their CDF, thinned to about *max_points* while keeping the tail."""
    xs = np.sort(x)
    n = xs.size
    ys = np.arange(1, n + 1) / n
    if n > max_points:
        body = np.linspace(0, n - 1, max_points // 2).astype(np.int64)
        tail = (n - np.unique(np.logspace(0, math.log10(n), max_points // 2).astype(np.int64))).clip(0, n - 1)
        keep = np.unique(np.concatenate([body, tail]))
        xs, ys = xs[keep], ys[keep]
    return xs, ys


def plot_asr(run: Run, path: Path) -> None:
    t = run.ticks
    x, xl = time_axis(t["t_s"])
    sh = asr_shares(t)
    fig = figure()
    ax = fig.add_subplot()
    order = ("pa", "da", "ta", "sta")
    ax.stackplot(x, *[np.nan_to_num(sh[k]) * 100 for k in order], labels=[k.upper() for k in order],
                 colors=[ASR_COLOURS[k] for k in order], alpha=0.85)
    ax.set_xlim(x[0], x[-1] if x[-1] > x[0] else x[0] + 1)
    ax.set_ylim(0, 100)
    ax.set_xlabel(xl)
    ax.set_ylabel("share of non-idle, non-overloaded nodes (%)")
    ax.set_title(f"Allocation score ratios — {run.name}")
    ax.legend(loc="upper right", ncols=4, fontsize="small")
    fig.savefig(path)


def plot_overloaded(run: Run, path: Path) -> None:
    t = run.ticks
    x, xl = time_axis(t["t_s"])
    nodes = np.maximum(t["nodes"], 1)
    fig = figure(9.0, 5.5)
    ax, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    ax.step(x, t["overloaded"] / nodes * 100, where="pre", color="#d62728", lw=1.2, label="overloaded")
    ax.axhline(OVERLOAD_THRESHOLD * 100, color="k", ls="--", lw=0.8, label="0.5 % (MASB threshold)")
    ax.set_ylabel("overloaded nodes (%)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize="small")
    ax.set_title(f"Overloaded and idle nodes — {run.name}")
    ax2.step(x, t["idle"] / nodes * 100, where="pre", color="#7f7f7f", lw=1.0)
    ax2.set_ylabel("idle nodes (%)")
    ax2.set_xlabel(xl)
    fig.savefig(path)


def plot_migrations(run: Run, path: Path) -> None:
    t = run.ticks
    x, xl = time_axis(t["t_s"])
    fig = figure(9.0, 6.0)
    ax, ax2 = fig.subplots(2, 1, sharex=True)
    cols = ("migrations_succeeded", "migrations_refused", "migrations_failed")
    ax.stackplot(x, *[t[c] for c in cols], labels=[c.split("_", 1)[1] for c in cols], step="pre",
                 colors=("#2ca02c", "#ff7f0e", "#d62728"), alpha=0.8)
    ax.step(x, t["migrations_attempted"], where="pre", color="k", lw=0.8, label="attempted")
    ax.set_ylabel("migrations per tick")
    ax.legend(loc="upper right", ncols=4, fontsize="small")
    ax.set_title(f"Migrations — {run.name}")
    cum = np.cumsum(t["bytes_moved"].astype(np.float64))
    scale, unit = (2**30, "GiB") if cum.size and cum[-1] >= 2**30 else (2**20, "MiB")
    ax2.plot(x, cum / scale, color="#1f77b4", lw=1.5)
    ax2.set_ylabel(f"cumulative bytes moved ({unit})")
    ax2.set_xlabel(xl)
    fig.savefig(path)


def plot_alloc_cdf(run: Run, s: Summary, path: Path, a: dict[str, np.ndarray]) -> bool:
    """Allocation-time CDF and the CDFs of its four parts (from the table *a*, ALLOC_COLUMNS);
    False (no file) when no task was placed."""
    placed = a["outcome"] == "placed"
    if not placed.any():
        return False
    floor = 1e-3  # ms: log axes cannot show 0
    fig = figure(11.0, 4.5)
    ax, ax2 = fig.subplots(1, 2, sharey=True)
    xs, ys = cdf_points(np.maximum(a["total_ms"][placed], floor))
    ax.step(xs, ys, where="pre", color="k", lw=1.5)
    for q, v, c in zip(("p50", "p90", "p99", "p99.9"), (s.alloc_p50_ms, s.alloc_p90_ms, s.alloc_p99_ms,
                                                         s.alloc_p999_ms), ("#2ca02c", "#1f77b4", "#ff7f0e", "#d62728")):
        ax.axvline(max(v, floor), color=c, ls="--", lw=0.9, label=f"{q} = {fmt_ms(v)}")
    ax.set_xscale("log")
    ax.set_xlabel("allocation time (ms, log)")
    ax.set_ylabel("fraction of placed tasks")
    ax.set_ylim(0, 1.01)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(f"Allocation time — {run.name}")
    for p, c in zip(PARTS, ("#9467bd", "#8c564b", "#e377c2", "#17becf")):
        xs, ys = cdf_points(np.maximum(a[p][placed], floor))
        ax2.step(xs, ys, where="pre", color=c, lw=1.2, label=f"{p[:-3].replace('_', ' ')} "
                                                              f"({fmt_pct(s.part_share[p])} of total)")
    ax2.set_xscale("log")
    ax2.set_xlabel(f"part of allocation time (ms, log; ≤ {floor:g} ms shown at {floor:g})")
    ax2.legend(loc="lower right", fontsize="small")
    ax2.set_title("The four parts (Megha eq. 2)")
    fig.savefig(path)
    return True


def plot_compare_asr(names: list[str], sums: list[Summary], path: Path) -> None:
    fig = figure(max(6.0, 1.2 * len(names) + 3), 4.5)
    ax = fig.add_subplot()
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    for k in ("pa", "da", "ta", "sta"):
        v = np.array([np.nan_to_num(getattr(s, f"asr_{k}")) * 100 for s in sums])
        ax.bar(x, v, bottom=bottom, color=ASR_COLOURS[k], label=k.upper())
        bottom += v
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize="small")
    ax.set_ylabel("mean share of non-idle, non-overloaded nodes (%)")
    ax.set_ylim(0, 100)
    ax.legend(ncols=4, fontsize="small", loc="lower right")
    ax.set_title("Allocation score ratios")
    fig.savefig(path)


def plot_compare_overloaded(names: list[str], runs: list[Run], path: Path) -> None:
    fig = figure()
    ax = fig.add_subplot()
    spans = [float(r.ticks["t_s"][-1] - r.ticks["t_s"][0]) for r in runs]
    hours = max(spans) >= 3 * 3600
    for n, r in zip(names, runs):
        t = r.ticks
        ax.plot(t["t_s"] / (3600.0 if hours else 60.0), t["overloaded"] / np.maximum(t["nodes"], 1) * 100,
                lw=1.0, label=n)
    ax.axhline(OVERLOAD_THRESHOLD * 100, color="k", ls="--", lw=0.8, label="0.5 %")
    ax.set_xlabel("simulated time (h)" if hours else "simulated time (min)")
    ax.set_ylabel("overloaded nodes (%)")
    ax.legend(fontsize="small")
    ax.set_title("Overloaded nodes")
    fig.savefig(path)


def plot_compare_cdf(names: list[str], runs: list[Run], path: Path) -> bool:
    fig = figure()
    ax = fig.add_subplot()
    any_ = False
    for n, r in zip(names, runs):
        a = r.allocations(["outcome", "total_ms"])
        v = a["total_ms"][a["outcome"] == "placed"]
        if v.size == 0:
            continue
        any_ = True
        xs, ys = cdf_points(np.maximum(v, 1e-3))
        ax.step(xs, ys, where="pre", lw=1.2, label=n)
    if not any_:
        return False
    ax.set_xscale("log")
    ax.set_xlabel("allocation time (ms, log)")
    ax.set_ylabel("fraction of placed tasks")
    ax.set_ylim(0, 1.01)
    ax.legend(fontsize="small", loc="lower right")
    ax.set_title("Allocation time")
    fig.savefig(path)
    return True
