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

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.markdown import md_table
from cellbed.experiment.results.reader import Run, load_run
from cellbed.experiment.report.stages import sections as stage_sections
from cellbed.experiment.report.summary import (
    ALLOC_COLUMNS,
    OVERLOAD_THRESHOLD,
    PARTS,
    Summary,
    asr_shares,
    fmt_bytes,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    summarize,
    trace_rows,
)
from cellbed.experiment.report.plots import (plot_alloc_cdf, plot_asr, plot_compare_asr, plot_compare_cdf,
                                             plot_compare_overloaded, plot_migrations, plot_overloaded)

__all__ = ["ALLOC_COLUMNS", "OVERLOAD_THRESHOLD", "PARTS", "Summary", "asr_shares", "summarize", "write_report"]

"""MASB's acceptable share of overloaded nodes per 1-minute period."""
# ---------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------

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
             md_table(["setting", "value"], list(pol.items())), "",
             "## Summary", "", md_table(["metric", "value"], [(lbl, fn(s)) for lbl, fn in ROWS]), ""]
    notes = []
    if s.tick_migrations_succeeded != s.migrations:
        notes.append(f"ticks.csv counts {s.tick_migrations_succeeded} succeeded migrations but migrations.csv "
                     f"has {s.migrations}.")
    if s.tick_bytes_moved != s.migration_bytes:
        notes.append(f"ticks.csv counts {fmt_bytes(s.tick_bytes_moved)} moved but migrations.csv has "
                     f"{fmt_bytes(s.migration_bytes)}.")
    if notes:
        lines += ["**Inconsistencies:** " + " ".join(notes), ""]
    trace = trace_rows(run.manifest)
    if "trace" in run.manifest:
        tr = run.manifest["trace"]
        lines += ["## Trace", "", f"Read from `{tr.get('path', '?')}`: " + ", ".join(
            f"{t} {fmt_num(int(n))} rows" for t, n in sorted((tr.get("rows") or {}).items())) + ".", ""]
        lines += ([md_table(["anomaly", "count", "first example"], trace), ""] if trace
                  else ["No anomalies.", ""])
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
                  md_table(["stage", "policy"], sorted(stages.items(), key=_stage_key)), ""]
    lines += stage_sections(run.path, run.manifest, out)
    lines += ["## Run", "", md_table(["", "value"], [("completed at t_s", fmt_num(float(run.completed.get("t_s",
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
    names = unique_names(runs)
    out.mkdir(parents=True, exist_ok=True)
    pols = [_policy_line(r) for r in runs]
    lines = [f"# Comparison of {len(runs)} runs", "",
             "Regenerate with `cellctl report " + " ".join(str(r.path) for r in runs) + f" --out {out}`.", "",
             "## Settings", "",
             md_table(["setting", *names], [(k, *(p[k] for p in pols)) for k in pols[0]]), "",
             "## Results", "",
             md_table(["metric", *names], [(lbl, *(fn(s) for s in sums)) for lbl, fn in ROWS]), "",
             "![ASR](compare_asr.png)", "", "![overloaded](compare_overloaded.png)", ""]
    plot_compare_asr(names, sums, out / "compare_asr.png")
    plot_compare_overloaded(names, runs, out / "compare_overloaded.png")
    if plot_compare_cdf(names, runs, out / "compare_alloc_cdf.png"):
        lines += ["![allocation-time CDFs](compare_alloc_cdf.png)", ""]
    lines += ["Per-run reports: " + ", ".join(f"[{n}]({(r.path / 'report.md').resolve()})" for n, r in
                                              zip(names, runs)), ""]
    write_comparison_csv(names, sums, out / "comparison.csv")
    md = out / "report.md"
    md.write_text("\n".join(lines))
    return md


def unique_names(runs: list[Run]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{r.name} ({r.path.name})" if names.count(r.name) > 1 else r.name for r in runs]


def write_comparison_csv(names: list[str], sums: list[Summary], path: Path) -> None:
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
