"""``cellctl compare``'s overlay plots: the real run (solid) and its model twin (dashed) on one
simulated time axis."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cellbed.experiment.report.plots import cdf_points, figure, time_axis
from cellbed.experiment.report.summary import asr_shares
from cellbed.experiment.results.reader import Run

PLOTS = ("compare-load.png", "compare-asr.png", "compare-migrations.png", "compare-alloc.png")
STYLE = {"real": dict(ls="-", lw=1.6), "model": dict(ls="--", lw=1.4)}


def _lines(ax, runs: dict[str, Run], fn, label: str, colour: str) -> None:
    for who, run in runs.items():
        x, _ = time_axis(run.ticks["t_s"])
        ax.step(x, fn(run.ticks), where="pre", color=colour, label=f"{label} ({who})", **STYLE[who])


def plot_all(real: Run, model: Run, out: Path) -> None:
    runs = {"real": real, "model": model}
    _, xl = time_axis(real.ticks["t_s"])
    fig = figure(9.0, 6.0)
    ax, ax2 = fig.subplots(2, 1, sharex=True)
    _lines(ax, runs, lambda t: t["overloaded"] / np.maximum(t["nodes"], 1) * 100, "overloaded", "#d62728")
    ax.set_ylabel("overloaded hosts (%)")
    ax.legend(fontsize="small")
    ax.set_title("Load: real cell (solid) vs model twin (dashed)")
    _lines(ax2, runs, lambda t: t["used_cpu"] * 100, "CPU", "#1f77b4")
    _lines(ax2, runs, lambda t: t["used_mem"] * 100, "memory", "#9467bd")
    ax2.set_ylabel("used (% of the cell)")
    ax2.set_xlabel(xl)
    ax2.legend(fontsize="small", ncols=2)
    fig.savefig(out / PLOTS[0])

    fig = figure()
    ax = fig.add_subplot()
    colours = {"sta": "#8c564b", "ta": "#ff7f0e", "pa": "#2ca02c", "da": "#1f77b4"}
    for k, c in colours.items():
        _lines(ax, runs, lambda t, k=k: np.nan_to_num(asr_shares(t)[k]) * 100, k.upper(), c)
    ax.set_ylabel("share of active hosts (%)")
    ax.set_xlabel(xl)
    ax.set_ylim(0, 100)
    ax.legend(fontsize="x-small", ncols=4)
    ax.set_title("Allocation score ratio classes: real (solid) vs model twin (dashed)")
    fig.savefig(out / PLOTS[1])

    fig = figure()
    ax = fig.add_subplot()
    _lines(ax, runs, lambda t: np.cumsum(t["migrations_attempted"]), "started", "k")
    _lines(ax, runs, lambda t: np.cumsum(t["migrations_succeeded"]), "succeeded", "#2ca02c")
    _lines(ax, runs, lambda t: np.cumsum(t["migrations_refused"]), "SAN refused", "#ff7f0e")
    ax.set_ylabel("cumulative count")
    ax.set_xlabel(xl)
    ax.legend(fontsize="small", ncols=3)
    ax.set_title("Migrations: real (solid) vs model twin (dashed)")
    fig.savefig(out / PLOTS[2])

    fig = figure()
    ax = fig.add_subplot()
    for who, run in runs.items():
        a = run.allocations(("outcome", "total_ms"))
        x = a["total_ms"][a["outcome"] == "placed"].astype(np.float64)
        x = x[np.isfinite(x)]
        if x.size:
            xs, ys = cdf_points(x / 1000.0)
            ax.step(xs, ys, where="post", color="#1f77b4", label=who, **STYLE[who])
    ax.set_xlabel("allocation time (s, wall)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize="small")
    ax.set_title("Allocation time: real (solid) vs model twin (dashed)")
    fig.savefig(out / PLOTS[3])
