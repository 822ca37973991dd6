"""``report.md`` and its PNG plots for one run, or a side-by-side comparison of several (DESIGN §12).

Public API::

    summarize(run) -> Summary                 # pure: numbers only
    write_report(run_dirs, out=None) -> Path  # the report.md written

One run (``out`` defaults to the run's folder): ``report.md``, ``summary.json`` and
``asr.png`` (STA/TA/PA/DA shares among non-idle, non-overloaded nodes, as MASB Figs 8–9),
``overloaded.png`` (overloaded and idle share, with the 0.5 % threshold),
``migrations.png`` (attempts per tick by outcome, cumulative bytes) and ``alloc_cdf.png``
(allocation-time CDF, log x, with p50/p90/p99/p99.9, and the CDFs of its four parts).

Several runs (``out`` required): ``report.md`` with side-by-side tables (policy, then every
summary number), ``comparison.csv`` (one row per run), ``compare_asr.png``,
``compare_overloaded.png`` and ``compare_alloc_cdf.png`` (overlaid CDFs).

Definitions (so numbers can be checked by hand):

* ASR shares are per tick, among nodes neither idle nor overloaded; a run's ASR is the mean
  of the per-tick shares over ticks with at least one such node (MASB: "averaged over the
  simulation").  PA:DA = mean PA share / mean DA share.
* Idle and overloaded shares are per tick over all nodes; the run reports their mean, the
  overloaded maximum, and the share of ticks above 0.5 % (MASB's acceptable error).
* Migration numbers come from migrations.csv: ``migrations`` = succeeded attempts; ``bytes`` =
  all bytes sent, also by failed attempts; bytes per migration = bytes / migrations (the cost
  per useful migration, MASB Table 6); refusal rate = refused / attempts (MASB saw 6–8 %).
* Allocation percentiles are over placed tasks (numpy linear interpolation).  Each part is
  reported as its median and as its share of the summed total time.
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.experiment.results import Run, load_run

__all__ = ["ALLOC_COLUMNS", "OVERLOAD_THRESHOLD", "PARTS", "Summary", "asr_shares", "summarize", "write_report"]

OVERLOAD_THRESHOLD = 0.005
"""MASB's acceptable share of overloaded nodes per 1-minute period."""
PARTS = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms")
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
_ASR = ("sta", "ta", "pa", "da")
_COLOURS = {"sta": "#d62728", "ta": "#ff7f0e", "pa": "#2ca02c", "da": "#1f77b4"}


