"""A run's numbers for the report (pure): ASR shares, overloaded share, migrations and allocation-time percentiles and parts, the trace reader's anomalies, and how each is formatted."""
from __future__ import annotations

import dataclasses
import csv
import math
from pathlib import Path
from dataclasses import dataclass
from typing import Any
import numpy as np
from cellbed.experiment.report.jobs import job_metrics
from cellbed.experiment.results.files import STAGES, TASKS
from cellbed.domain.errors import FailedPrecondition
from cellbed.experiment.results.reader import Run


OVERLOAD_THRESHOLD = 0.005
PARTS = ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms")
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
ASR_NAMES = ("sta", "ta", "pa", "da")
ASR_COLOURS = {"sta": "#d62728", "ta": "#ff7f0e", "pa": "#2ca02c", "da": "#1f77b4"}


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
    jobs: dict[str, float] = dataclasses.field(default_factory=dict)       # TRT, JMS, NJSL, JWT (tasks.csv)
    stage_us: dict[str, float] = dataclasses.field(default_factory=dict)   # mean µs per call by stage (stages.csv)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def nan_mean(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


def asr_shares(ticks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-tick STA/TA/PA/DA shares among active (non-idle, non-overloaded) nodes; NaN where none."""
    active = sum(ticks[k].astype(np.float64) for k in ASR_NAMES)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {k: np.where(active > 0, ticks[k] / np.where(active > 0, active, 1), np.nan) for k in ASR_NAMES}


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
    asr = {k: nan_mean(sh[k]) for k in ASR_NAMES}
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
        idle_mean=nan_mean(idle), overloaded_mean=nan_mean(over), overloaded_max=float(np.nanmax(over)) if
        np.isfinite(over).any() else math.nan,
        ticks_over_threshold=float(np.mean(over > OVERLOAD_THRESHOLD)),
        used_cpu_mean=nan_mean(t["used_cpu"]), used_mem_mean=nan_mean(t["used_mem"]),
        req_cpu_mean=nan_mean(t["req_cpu"]), req_mem_mean=nan_mean(t["req_mem"]),
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
        jobs=job_metrics_of(run), stage_us=_stage_us(run),
    )


def job_metrics_of(run: Run) -> dict[str, float]:
    """The job metrics, when the run has its tasks' jobs and durations (a jobs workload's tasks.csv)."""
    path = Path(run.path) / TASKS
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    tasks = {"task": [r["task"] for r in rows], "job": [int(r["job"]) for r in rows],
             "arrival_s": [float(r["arrival_s"]) for r in rows], "duration_s": [float(r["duration_s"]) for r in rows]}
    al = run.allocations(["task", "outcome", "start_s"])
    starts = {t: float(s) for t, o, s in zip(al["task"], al["outcome"], al["start_s"]) if o == "placed"}
    return job_metrics(tasks, starts)


def _stage_us(run: Run) -> dict[str, float]:
    """Mean µs per call of each stage (its policies' calls summed), from stages.csv."""
    path = Path(run.path) / STAGES
    if not path.exists():
        return {}
    by: dict[str, list[float]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            c = by.setdefault(r["stage"], [0.0, 0.0])
            c[0] += float(r["total_s"])
            c[1] += float(r["calls"])
    return {k: (v[0] / v[1] * 1e6 if v[1] else math.nan) for k, v in sorted(by.items())}


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


def trace_rows(manifest: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, count, first example) of every trace anomaly and note in the manifest's ``trace``
    section, anomalies first, then the reorder window per table that moved rows; [] without a trace."""
    tr = manifest.get("trace") or {}
    out = []
    for kind in ("anomalies", "notes"):
        for k, v in sorted((tr.get(kind) or {}).items()):
            label = k if kind == "anomalies" else f"{k} (note)"
            out.append((label, fmt_num(int(v.get("count", 0))), str(v.get("first") or "")))
    reorder = tr.get("reorder") or {}
    for t, r in sorted((k, v) for k, v in reorder.items() if isinstance(v, dict)):
        if r.get("out_of_order"):
            out.append((f"reorder {t}: rows moved / beyond the window / largest distance",
                        f"{r['out_of_order']} / {r.get('late', 0)} / {r.get('max_distance_us', 0) / 1e6:g} s",
                        f"window {reorder.get('window_us', 0) / 1e6:g} s"))
    return out
