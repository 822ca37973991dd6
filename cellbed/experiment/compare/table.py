"""The numbers ``cellctl compare`` puts side by side: one real run and its model twin, each a
results folder on the same simulated axis (pure, over loaded runs).

Every metric is computed the same way from both folders; the relative difference is
``(model − real) / |real|`` (None where the real value is 0; the absolute difference then says it).
``over`` marks a difference beyond ``TOLERANCE`` (the issue's 10 %). The run is also cut into
``PARTS`` equal windows of ticks, so a difference that only holds part of the time shows.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from cellbed.experiment.report.summary import asr_shares, job_metrics_of, nan_mean
from cellbed.experiment.results.reader import Run

TOLERANCE = 0.10
PARTS = 4


@dataclasses.dataclass(frozen=True)
class Row:
    metric: str
    unit: str
    real: float
    model: float

    @property
    def diff(self) -> float:
        return self.model - self.real

    @property
    def rel(self) -> float | None:
        if not (math.isfinite(self.real) and math.isfinite(self.model)) or self.real == 0:
            return None
        return (self.model - self.real) / abs(self.real)

    @property
    def over(self) -> bool:
        r = self.rel
        return r is not None and abs(r) > TOLERANCE

    def as_dict(self) -> dict:
        return {"metric": self.metric, "unit": self.unit, "real": self.real, "model": self.model,
                "diff": self.diff, "rel": self.rel, "over_tolerance": self.over}


def _pct(x: float) -> float:
    return 100.0 * x if math.isfinite(x) else math.nan


def _quantile(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.quantile(x, q)) if x.size else math.nan


def tick_metrics(t: dict[str, np.ndarray]) -> dict[str, tuple[str, float]]:
    """Per-tick averages and sums of a tick table (or a window of one)."""
    nodes = np.maximum(t["nodes"].astype(np.float64), 1.0)
    sh = asr_shares(t)
    return {
        "overloaded share": ("% of hosts", _pct(nan_mean(t["overloaded"] / nodes))),
        "idle share": ("% of hosts", _pct(nan_mean(t["idle"] / nodes))),
        **{f"{k.upper()} share": ("% of active hosts", _pct(nan_mean(sh[k]))) for k in ("sta", "ta", "pa", "da")},
        "used CPU": ("% of the cell", _pct(nan_mean(t["used_cpu"]))),
        "used memory": ("% of the cell", _pct(nan_mean(t["used_mem"]))),
        "VMs running": ("mean", nan_mean(t["tasks_running"].astype(np.float64))),
        "migrations started": ("count", float(t["migrations_attempted"].sum())),
        "migrations succeeded": ("count", float(t["migrations_succeeded"].sum())),
        "SAN refusals": ("count", float(t["migrations_refused"].sum())),
        "migrations failed": ("count", float(t["migrations_failed"].sum())),
        "bytes moved": ("MiB", float(t["bytes_moved"].sum()) / 2**20),
    }


def run_metrics(run: Run) -> dict[str, tuple[str, float]]:
    """Every metric of the comparison for one results folder."""
    out = tick_metrics(run.ticks)
    m = run.migrations(("outcome", "time_ms", "downtime_ms"))
    ok = m["outcome"] == "succeeded"
    out["migration time p50"] = ("ms", _quantile(m["time_ms"][ok].astype(np.float64), 0.5))
    out["downtime p50"] = ("ms", _quantile(m["downtime_ms"][ok].astype(np.float64), 0.5))
    a = run.allocations(("outcome", "total_ms"))
    placed = a["outcome"] == "placed"
    out["VMs placed"] = ("count", float(placed.sum()))
    out["allocation time p50"] = ("ms", _quantile(a["total_ms"][placed].astype(np.float64), 0.5))
    out["allocation time p90"] = ("ms", _quantile(a["total_ms"][placed].astype(np.float64), 0.9))
    jobs = job_metrics_of(run)          # a jobs workload (tasks.csv): the reference architecture's metrics
    for key, name, unit in JOB_METRICS if jobs else ():
        out[name] = (unit, jobs[key])
    return out


JOB_METRICS = (("jobs", "jobs finished", "count"), ("trt_mean_s", "TRT mean", "s"), ("trt_p95_s", "TRT p95", "s"),
               ("jms_mean_s", "JMS mean", "s"), ("njsl_mean", "NJSL mean", "ratio"), ("jwt_mean_s", "JWT mean", "s"))


def rows(real: dict[str, tuple[str, float]], model: dict[str, tuple[str, float]]) -> list[Row]:
    return [Row(k, u, v, model[k][1]) for k, (u, v) in real.items() if k in model]


def windows(t: dict[str, np.ndarray], parts: int = PARTS) -> list[dict[str, np.ndarray]]:
    """*t* cut into *parts* consecutive windows of (almost) equal tick counts."""
    n = len(t["t_s"])
    cuts = np.linspace(0, n, parts + 1).round().astype(int)
    return [{k: v[a:b] for k, v in t.items()} for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


WINDOW_METRICS = ("overloaded share", "PA share", "DA share", "used CPU", "used memory", "migrations succeeded")


def window_rows(real: Run, model: Run, parts: int = PARTS) -> list[tuple[str, list[Row]]]:
    """Per window ("0–15 min", ...): the WINDOW_METRICS of both runs."""
    t = real.ticks["t_s"]
    tick = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    out = []
    for wr, wm in zip(windows(real.ticks, parts), windows(model.ticks, parts)):
        label = f"{(wr['t_s'][0] - tick) / 60:.0f}–{wr['t_s'][-1] / 60:.0f} min"
        mr, mm = tick_metrics(wr), tick_metrics(wm)
        out.append((label, [Row(k, mr[k][0], mr[k][1], mm[k][1]) for k in WINDOW_METRICS]))
    return out


def fmt(x: float | None, fn: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return fn(x)


def fmt_rel(r: Row) -> str:
    return "—" if r.rel is None else f"{r.rel * 100:+.0f} %" + (" ⚠" if r.over else "")