@dataclass(frozen=True)
class Summary:
    """The numbers of one run (fractions are 0..1; times in ms unless named _s)."""

    name: str
    ticks: int
    duration_s: float          # last tick's t_s − first tick's t_s + one tick
    nodes_mean: float
    asr_sta: float
    asr_ta: float
    asr_pa: float
    asr_da: float
    pa_da_ratio: float         # inf when DA is 0, NaN when both are
    idle_mean: float
    overloaded_mean: float
    overloaded_max: float
    ticks_over_threshold: float  # share of ticks with overloaded share > OVERLOAD_THRESHOLD
    used_cpu_mean: float
    used_mem_mean: float
    req_cpu_mean: float
    req_mem_mean: float
    tasks_running_mean: float
    migration_attempts: int
    migrations: int            # succeeded
    migrations_refused: int
    migrations_failed: int
    migrations_forced: int
    refusal_rate: float
    migration_bytes: int
    bytes_per_migration: float
    migration_time_p50_ms: float
    migration_downtime_p50_ms: float
    tick_migrations_succeeded: int  # Σ of ticks.csv's column, for a consistency check
    tick_bytes_moved: int
    tasks_placed: int
    tasks_pending: int
    tasks_rejected: int
    placed_per_min: float
    alloc_mean_ms: float
    alloc_p50_ms: float
    alloc_p90_ms: float
    alloc_p99_ms: float
    alloc_p999_ms: float
    part_median_ms: dict[str, float]
    part_share: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _mean(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


def asr_shares(ticks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-tick STA/TA/PA/DA shares among active (non-idle, non-overloaded) nodes; NaN where none."""
    active = sum(ticks[k].astype(np.float64) for k in _ASR)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {k: np.where(active > 0, ticks[k] / np.where(active > 0, active, 1), np.nan) for k in _ASR}


ALLOC_COLUMNS = ("outcome", "total_ms", *PARTS)
MIGRATION_COLUMNS = ("outcome", "forced", "time_ms", "downtime_ms", "bytes")


def summarize(run: Run, *, allocations: dict[str, np.ndarray] | None = None,
              migrations: dict[str, np.ndarray] | None = None) -> Summary:
    """Compute the summary numbers of *run* (see the module docstring for the definitions).

    *allocations* / *migrations* may pass tables already read (with at least ALLOC_COLUMNS /
    MIGRATION_COLUMNS) so a big run's CSVs are read once.
    """
    t = run.ticks
    n = len(t["t_s"])
    if n == 0:
        raise FailedPrecondition(f"{run.path}: ticks.csv has no rows; nothing to report")
    tick_s = float(np.median(np.diff(t["t_s"]))) if n > 1 else float(
        run.manifest.get("scenario", {}).get("run", {}).get("tick_s", 0.0) or 0.0)
    duration = float(t["t_s"][-1] - t["t_s"][0]) + tick_s
    nodes = t["nodes"].astype(np.float64)
    sh = asr_shares(t)
    asr = {k: _mean(sh[k]) for k in _ASR}
    pa, da = asr["pa"], asr["da"]
    if math.isnan(pa) or math.isnan(da) or (pa == 0 and da == 0):
        ratio = math.nan
    else:
        ratio = math.inf if da == 0 else pa / da
    with np.errstate(invalid="ignore", divide="ignore"):
        idle = np.where(nodes > 0, t["idle"] / nodes, np.nan)
        over = np.where(nodes > 0, t["overloaded"] / nodes, np.nan)

    m = migrations if migrations is not None else run.migrations(MIGRATION_COLUMNS)
    out = m["outcome"]
    ok = out == "succeeded"
    n_ok = int(ok.sum())
    attempts = int(out.size)
    mbytes = int(m["bytes"].sum())

    a = allocations if allocations is not None else run.allocations(ALLOC_COLUMNS)
    placed = a["outcome"] == "placed"
    tot = a["total_ms"][placed]
    pct = np.percentile(tot, PERCENTILES) if tot.size else [math.nan] * len(PERCENTILES)
    tot_sum = float(tot.sum())
    med = {p: (float(np.median(a[p][placed])) if tot.size else math.nan) for p in PARTS}
    share = {p: (float(a[p][placed].sum()) / tot_sum if tot_sum > 0 else math.nan) for p in PARTS}

    def p50(x: np.ndarray) -> float:
        x = x[~np.isnan(x)]
        return float(np.median(x)) if x.size else math.nan

    return Summary(
        name=run.name, ticks=n, duration_s=duration, nodes_mean=float(nodes.mean()),
        asr_sta=asr["sta"], asr_ta=asr["ta"], asr_pa=pa, asr_da=da, pa_da_ratio=ratio,
        idle_mean=_mean(idle), overloaded_mean=_mean(over), overloaded_max=float(np.nanmax(over)) if
        np.isfinite(over).any() else math.nan,
        ticks_over_threshold=float(np.mean(over > OVERLOAD_THRESHOLD)),
        used_cpu_mean=_mean(t["used_cpu"]), used_mem_mean=_mean(t["used_mem"]),
        req_cpu_mean=_mean(t["req_cpu"]), req_mem_mean=_mean(t["req_mem"]),
        tasks_running_mean=float(t["tasks_running"].mean()),
        migration_attempts=attempts, migrations=n_ok, migrations_refused=int((out == "refused").sum()),
        migrations_failed=int((out == "failed").sum()), migrations_forced=int(m["forced"].sum()),
        refusal_rate=(int((out == "refused").sum()) / attempts) if attempts else math.nan,
        migration_bytes=mbytes, bytes_per_migration=(mbytes / n_ok) if n_ok else math.nan,
        migration_time_p50_ms=p50(m["time_ms"][ok]), migration_downtime_p50_ms=p50(m["downtime_ms"][ok]),
        tick_migrations_succeeded=int(t["migrations_succeeded"].sum()), tick_bytes_moved=int(t["bytes_moved"].sum()),
        tasks_placed=int(placed.sum()), tasks_pending=int((a["outcome"] == "pending").sum()),
        tasks_rejected=int((a["outcome"] == "rejected").sum()),
        placed_per_min=(int(placed.sum()) / (duration / 60.0)) if duration > 0 else math.nan,
        alloc_mean_ms=float(tot.mean()) if tot.size else math.nan,
        alloc_p50_ms=float(pct[0]), alloc_p90_ms=float(pct[1]), alloc_p99_ms=float(pct[2]),
        alloc_p999_ms=float(pct[3]), part_median_ms=med, part_share=share,
    )


# ---------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------

def fmt_pct(x: float) -> str:
    """0.1234 → '12.34 %'."""
    return "n/a" if x is None or math.isnan(x) else f"{x * 100:.2f} %"


def fmt_ratio(x: float) -> str:
    """3.0 → '3.00:1'."""
    if x is None or math.isnan(x):
        return "n/a"
    return "∞:1" if math.isinf(x) else f"{x:.2f}:1"


def fmt_ms(x: float) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x:.3f} ms" if x < 10 else f"{x:.1f} ms"


def fmt_bytes(x: float) -> str:
    """Bytes → MiB with two decimals (and the exact count for small values)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x / 2**20:.2f} MiB"


def fmt_num(x: float, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):d}"
    return f"{x:.{digits}f}"


# (label, function of Summary → text) — the rows of both the single and the comparison tables
ROWS: tuple[tuple[str, Any], ...] = (
    ("simulated time", lambda s: f"{s.duration_s / 3600:.2f} h ({s.ticks} ticks)"),
    ("nodes (mean)", lambda s: fmt_num(s.nodes_mean, 1)),
    ("ASR STA", lambda s: fmt_pct(s.asr_sta)),
    ("ASR TA", lambda s: fmt_pct(s.asr_ta)),
    ("ASR PA", lambda s: fmt_pct(s.asr_pa)),
    ("ASR DA", lambda s: fmt_pct(s.asr_da)),
    ("ASR STA+TA", lambda s: fmt_pct(s.asr_sta + s.asr_ta)),
    ("PA:DA", lambda s: fmt_ratio(s.pa_da_ratio)),
    ("idle nodes (mean)", lambda s: fmt_pct(s.idle_mean)),
    ("overloaded nodes (mean)", lambda s: fmt_pct(s.overloaded_mean)),
    ("overloaded nodes (max)", lambda s: fmt_pct(s.overloaded_max)),
    ("ticks with overloaded > 0.5 %", lambda s: fmt_pct(s.ticks_over_threshold)),
    ("used CPU / memory (mean)", lambda s: f"{fmt_pct(s.used_cpu_mean)} / {fmt_pct(s.used_mem_mean)}"),
    ("requested CPU / memory (mean)", lambda s: f"{fmt_pct(s.req_cpu_mean)} / {fmt_pct(s.req_mem_mean)}"),
    ("running tasks (mean)", lambda s: fmt_num(s.tasks_running_mean, 1)),
    ("migrations (succeeded)", lambda s: fmt_num(s.migrations)),
    ("migration attempts", lambda s: fmt_num(s.migration_attempts)),
    ("refused / failed / forced", lambda s: f"{s.migrations_refused} / {s.migrations_failed} / "
                                            f"{s.migrations_forced}"),
    ("refusal rate", lambda s: fmt_pct(s.refusal_rate)),
    ("migration bytes", lambda s: fmt_bytes(s.migration_bytes)),
    ("bytes per migration", lambda s: fmt_bytes(s.bytes_per_migration)),
    ("migration time / downtime (p50)", lambda s: f"{fmt_ms(s.migration_time_p50_ms)} / "
                                                  f"{fmt_ms(s.migration_downtime_p50_ms)}"),
    ("tasks placed / pending / rejected", lambda s: f"{s.tasks_placed} / {s.tasks_pending} / {s.tasks_rejected}"),
    ("placed per simulated minute", lambda s: fmt_num(s.placed_per_min, 1)),
    ("allocation time mean", lambda s: fmt_ms(s.alloc_mean_ms)),
    ("allocation time p50", lambda s: fmt_ms(s.alloc_p50_ms)),
    ("allocation time p90", lambda s: fmt_ms(s.alloc_p90_ms)),
    ("allocation time p99", lambda s: fmt_ms(s.alloc_p99_ms)),
    ("allocation time p99.9", lambda s: fmt_ms(s.alloc_p999_ms)),
) + tuple(
    (f"{p[:-3].replace('_', ' ')} (median; share of total)",
     (lambda s, p=p: f"{fmt_ms(s.part_median_ms[p])}; {fmt_pct(s.part_share[p])}")) for p in PARTS
)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = [[str(c).replace("|", "\\|") for c in r] for r in [header, *rows]]
    out = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(out)


def _policy_line(run: Run) -> dict[str, str]:
    sc = run.manifest.get("scenario", {})
    cell, wl, pol, rn = (sc.get(k, {}) for k in ("cell", "workload", "policy", "run"))
    san = pol.get("san", {}) if isinstance(pol.get("san"), dict) else {}
    nodes = cell.get("nodes") if cell.get("kind") == "model" else f"{cell.get('hosts')} hosts"
    return {
        "cell": f"{cell.get('kind', '?')}, {nodes}",
        "workload": f"{wl.get('source', '?')} ×{wl.get('multiplier', 1)}, compaction {wl.get('compaction', 0)}",
        "front-end": str(pol.get("frontend", "?")),
        "fit": str(pol.get("fit", "?")),
        "scores": f"{pol.get('initial_score', '?')} + {pol.get('realloc_score', '?')}",
        "SAN": "on" if san.get("enabled") else "off",
        "duration": f"{rn.get('duration_s', '?')} s, tick {rn.get('tick_s', '?')} s",
        "seed": str(run.manifest.get("seed", rn.get("seed", "?"))),
        "git": str(run.manifest.get("git_revision") or "unknown"),
    }


# ---------------------------------------------------------------------------
# plots (matplotlib's object API on the Agg canvas: no pyplot, no global state)
# ---------------------------------------------------------------------------

def _figure(w: float = 9.0, h: float = 4.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _time_axis(t_s: np.ndarray) -> tuple[np.ndarray, str]:
    span = float(t_s[-1] - t_s[0]) if t_s.size else 0.0
    return (t_s / 3600.0, "simulated time (h)") if span >= 3 * 3600 else (t_s / 60.0, "simulated time (min)")


def _cdf_points(x: np.ndarray, max_points: int = 3000) -> tuple[np.ndarray, np.ndarray]:
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
    x, xl = _time_axis(t["t_s"])
    sh = asr_shares(t)
    fig = _figure()
    ax = fig.add_subplot()
    order = ("pa", "da", "ta", "sta")
    ax.stackplot(x, *[np.nan_to_num(sh[k]) * 100 for k in order], labels=[k.upper() for k in order],
                 colors=[_COLOURS[k] for k in order], alpha=0.85)
    ax.set_xlim(x[0], x[-1] if x[-1] > x[0] else x[0] + 1)
    ax.set_ylim(0, 100)
    ax.set_xlabel(xl)
    ax.set_ylabel("share of non-idle, non-overloaded nodes (%)")
    ax.set_title(f"Allocation score ratios — {run.name}")
    ax.legend(loc="upper right", ncols=4, fontsize="small")
    fig.savefig(path)


def plot_overloaded(run: Run, path: Path) -> None:
    t = run.ticks
    x, xl = _time_axis(t["t_s"])
    nodes = np.maximum(t["nodes"], 1)
    fig = _figure(9.0, 5.5)
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
    x, xl = _time_axis(t["t_s"])
    fig = _figure(9.0, 6.0)
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
    fig = _figure(11.0, 4.5)
    ax, ax2 = fig.subplots(1, 2, sharey=True)
    xs, ys = _cdf_points(np.maximum(a["total_ms"][placed], floor))
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
        xs, ys = _cdf_points(np.maximum(a[p][placed], floor))
        ax2.step(xs, ys, where="pre", color=c, lw=1.2, label=f"{p[:-3].replace('_', ' ')} "
                                                              f"({fmt_pct(s.part_share[p])} of total)")
    ax2.set_xscale("log")
    ax2.set_xlabel(f"part of allocation time (ms, log; ≤ {floor:g} ms shown at {floor:g})")
    ax2.legend(loc="lower right", fontsize="small")
    ax2.set_title("The four parts (Megha eq. 2)")
    fig.savefig(path)
    return True


# ---------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------

def _json_safe(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None if math.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _json_safe(v) for k, v in o.items()}
    return o


def _stage_key(item: tuple[str, str]) -> tuple[int, str, int]:
    """J, T, M, R, B order of seed 002, then by number: J1 < J2 < … < T2 < T10."""
    k = item[0]
    digits = "".join(c for c in k if c.isdigit())
    return ("JTMRB".find(k[:1]) % 6, k[:1], int(digits) if digits else 0)


def _single(run: Run, out: Path) -> Path:
    allocs = run.allocations(ALLOC_COLUMNS)
    s = summarize(run, allocations=allocs)
    out.mkdir(parents=True, exist_ok=True)
    plot_asr(run, out / "asr.png")
    plot_overloaded(run, out / "overloaded.png")
    plot_migrations(run, out / "migrations.png")
    has_cdf = plot_alloc_cdf(run, s, out / "alloc_cdf.png", allocs)
    if not has_cdf and (out / "alloc_cdf.png").exists():
        (out / "alloc_cdf.png").unlink()  # a stale plot from an earlier report would mislead
    pol = _policy_line(run)
    lines = [f"# Run {run.name}", "",
             f"Results folder `{run.path}`. Regenerate with `cellctl report {run.path}`.", "",
             _md_table(["setting", "value"], list(pol.items())), "",
             "## Summary", "", _md_table(["metric", "value"], [(lbl, fn(s)) for lbl, fn in ROWS]), ""]
    notes = []
    if s.tick_migrations_succeeded != s.migrations:
        notes.append(f"ticks.csv counts {s.tick_migrations_succeeded} succeeded migrations but migrations.csv "
                     f"has {s.migrations}.")
    if s.tick_bytes_moved != s.migration_bytes:
        notes.append(f"ticks.csv counts {fmt_bytes(s.tick_bytes_moved)} moved but migrations.csv has "
                     f"{fmt_bytes(s.migration_bytes)}.")
    if notes:
        lines += ["**Inconsistencies:** " + " ".join(notes), ""]
    lines += ["## Allocation score ratios", "",
              "STA/TA/PA/DA shares among nodes neither idle nor overloaded (MASB Figs 8–9; paper: MASB "
              "PA ≈ 68 %, DA ≈ 22 %, STA+TA ≈ 10 %, PA:DA ≈ 3:1; Borg replay PA:DA ≈ 3:2).", "",
              "![ASR over time](asr.png)", "",
              "## Overloaded nodes", "", "MASB's acceptable error: ≤ 0.5 % of nodes overloaded per minute.", "",
              "![overloaded share](overloaded.png)", "",
              "## Migrations", "", "![migrations and bytes](migrations.png)", "",
              "## Allocation time", ""]
    if has_cdf:
        lines += ["Allocation time = framework queueing + processing + worker queueing + communication "
                  "(Megha eq. 1–2).", "", "![allocation-time CDF](alloc_cdf.png)", ""]
    else:
        lines += ["No task was placed: no CDF.", ""]
    stages = run.manifest.get("stages") or {}
    if stages:
        lines += ["## Policy at each stage", "", "(seed 002's reference architecture)", "",
                  _md_table(["stage", "policy"], sorted(stages.items(), key=_stage_key)), ""]
    lines += ["## Run", "", _md_table(["", "value"], [("completed at t_s", fmt_num(float(run.completed.get("t_s",
                                                                                                       math.nan)), 1)),
                                                 ("versions", ", ".join(f"{k} {v}" for k, v in
                                                                        (run.manifest.get("versions") or {}).items()
                                                                        if v))]), ""]
    (out / "summary.json").write_text(json.dumps(_json_safe(s.as_dict()), indent=1) + "\n")
    md = out / "report.md"
    md.write_text("\n".join(lines))
    return md


def _compare(runs: list[Run], out: Path) -> Path:
    sums = [summarize(r) for r in runs]
    names = _unique_names(runs)
    out.mkdir(parents=True, exist_ok=True)
    pols = [_policy_line(r) for r in runs]
    lines = [f"# Comparison of {len(runs)} runs", "",
             "Regenerate with `cellctl report " + " ".join(str(r.path) for r in runs) + f" --out {out}`.", "",
             "## Settings", "",
             _md_table(["setting", *names], [(k, *(p[k] for p in pols)) for k in pols[0]]), "",
             "## Results", "",
             _md_table(["metric", *names], [(lbl, *(fn(s) for s in sums)) for lbl, fn in ROWS]), "",
             "![ASR](compare_asr.png)", "", "![overloaded](compare_overloaded.png)", ""]
    _plot_compare_asr(names, sums, out / "compare_asr.png")
    _plot_compare_overloaded(names, runs, out / "compare_overloaded.png")
    if _plot_compare_cdf(names, runs, out / "compare_alloc_cdf.png"):
        lines += ["![allocation-time CDFs](compare_alloc_cdf.png)", ""]
    lines += ["Per-run reports: " + ", ".join(f"[{n}]({(r.path / 'report.md').resolve()})" for n, r in
                                              zip(names, runs)), ""]
    _write_comparison_csv(names, sums, out / "comparison.csv")
    md = out / "report.md"
    md.write_text("\n".join(lines))
    return md


def _unique_names(runs: list[Run]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{r.name} ({r.path.name})" if names.count(r.name) > 1 else r.name for r in runs]


def _write_comparison_csv(names: list[str], sums: list[Summary], path: Path) -> None:
    import csv

    flat = []
    for n, s in zip(names, sums):
        d = s.as_dict()
        d["name"] = n
        for p in PARTS:
            d[f"{p}_median"] = d["part_median_ms"][p]
            d[f"{p}_share"] = d["part_share"][p]
        del d["part_median_ms"], d["part_share"]
        flat.append(d)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(flat[0]), lineterminator="\n")
        w.writeheader()
        for d in flat:
            w.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()})


def _plot_compare_asr(names: list[str], sums: list[Summary], path: Path) -> None:
    fig = _figure(max(6.0, 1.2 * len(names) + 3), 4.5)
    ax = fig.add_subplot()
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    for k in ("pa", "da", "ta", "sta"):
        v = np.array([np.nan_to_num(getattr(s, f"asr_{k}")) * 100 for s in sums])
        ax.bar(x, v, bottom=bottom, color=_COLOURS[k], label=k.upper())
        bottom += v
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize="small")
    ax.set_ylabel("mean share of non-idle, non-overloaded nodes (%)")
    ax.set_ylim(0, 100)
    ax.legend(ncols=4, fontsize="small", loc="lower right")
    ax.set_title("Allocation score ratios")
    fig.savefig(path)


def _plot_compare_overloaded(names: list[str], runs: list[Run], path: Path) -> None:
    fig = _figure()
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


def _plot_compare_cdf(names: list[str], runs: list[Run], path: Path) -> bool:
    fig = _figure()
    ax = fig.add_subplot()
    any_ = False
    for n, r in zip(names, runs):
        a = r.allocations(["outcome", "total_ms"])
        v = a["total_ms"][a["outcome"] == "placed"]
        if v.size == 0:
            continue
        any_ = True
        xs, ys = _cdf_points(np.maximum(v, 1e-3))
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


def write_report(run_dirs: Sequence[str | Path], out: str | Path | None = None) -> Path:
    """Write the report of one run (into *out*, default the run's folder) or the comparison of several
    (into *out*, required).  Every folder must be a completed run (:func:`load_run`).  Returns the
    path of report.md.
    """
    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    if not run_dirs:
        raise InvalidArgument("report: give at least one results folder")
    runs = [load_run(d) for d in run_dirs]
    if len(runs) == 1:
        return _single(runs[0], Path(out) if out is not None else runs[0].path)
    if out is None:
        raise InvalidArgument(f"report: comparing {len(runs)} runs needs --out DIR for the comparison report")
    return _compare(runs, Path(out))
