"""Synthetic, GCD-2011-shaped workload generator (DESIGN §10.2, digest §E.3–E.12).

Seeded, reproducible and streaming: :class:`WorkloadGenerator` is a Python
generator of :mod:`~cellbed.workload.events`; it holds only the state of the
tasks that are running now (numpy struct-of-arrays, a heap of end times), so a
29-day month at 12.5k nodes never sits in memory.

Model (every default is traceable to a digest row; see the comments on
:class:`GeneratorConfig`):

- **Cell.** Nodes are drawn from the machine classes of §E.3 by exact
  apportionment (largest remainder), then shuffled.  Each node gets 21 binary
  attributes (§E.9); attribute *j* is set on exactly ``round(p_j · N)`` nodes
  (at least one), so rare attributes really are rare but never absent.
- **Warm start.** At ``start_us`` the cell is already in steady state: the
  running set of an M/G/∞ system, i.e. ``Poisson(tasks_per_node · N)`` tasks
  whose total durations are length-biased and whose ages are uniform in
  ``[0, duration)``.  Pre-existing tasks are emitted as one-task jobs (their
  job grouping is not reconstructed, but each draws its request level from the
  size-biased size of the job it came from).  They get a usage record at
  ``start_us`` covering the previous period, so usage is known from the start.
- **Arrivals.** Poisson job arrivals; 75% of jobs have one task, the rest draw
  their size from a power-of-2 / power-of-10 tail (§E.4), capped at
  ``max_job_fraction_of_nodes`` of the cell.  Tasks of a job share user,
  priority, requests and constraints; durations are per task.  Jobs are drawn
  64 at a time with numpy (a bounded look-ahead; the tasks wait in their
  slots, invisible, until their AddTask is emitted).
- **Durations.** A piecewise log-uniform CDF through the anchors of §E.5
  (mice and elephants).  Production tasks are concentrated in the long
  segments (``production_prob_by_segment``), non-production fill the rest, so
  the overall CDF is exactly the anchored one.
- **Requests.** CPU and memory requests lie on the power-of-2/power-of-10 grid
  of §E.7.  Per band group (production / non-production) and resource, the
  grid weights are a log-normal discretised on the grid,
  ``w_i ∝ exp(-(ln g_i - loc)² / 2σ²)``; ``loc`` is calibrated (below) and
  shifted down by ``request_job_size_exponent · ln(tasks in job)`` (big jobs
  are many small tasks).  CPU and memory are correlated through a Gaussian
  copula.
- **Usage.** Memory used = request × Beta(mean 0.8).  CPU: a task is
  "near-zero" (mean < 0.01 of the largest machine) or "active" (mean =
  request × Beta(mean m_o)).  Instantaneous CPU is a multiplicative cascade of
  mean-one Gamma factors, task mean × regime level × 5-min record × 1-s
  sample, with the per-task σ of the 1-s samples on the line
  σ ≈ 0.36·μ + 0.015 and σ of 5-min means on 0.31·μ + 0.010 ([003], §E.8),
  times a log-normal scatter.  A share of tasks is non-stationary: its regime
  level changes about hourly and carries part of the variance.  Usage records
  (``UpdateTaskUsedResources``) are emitted every 300 s for every running
  task (none at removal: see ``_remove``).
- **Constraints.** Half the jobs are constrained with 1+Geometric(0.6) =/≠
  constraints on the common attributes; independently, 12.5 tasks in 10k get an
  extra EQUAL constraint on a rare attribute (< 1% of nodes).

Self-calibration (digest §E.11)
-------------------------------
The targets are read as **cell-level, placement-independent ratios of the
running set** (the demand side: "running" means between AddTask and
RemoveTask, because the generator places nothing), averaged over time:

- running tasks / nodes = ``target_tasks_per_node`` (≈ 11);
- Σ 5-min mean CPU used / Σ node CPU = ``target_used_cpu`` (40–50% → 0.45);
- Σ memory used / Σ node memory = ``target_used_mem`` (60–70% → 0.65);
- Σ CPU *requested by production tasks* / Σ node CPU = ``target_prod_requested_cpu``
  (0.85) and likewise memory (0.70).  This is the [000] statement
  "production requests reserve ≈85% CPU / 70% memory" taken cell-wide; it is
  *not* a per-node figure (that depends on the placement policy, e.g. MASB's
  RUS rule keeps each node ≤ 90%), and it is a *reservation* (request) figure,
  not usage.  Together with the usage targets it implies total CPU requests
  ≈ 1.05× capacity: the cell is over-committed on CPU requests, as Borg was.

The generator solves, in expectation and before emitting anything: the task
arrival rate (Little's law on the duration mix); the four request locations (production
CPU and memory from the reservation targets, non-production memory from the
used-memory target, non-production CPU from the used-CPU target); the active
tasks' mean use/request ratio m_o (so the mean CPU use/request over running
tasks is ``cpu_use_ratio_mean``); and the near-zero probability (so that
``near_zero_frac`` of long tasks have mean CPU < 0.01).  Capacities are those of
the full cell before compaction, so compaction and the workload multiplier
raise the load as in MASB's throughput experiments.  See
:attr:`WorkloadGenerator.calibration`.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from cellbed.workload.events import (
    MAX_PRIORITY,
    AddNode,
    AddNodeAttributes,
    AddTask,
    Band,
    Constraint,
    ConstraintOp,
    EndReason,
    RemoveNode,
    RemoveTask,
    UpdateTaskUsedResources,
    WorkloadEvent,
    band_of,
)

__all__ = [
    "MachineClass",
    "DEFAULT_MACHINE_CLASSES",
    "DEFAULT_ATTRIBUTE_PROBS",
    "GeneratorConfig",
    "NodeSpec",
    "Calibration",
    "WorkloadGenerator",
    "generate",
    "attribute_name",
]

log = logging.getLogger(__name__)

_US = 1_000_000
_MU_MIN = 1e-4  # floor on a task's mean CPU, keeps the Gamma cascade finite
_JOB_BLOCK = 64  # jobs drawn per vectorised block (bounds the prefetched state)


@dataclass(frozen=True)
class MachineClass:
    """A machine capacity class: normalised CPU and memory, share of machines, platform."""

    cpu: float
    mem: float
    share: float
    platform: str


# Digest §E.3 table / §E.12 machine_classes (shares from [EXT:maggioni-thesis]).
DEFAULT_MACHINE_CLASSES: tuple[MachineClass, ...] = (
    MachineClass(0.50, 0.50, 0.5347, "B"),
    MachineClass(0.50, 0.25, 0.3074, "B"),
    MachineClass(0.50, 0.75, 0.0795, "B"),
    MachineClass(1.00, 1.00, 0.0632, "C"),
    MachineClass(0.25, 0.25, 0.0099, "A"),
    MachineClass(0.50, 0.12, 0.0043, "B"),
    MachineClass(0.50, 0.03, 0.0004, "B"),
    MachineClass(0.50, 0.97, 0.0003, "B"),
    MachineClass(1.00, 0.50, 0.0002, "C"),
    MachineClass(0.50, 0.06, 0.0001, "B"),
)

# §E.9: 21 binary machine properties.  The per-property probabilities are not in
# the sources ([RECON]): 18 common properties spread over 0.05–0.95 and three
# rare ones (< 1% of machines) used by the "very restrictive" constraints.
DEFAULT_ATTRIBUTE_PROBS: tuple[float, ...] = (
    0.95, 0.90, 0.85, 0.80, 0.70, 0.60, 0.50, 0.50, 0.40, 0.35, 0.30,
    0.25, 0.20, 0.15, 0.10, 0.10, 0.05, 0.05, 0.008, 0.005, 0.003,
)


def attribute_name(j: int) -> str:
    """Name of the j-th binary node attribute (GCD names are hashes; ours are readable)."""
    return f"attr{j:02d}"


def _f(default, doc: str):  # a dataclass field with its documentation attached
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class GeneratorConfig:
    """Every knob of the generator, with digest-traceable defaults.

    Units are in the field names (``_s`` seconds, ``_us`` microseconds);
    resources are normalised (1.0 = largest machine).  Invalid values raise
    ValueError naming the field and its allowed range.
    """

    # --- cell (§E.12 "cell") -------------------------------------------------
    nodes: int = _f(12583, "nodes in the full cell (§E.3 counts sum to 12,583)")
    duration_s: float = _f(2_505_600.0, "simulated span, s (§E.1: 29 days)")
    start_us: int = _f(600_000_000, "first timestamp, µs (§E.1: the trace starts at 600 s)")
    seed: int = _f(0, "seed of the numpy SeedSequence")
    machine_classes: tuple[MachineClass, ...] = _f(DEFAULT_MACHINE_CLASSES, "§E.3 classes")

    # --- scaling knobs (§D.10, §D.11) ---------------------------------------
    workload_multiplier: float = _f(1.0, "≥1: each job is cloned floor(m)-1 times, +1 with prob frac(m) (MASB §D.10)")
    compaction: float = _f(0.0, "fraction of nodes removed from the cell, [0, 1) (MASB §D.11)")

    # --- calibration targets (§E.11) ---------------------------------------
    target_tasks_per_node: float = _f(11.0, "running tasks per node (§E.11, [004]: 140k on 12.5k)")
    target_used_cpu: float = _f(0.45, "Σ used CPU / Σ capacity (§E.11: 40–50%)")
    target_used_mem: float = _f(0.65, "Σ used memory / Σ capacity (§E.11: 60–70%)")
    target_prod_requested_cpu: float = _f(0.85, "Σ production CPU requests / Σ capacity (§E.6, §E.11)")
    target_prod_requested_mem: float = _f(0.70, "Σ production memory requests / Σ capacity (§E.6, §E.11)")

    # --- durations (§E.5) ------------------------------------------------------
    duration_anchors_s: tuple[tuple[float, float], ...] = _f(
        ((1.0, 0.0), (60.0, 0.30), (180.0, 0.50), (1200.0, 0.70), (7200.0, 0.95),
         (86400.0, 0.9837), (2_505_600.0, 1.0)),
        "piecewise log-uniform CDF (§E.5 anchors; the 24 h anchor moved 0.99→0.9837 so Little's law "
        "gives 0.048 arrivals/node·min at 11 tasks/node, as §E.5 asks; 1 s floor added)",
    )
    production_prob_by_segment: tuple[float, ...] = _f(
        (0.03, 0.03, 0.03, 0.20, 0.60, 0.55),
        "P(production | duration segment) [RECON]: gives 10% production arrivals (§E.6) that are "
        "mostly long-running services, ≈53% of the running set",
    )
    free_share_of_nonproduction: float = _f(0.5, "free vs middle among non-production (§E.6: 45%/45%)")

    # --- jobs (§E.4) -----------------------------------------------------------
    single_task_job_frac: float = _f(0.75, "share of one-task jobs (§E.4, Reiss 2012)")
    tasks_per_job_values: tuple[int, ...] = _f(
        (2, 4, 5, 8, 10, 16, 20, 32, 50, 64, 100, 128, 200, 256, 500, 1000),
        "multi-task job sizes, biased to powers of 2 and 10 (§E.4)",
    )
    tasks_per_job_exponent: float = _f(0.5, "tail weights ∝ size**-exponent [RECON]")
    max_job_fraction_of_nodes: float = _f(
        0.08, "largest job ≤ this × nodes [RECON: 1000 tasks in a 12.5k cell], keeps small cells sane"
    )
    different_machines_prob: float = _f(0.1, "multi-task jobs with the different-machines flag (§E.9, [UNCERTAIN])")
    users: int = _f(925, "distinct users (§E.4, Reiss 2012)")
    user_zipf_exponent: float = _f(1.0, "user popularity ∝ rank**-exponent [RECON]")
    priority_weights: tuple[float, ...] = _f(
        (1.0,) * 12, "weights of priorities 0..11 within their band [RECON: uniform; no source]"
    )

    # --- requests (§E.7) -------------------------------------------------------
    request_grid: tuple[float, ...] = _f(
        (0.00625, 0.0125, 0.025, 0.03125, 0.0625, 0.125, 0.25, 0.5),
        "normalised request values for CPU and memory (§E.7 cpu_grid)",
    )
    request_log_spread: float = _f(
        0.6, "σ of ln(request) around the calibrated location, requests snapped to the grid [RECON]"
    )
    request_job_size_exponent: float = _f(
        0.2, "per-task request level ∝ (tasks in job)**-exponent [RECON]: big jobs are many small tasks; "
        "keeps one large job from moving the cell's reservation by several percent"
    )
    request_cpu_mem_correlation: float = _f(0.5, "Gaussian-copula correlation of CPU and memory requests [RECON]")

    # --- usage (§E.7, §E.8) ----------------------------------------------------
    cpu_use_ratio_mean: float = _f(0.45, "mean CPU used/requested over running tasks (§E.7, §E.12)")
    cpu_use_ratio_concentration: float = _f(
        6.0, "Beta a+b of active tasks' use/request ratio [RECON]; the near-zero archetype supplies the "
        "ratios down to ~0.02 (§E.7)"
    )
    mem_use_ratio_mean: float = _f(0.8, "mean memory used/requested (§E.7, §E.12)")
    mem_use_ratio_concentration: float = _f(10.0, "Beta a+b of the memory ratio [RECON]")
    near_zero_frac: float = _f(0.465, "share of long (≥2 h) tasks with mean CPU < near_zero_cpu (§E.8: 46.5%)")
    near_zero_cpu: float = _f(0.01, "near-zero threshold = one [003] histogram bin (§B.3)")
    long_task_s: float = _f(7200.0, "'long task' threshold, s ([003]: ≥ 2 h)")
    inst_sigma_slope: float = _f(0.36, "σ_inst = slope·μ + intercept (§E.8, [003] Fig. 3)")
    inst_sigma_intercept: float = _f(0.015, "see inst_sigma_slope")
    avg_sigma_slope: float = _f(0.31, "σ of 5-min means = slope·μ + intercept (§E.8)")
    avg_sigma_intercept: float = _f(0.010, "see avg_sigma_slope")
    sigma_scatter: float = _f(0.3, "log-normal scatter of per-task σ about the line, mean-one [RECON]")
    nonstationary_frac: float = _f(
        0.65,
        "tasks with hourly regime changes [RECON]; 0.65 makes [003]'s KS test on two random 1-h "
        "windows reject for ≈30% of long tasks (§E.8), since a 12-vs-12-sample KS test misses weak shifts",
    )
    nonstationary_variance_share: float = _f(0.9, "log-share of the 5-min-mean variance carried by regimes [RECON]")
    regime_mean_s: float = _f(3600.0, "mean regime length, s (§E.8: hourly scale)")
    usage_period_s: float = _f(300.0, "usage record period, s (§E.2: 5-minute records)")
    mem_usage_noise: float = _f(0.02, "relative σ of memory use between records [RECON]")

    # --- constraints (§E.9) ----------------------------------------------------
    attribute_probs: tuple[float, ...] = _f(DEFAULT_ATTRIBUTE_PROBS, "share of nodes with each of the 21 attributes")
    constrained_job_frac: float = _f(0.5, "P(job has ≥1 constraint) (§E.9, [001]: ~50%)")
    extra_constraint_geom_p: float = _f(0.6, "k = 1 + Geometric(p) constraints (§E.9)")
    max_constraints: int = _f(6, "cap on k [RECON]")
    min_match_fraction: float = _f(0.02, "ordinary constraint sets match ≥ this share of nodes [RECON]")
    restrictive_prob: float = _f(0.00125, "tasks restricted to very few nodes (§E.9, [000]: 10–15 per 10k)")
    restrictive_max_match: float = _f(0.01, "'very few nodes' = attributes on < this share of nodes (§E.9)")

    # --- termination (§E.10) ---------------------------------------------------
    end_reason_weights: tuple[tuple[EndReason, float], ...] = _f(
        ((EndReason.FINISH, 0.6), (EndReason.KILL, 0.3), (EndReason.FAIL, 0.1)),
        "end-state mix [RECON, §E.10: no sourced proportions]; EVICT/LOST are the scheduler's doing",
    )

    # --- churn (§E.3) ----------------------------------------------------------
    churn: bool = _f(False, "emit node failures and returns")
    churn_down_frac_29d: float = _f(0.40, "share of machines down at least once in 29 days (§E.3)")
    churn_downtime_mean_s: float = _f(3600.0, "mean time a failed node stays out, s [RECON]")

    def __post_init__(self) -> None:
        self._validate()

    # ------------------------------------------------------------------
    def _validate(self) -> None:
        def bad(name: str, rng: str, value) -> None:
            raise ValueError(f"GeneratorConfig.{name} must be {rng}, got {value!r}")

        def unit(name: str, lo_open=False, hi_open=False) -> None:
            v = getattr(self, name)
            lo_ok = v > 0 if lo_open else v >= 0
            hi_ok = v < 1 if hi_open else v <= 1
            if not (isinstance(v, (int, float)) and lo_ok and hi_ok):
                bad(name, f"in {'(' if lo_open else '['}0, 1{')' if hi_open else ']'}", v)

        def positive(name: str) -> None:
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                bad(name, "a finite number > 0", v)

        if not isinstance(self.nodes, int) or self.nodes < 1:
            bad("nodes", "an integer >= 1", self.nodes)
        positive("duration_s")
        if not isinstance(self.start_us, int) or self.start_us < 0:
            bad("start_us", "an integer >= 0", self.start_us)
        if not isinstance(self.seed, int) or self.seed < 0:
            bad("seed", "an integer >= 0", self.seed)
        if not self.machine_classes:
            bad("machine_classes", "a non-empty tuple", self.machine_classes)
        for mc in self.machine_classes:
            if not (0 < mc.cpu <= 1 and 0 < mc.mem <= 1 and mc.share >= 0):
                bad("machine_classes", "classes with cpu, mem in (0, 1] and share >= 0", mc)
        if sum(mc.share for mc in self.machine_classes) <= 0:
            bad("machine_classes", "classes whose shares sum to > 0", self.machine_classes)
        if not (isinstance(self.workload_multiplier, (int, float)) and 1 <= self.workload_multiplier <= 64):
            bad("workload_multiplier", "in [1, 64]", self.workload_multiplier)
        unit("compaction", hi_open=True)
        if round(self.nodes * (1 - self.compaction)) < 1:
            bad("compaction", "small enough to keep at least one node", self.compaction)
        positive("target_tasks_per_node")
        for name in ("target_used_cpu", "target_used_mem", "target_prod_requested_cpu", "target_prod_requested_mem"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v < 2):
                bad(name, "in (0, 2)", v)

        a = self.duration_anchors_s
        if len(a) < 2:
            bad("duration_anchors_s", "at least two (seconds, cdf) anchors", a)
        ts = [p[0] for p in a]
        ps = [p[1] for p in a]
        if ts[0] <= 0 or any(t1 <= t0 for t0, t1 in zip(ts, ts[1:])):
            bad("duration_anchors_s", "anchors with strictly increasing times > 0 s", a)
        if ps[0] != 0 or ps[-1] != 1 or any(p1 < p0 for p0, p1 in zip(ps, ps[1:])):
            bad("duration_anchors_s", "a CDF rising from 0.0 at the first anchor to 1.0 at the last", a)
        if len(self.production_prob_by_segment) != len(a) - 1:
            bad("production_prob_by_segment", f"{len(a) - 1} values (one per duration segment)",
                self.production_prob_by_segment)
        if any(not 0 <= p <= 1 for p in self.production_prob_by_segment):
            bad("production_prob_by_segment", "probabilities in [0, 1]", self.production_prob_by_segment)
        seg_mass = [p1 - p0 for p0, p1 in zip(ps, ps[1:])]
        prod = sum(m * p for m, p in zip(seg_mass, self.production_prob_by_segment))
        if not 0 < prod < 1:
            bad("production_prob_by_segment", "such that the production share of arrivals is in (0, 1)", prod)
        unit("free_share_of_nonproduction")

        unit("single_task_job_frac")
        if not self.tasks_per_job_values or any(not isinstance(v, int) or v < 2 for v in self.tasks_per_job_values):
            bad("tasks_per_job_values", "a non-empty tuple of integers >= 2", self.tasks_per_job_values)
        if not 0 <= self.tasks_per_job_exponent <= 5:
            bad("tasks_per_job_exponent", "in [0, 5]", self.tasks_per_job_exponent)
        unit("max_job_fraction_of_nodes", lo_open=True)
        unit("different_machines_prob")
        if not isinstance(self.users, int) or self.users < 1:
            bad("users", "an integer >= 1", self.users)
        if not 0 <= self.user_zipf_exponent <= 5:
            bad("user_zipf_exponent", "in [0, 5]", self.user_zipf_exponent)
        pw = self.priority_weights
        if len(pw) != MAX_PRIORITY + 1 or any(w < 0 for w in pw):
            bad("priority_weights", f"{MAX_PRIORITY + 1} non-negative weights", pw)
        for band in Band:
            if sum(w for p, w in enumerate(pw) if band_of(p) == band) <= 0:
                bad("priority_weights", f"positive total weight in band {band.name}", pw)

        g = self.request_grid
        if len(g) < 2 or any(not 0 < v <= 1 for v in g) or any(v1 <= v0 for v0, v1 in zip(g, g[1:])):
            bad("request_grid", "at least two strictly increasing values in (0, 1]", g)
        if not 0.05 <= self.request_log_spread <= 5:
            bad("request_log_spread", "in [0.05, 5]", self.request_log_spread)
        if not 0 <= self.request_job_size_exponent <= 2:
            bad("request_job_size_exponent", "in [0, 2]", self.request_job_size_exponent)
        if not -0.99 <= self.request_cpu_mem_correlation <= 0.99:
            bad("request_cpu_mem_correlation", "in [-0.99, 0.99]", self.request_cpu_mem_correlation)

        unit("cpu_use_ratio_mean", lo_open=True, hi_open=True)
        positive("cpu_use_ratio_concentration")
        unit("mem_use_ratio_mean", lo_open=True, hi_open=True)
        positive("mem_use_ratio_concentration")
        unit("near_zero_frac", hi_open=True)
        unit("near_zero_cpu", lo_open=True)
        positive("long_task_s")
        for name in ("inst_sigma_slope", "inst_sigma_intercept", "avg_sigma_slope", "avg_sigma_intercept"):
            v = getattr(self, name)
            if not 0 <= v <= 5:
                bad(name, "in [0, 5]", v)
        if self.avg_sigma_slope > self.inst_sigma_slope or self.avg_sigma_intercept > self.inst_sigma_intercept:
            bad("avg_sigma_slope", "≤ inst_sigma_slope, with avg_sigma_intercept ≤ inst_sigma_intercept "
                "(5-min means cannot vary more than 1-s samples)", (self.avg_sigma_slope, self.avg_sigma_intercept))
        if not 0 <= self.sigma_scatter <= 2:
            bad("sigma_scatter", "in [0, 2]", self.sigma_scatter)
        unit("nonstationary_frac")
        unit("nonstationary_variance_share")
        positive("regime_mean_s")
        positive("usage_period_s")
        if self.usage_period_s * _US != int(self.usage_period_s * _US):
            bad("usage_period_s", "a whole number of microseconds", self.usage_period_s)
        if not 0 <= self.mem_usage_noise <= 0.5:
            bad("mem_usage_noise", "in [0, 0.5]", self.mem_usage_noise)

        ap = self.attribute_probs
        if not ap or any(not 0 < p <= 1 for p in ap):
            bad("attribute_probs", "a non-empty tuple of probabilities in (0, 1]", ap)
        unit("constrained_job_frac")
        unit("extra_constraint_geom_p", lo_open=True)
        if not isinstance(self.max_constraints, int) or self.max_constraints < 1:
            bad("max_constraints", "an integer >= 1", self.max_constraints)
        unit("min_match_fraction")
        unit("restrictive_prob")
        unit("restrictive_max_match", lo_open=True)
        if self.constrained_job_frac > 0 and not any(p >= self.restrictive_max_match for p in ap):
            bad("attribute_probs", "to include attributes at or above restrictive_max_match "
                "(for ordinary constraints)", ap)
        if self.restrictive_prob > 0 and not any(p < self.restrictive_max_match for p in ap):
            bad("attribute_probs", "to include an attribute below restrictive_max_match "
                "(restrictive_prob > 0 needs a rare attribute)", ap)

        erw = self.end_reason_weights
        if not erw or any(not isinstance(r, EndReason) or w < 0 for r, w in erw) or sum(w for _, w in erw) <= 0:
            bad("end_reason_weights", "(EndReason, weight >= 0) pairs with positive total", erw)
        unit("churn_down_frac_29d", hi_open=True)
        positive("churn_downtime_mean_s")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "GeneratorConfig":
        """Build a config from plain data (e.g. a TOML table); unknown keys raise ValueError naming the key.

        Lists become tuples; ``machine_classes`` entries may be ``[cpu, mem, share, platform]`` or
        tables with those keys; ``end_reason_weights`` may be a table ``{FINISH = 0.6, ...}``.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"GeneratorConfig has no field {unknown[0]!r} (known: {', '.join(sorted(known))})")

        def tup(v):
            return tuple(tup(x) for x in v) if isinstance(v, (list, tuple)) else v

        kw = {k: tup(v) for k, v in data.items()}
        if "machine_classes" in data:
            kw["machine_classes"] = tuple(
                MachineClass(**mc) if isinstance(mc, Mapping) else MachineClass(*mc) for mc in data["machine_classes"]
            )
        if "end_reason_weights" in data:
            erw = data["end_reason_weights"]
            pairs = erw.items() if isinstance(erw, Mapping) else erw
            try:
                kw["end_reason_weights"] = tuple(
                    (r if isinstance(r, EndReason) else EndReason[str(r).upper()], float(w)) for r, w in pairs
                )
            except KeyError as e:
                raise ValueError(f"GeneratorConfig.end_reason_weights: unknown reason {e.args[0]!r}, "
                                 f"expected one of {[r.name for r in EndReason]}") from None
        return cls(**kw)

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Field name → documentation (unit, range and digest source)."""
        return {f.name: f.metadata.get("doc", "") for f in fields(cls)}


@dataclass(frozen=True)
class NodeSpec:
    """A generated node: id, normalised capacity, platform and the names of its set attributes."""

    node_id: int
    cpu: float
    mem: float
    platform: str
    attributes: tuple[str, ...]


@dataclass(frozen=True)
class Calibration:
    """What the generator solved for, and the steady state it expects (multiplier 1, no compaction)."""

    cell_cpu: float  # Σ CPU of the full (uncompacted) cell
    cell_mem: float
    mean_duration_s: float
    task_arrival_rate_per_s: float  # cell-wide, before the workload multiplier
    job_arrival_rate_per_s: float
    mean_tasks_per_job: float
    arrivals_per_node_min: float
    production_arrival_share: float
    production_running_share: float
    share_over_20min: float
    request_loc_prod_cpu: float
    request_loc_prod_mem: float
    request_loc_nonprod_cpu: float
    request_loc_nonprod_mem: float
    mean_cpu_request_prod: float
    mean_mem_request_prod: float
    mean_cpu_request_nonprod: float
    mean_mem_request_nonprod: float
    active_cpu_ratio_mean: float  # m_o
    near_zero_prob: float  # P(task is in the near-zero archetype)
    expected_tasks_per_node: float
    expected_used_cpu: float
    expected_used_mem: float
    expected_prod_requested_cpu: float
    expected_prod_requested_mem: float
    expected_cpu_use_ratio: float
    expected_near_zero_share_long: float


# ---------------------------------------------------------------------------
# numeric helpers (pure)
# ---------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _beta_cdf(x: float, a: float, b: float) -> float:
    """Regularised incomplete beta I_x(a, b), the CDF of Beta(a, b) at x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lfront = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(lfront)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _norm_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + _ERF(z / math.sqrt(2.0)))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _grid_weights(grid: np.ndarray, loc: float, spread: float) -> np.ndarray:
    """A log-normal discretised on the grid: w_i ∝ exp(-(ln g_i - loc)² / 2 spread²)."""
    lw = -((np.log(grid) - loc) ** 2) / (2.0 * spread * spread)
    w = np.exp(lw - lw.max())
    return w / w.sum()


def _solve_monotone(fn, target: float, lo: float, hi: float, what: str) -> float:
    """Bisection for an increasing fn; ValueError if the target is out of reach."""
    flo, fhi = fn(lo), fn(hi)
    if not flo <= target <= fhi:
        raise ValueError(
            f"calibration infeasible: {what} needs {target:.6g}, reachable range is [{flo:.6g}, {fhi:.6g}]"
        )
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def _apportion(shares: Sequence[float], n: int) -> list[int]:
    """Largest-remainder apportionment of n items to shares."""
    s = np.asarray(shares, dtype=float)
    s = s / s.sum()
    raw = s * n
    counts = np.floor(raw).astype(int)
    rem = n - counts.sum()
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[:rem]] += 1
    return counts.tolist()


# ---------------------------------------------------------------------------
# the generator
# ---------------------------------------------------------------------------


class WorkloadGenerator:
    """One seeded, streaming run of the synthetic workload.

    Iterate it (once) to get the events::

        gen = WorkloadGenerator(GeneratorConfig(nodes=2000, duration_s=6 * 3600, seed=7))
        for ev in gen:
            ...

    ``nodes``, ``calibration`` and ``attribute_names`` are available before
    iterating.  ``live_tasks`` and :meth:`state_size` report the streaming
    state (for tests and progress bars).
    """

    def __init__(self, config: GeneratorConfig | None = None) -> None:
        self.config = cfg = config or GeneratorConfig()
        ss = np.random.SeedSequence(cfg.seed)
        (cell_ss, warm_ss, arr_ss, task_ss, usage_ss, churn_ss, clone_ss) = ss.spawn(7)
        self._rng_cell = np.random.default_rng(cell_ss)
        self._rng_warm = np.random.default_rng(warm_ss)
        self._rng_arr = np.random.default_rng(arr_ss)
        self._rng_task = np.random.default_rng(task_ss)
        self._rng_usage = np.random.default_rng(usage_ss)
        self._rng_churn = np.random.default_rng(churn_ss)
        self._rng_clone = np.random.default_rng(clone_ss)

        self.attribute_names: tuple[str, ...] = tuple(attribute_name(j) for j in range(len(cfg.attribute_probs)))
        self._full_nodes = self._make_cell()
        self.nodes: tuple[NodeSpec, ...] = self._compact(self._full_nodes)
        self._setup_static()
        self.calibration: Calibration = self._calibrate()
        self._started = False

        # streaming state (per running task: one slot)
        self._cap = 0
        self._mu = np.zeros(0)
        self._vL = np.zeros(0)
        self._vR = np.zeros(0)
        self._vW = np.zeros(0)
        self._ns = np.zeros(0, dtype=bool)
        self._L = np.zeros(0)
        self._regime_end = np.zeros(0)
        self._mem = np.zeros(0)
        self._start = np.zeros(0, dtype=np.int64)
        self._alive = np.zeros(0, dtype=bool)
        self._ids: list = []  # slot -> tuple of (job_id, task_index), original first
        self._reason: list = []  # slot -> EndReason
        self._free: list[int] = []
        self._ends: list[tuple[int, int]] = []  # heap of (end_us, slot)
        self._n_live_slots = 0
        self._held_ids = 0
        self._ends_time = 0
        self._block: list | None = None
        self._block_pos = 0
        self._next_job_id = 1
        self.live_tasks = 0  # running task ids, clones included
        self.max_live_tasks = 0
        self.events_emitted = 0

    # ------------------------------------------------------------------ cell
    def _make_cell(self) -> tuple[NodeSpec, ...]:
        cfg, rng = self.config, self._rng_cell
        n = cfg.nodes
        counts = _apportion([mc.share for mc in cfg.machine_classes], n)
        cls = np.repeat(np.arange(len(cfg.machine_classes)), counts)
        rng.shuffle(cls)
        has = np.zeros((n, len(cfg.attribute_probs)), dtype=bool)
        for j, p in enumerate(cfg.attribute_probs):
            k = max(1, min(n, int(round(p * n))))
            has[rng.choice(n, size=k, replace=False), j] = True
        names = self.attribute_names
        out = []
        for i in range(n):
            mc = cfg.machine_classes[int(cls[i])]
            attrs = tuple(names[j] for j in np.flatnonzero(has[i]))
            out.append(NodeSpec(i + 1, mc.cpu, mc.mem, mc.platform, attrs))
        self._node_attr_matrix = has
        return tuple(out)

    def _compact(self, full: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
        keep = int(round(len(full) * (1.0 - self.config.compaction)))
        if keep == len(full):
            return full
        idx = np.sort(self._rng_cell.choice(len(full), size=keep, replace=False))
        return tuple(full[i] for i in idx)

    # -------------------------------------------------------- static tables
    def _setup_static(self) -> None:
        cfg = self.config
        a = cfg.duration_anchors_s
        self._seg_lo = np.array([a[i][0] for i in range(len(a) - 1)])
        self._seg_hi = np.array([a[i + 1][0] for i in range(len(a) - 1)])
        self._seg_mass = np.array([a[i + 1][1] - a[i][1] for i in range(len(a) - 1)])
        lo, hi = self._seg_lo, self._seg_hi
        self._seg_mean = (hi - lo) / np.log(hi / lo)  # mean of log-uniform on [lo, hi]
        pp = np.array(cfg.production_prob_by_segment)
        self._p_prod = float((self._seg_mass * pp).sum())
        self._seg_w_prod = self._seg_mass * pp / (self._seg_mass * pp).sum()
        npm = self._seg_mass * (1 - pp)
        self._seg_w_np = npm / npm.sum()
        lb = self._seg_mass * self._seg_mean  # length-biased segment weights
        self._seg_w_warm = lb / lb.sum()
        self._seg_pp = pp
        # job sizes
        cap = max(2, int(cfg.max_job_fraction_of_nodes * cfg.nodes))
        vals = np.array([v for v in cfg.tasks_per_job_values if v <= cap] or [2])
        w = vals.astype(float) ** (-cfg.tasks_per_job_exponent)
        self._job_vals = vals
        self._job_cdf_a = np.cumsum(w / w.sum())
        self._mean_tail = float((vals * w / w.sum()).sum())
        pjob = np.concatenate([[cfg.single_task_job_frac], (1 - cfg.single_task_job_frac) * w / w.sum()])
        self._size_vals = np.concatenate([[1], vals]).astype(np.int64)
        self._size_ptask = pjob * self._size_vals / (pjob * self._size_vals).sum()  # size-biased
        self._size_ptask_cdf = np.cumsum(self._size_ptask)
        self._mean_tasks_per_job = cfg.single_task_job_frac + (1 - cfg.single_task_job_frac) * self._mean_tail
        # users
        uw = np.arange(1, cfg.users + 1, dtype=float) ** (-cfg.user_zipf_exponent)
        self._user_cdf_a = np.cumsum(uw / uw.sum())
        # priorities per band
        self._prio_vals = {}
        self._prio_cdf_a = {}
        for band in Band:
            ps = [p for p in range(MAX_PRIORITY + 1) if band_of(p) == band]
            ws = np.array([cfg.priority_weights[p] for p in ps])
            self._prio_vals[band] = ps
            self._prio_cdf_a[band] = np.cumsum(ws / ws.sum())
        # end reasons
        self._reasons = [r for r, _ in cfg.end_reason_weights]
        rw = np.array([w for _, w in cfg.end_reason_weights], dtype=float)
        self._reason_cdf_a = np.cumsum(rw / rw.sum())
        # attributes
        ap = np.array(cfg.attribute_probs)
        # actual shares in the full cell (exact counts, see _make_cell)
        self._attr_share = self._node_attr_matrix.mean(axis=0)
        self._attr_index = {name: j for j, name in enumerate(self.attribute_names)}
        self._common_attrs = np.flatnonzero(ap >= cfg.restrictive_max_match)
        self._rare_attrs = np.flatnonzero(ap < cfg.restrictive_max_match)
        self._grid = np.array(cfg.request_grid)
        self._period_us = int(round(cfg.usage_period_s * _US))

    # ------------------------------------------------------------ calibration
    def _calibrate(self) -> Calibration:
        cfg = self.config
        grid = self._grid
        z = cfg.near_zero_cpu
        cell_cpu = float(sum(n.cpu for n in self._full_nodes))
        cell_mem = float(sum(n.mem for n in self._full_nodes))
        n_full = len(self._full_nodes)
        running = cfg.target_tasks_per_node * n_full  # expected running tasks (multiplier 1)

        mean_d = float((self._seg_mass * self._seg_mean).sum())
        lam = running / mean_d
        s_p = float((self._seg_mass * self._seg_mean * self._seg_pp).sum() / mean_d)
        s_n = 1.0 - s_p
        # long tasks (≥ long_task_s), counted per task (as [003] did), by band
        lo, hi, L = self._seg_lo, self._seg_hi, cfg.long_task_s
        frac_above = np.where(hi <= L, 0.0, np.log(hi / np.maximum(lo, L)) / np.log(hi / lo))
        long_p = float((self._seg_mass * frac_above * self._seg_pp).sum())
        long_n = float((self._seg_mass * frac_above * (1 - self._seg_pp)).sum())
        if long_p + long_n <= 0:
            raise ValueError("GeneratorConfig.duration_anchors_s must allow tasks longer than long_task_s")
        lp, ln_ = long_p / (long_p + long_n), long_n / (long_p + long_n)

        spread = cfg.request_log_spread

        beta = cfg.request_job_size_exponent
        shifts = -beta * np.log(self._size_vals)
        ptask = self._size_ptask

        def _W(loc: float) -> np.ndarray:
            """Grid weights of a running task's request: jobs of size n shift loc by -β·ln n,
            mixed over the size-biased size distribution (a task's job size)."""
            return sum(p * _grid_weights(grid, loc + sh, spread) for p, sh in zip(ptask, shifts))

        def mean_req(loc: float) -> float:
            return float((_W(loc) * grid).sum())

        lo_loc = math.log(grid[0]) - 6.0 * spread
        hi_loc = math.log(grid[-1]) + 6.0 * spread
        loc_pc = _solve_monotone(mean_req, cfg.target_prod_requested_cpu * cell_cpu / (running * s_p),
                                lo_loc, hi_loc, "mean production CPU request (target_prod_requested_cpu)")
        loc_pm = _solve_monotone(mean_req, cfg.target_prod_requested_mem * cell_mem / (running * s_p),
                                lo_loc, hi_loc, "mean production memory request (target_prod_requested_mem)")
        mem_np = (cfg.target_used_mem * cell_mem / (running * cfg.mem_use_ratio_mean)
                  - s_p * mean_req(loc_pm)) / s_n
        loc_nm = _solve_monotone(mean_req, mem_np, lo_loc, hi_loc,
                                "mean non-production memory request (target_used_mem vs target_prod_requested_mem)")

        e_u = 1.0 / 3.0  # mean of Beta(1, 2), the near-zero archetype's fraction of min(request, z)
        w_pc = _W(loc_pc)
        minz = np.minimum(grid, z)
        A_p, B_p, C_p = float((w_pc * minz / grid).sum()), float((w_pc * minz).sum()), float((w_pc * grid).sum())
        kappa = cfg.cpu_use_ratio_concentration
        used_target = cfg.target_used_cpu * cell_cpu / running

        def ratio_mo(p_nz: float, loc_nc: float) -> float:
            w = _W(loc_nc)
            A_n = float((w * minz / grid).sum())
            return (cfg.cpu_use_ratio_mean - p_nz * e_u * (s_p * A_p + s_n * A_n)) / (1 - p_nz)

        def used(p_nz: float, loc_nc: float) -> float:
            w = _W(loc_nc)
            B_n, C_n = float((w * minz).sum()), float((w * grid).sum())
            mo = ratio_mo(p_nz, loc_nc)
            return (s_p * (p_nz * e_u * B_p + (1 - p_nz) * mo * C_p)
                    + s_n * (p_nz * e_u * B_n + (1 - p_nz) * mo * C_n))

        def q_active_below(mo: float, loc_nc: float) -> float:
            a_, b_ = mo * kappa, (1 - mo) * kappa
            pb = np.array([_beta_cdf(z / g, a_, b_) for g in grid])
            return float(lp * (w_pc * pb).sum() + ln_ * (_W(loc_nc) * pb).sum())

        p_nz = cfg.near_zero_frac
        loc_nc = 0.0
        for _ in range(100):
            loc_nc = _solve_monotone(lambda t: used(p_nz, t), used_target, lo_loc, hi_loc,
                                    "mean non-production CPU request (target_used_cpu)")
            mo = ratio_mo(p_nz, loc_nc)
            if not 0.005 < mo < 0.995:
                raise ValueError(
                    f"calibration infeasible: active tasks' CPU use/request mean would be {mo:.3f}; "
                    "adjust cpu_use_ratio_mean, near_zero_frac or the used/requested CPU targets"
                )
            q = q_active_below(mo, loc_nc)
            if q >= cfg.near_zero_frac:
                p_new = 0.0
            else:
                p_new = (cfg.near_zero_frac - q) / (1 - q)
            if abs(p_new - p_nz) < 1e-10:
                p_nz = p_new
                break
            p_nz = p_new
        loc_nc = _solve_monotone(lambda t: used(p_nz, t), used_target, lo_loc, hi_loc,
                                "mean non-production CPU request (target_used_cpu)")
        mo = ratio_mo(p_nz, loc_nc)
        q = q_active_below(mo, loc_nc)
        nz_share = p_nz + (1 - p_nz) * q
        if abs(nz_share - cfg.near_zero_frac) > 0.01:
            log.warning("near-zero share of long tasks reaches %.3f, not %.3f (small requests alone exceed it)",
                        nz_share, cfg.near_zero_frac)

        self._w_cdf = {
            (is_prod, int(n)): (np.cumsum(_grid_weights(grid, lc + sh, spread)),
                                np.cumsum(_grid_weights(grid, lm + sh, spread)))
            for is_prod, lc, lm in ((True, loc_pc, loc_pm), (False, loc_nc, loc_nm))
            for n, sh in zip(self._size_vals, shifts)
        }
        self._p_nz = p_nz
        self._m_o = mo
        w_nc = _W(loc_nc)
        A_n = float((w_nc * minz / grid).sum())
        share_20 = 1.0 - self._anchor_cdf(1200.0)
        cal = Calibration(
            cell_cpu=cell_cpu,
            cell_mem=cell_mem,
            mean_duration_s=mean_d,
            task_arrival_rate_per_s=lam,
            job_arrival_rate_per_s=lam / self._mean_tasks_per_job,
            mean_tasks_per_job=self._mean_tasks_per_job,
            arrivals_per_node_min=lam * 60.0 / n_full,
            production_arrival_share=self._p_prod,
            production_running_share=s_p,
            share_over_20min=share_20,
            request_loc_prod_cpu=loc_pc,
            request_loc_prod_mem=loc_pm,
            request_loc_nonprod_cpu=loc_nc,
            request_loc_nonprod_mem=loc_nm,
            mean_cpu_request_prod=mean_req(loc_pc),
            mean_mem_request_prod=mean_req(loc_pm),
            mean_cpu_request_nonprod=mean_req(loc_nc),
            mean_mem_request_nonprod=mean_req(loc_nm),
            active_cpu_ratio_mean=mo,
            near_zero_prob=p_nz,
            expected_tasks_per_node=cfg.target_tasks_per_node,
            expected_used_cpu=used(p_nz, loc_nc) * running / cell_cpu,
            expected_used_mem=cfg.mem_use_ratio_mean * running
            * (s_p * mean_req(loc_pm) + s_n * mean_req(loc_nm)) / cell_mem,
            expected_prod_requested_cpu=running * s_p * mean_req(loc_pc) / cell_cpu,
            expected_prod_requested_mem=running * s_p * mean_req(loc_pm) / cell_mem,
            expected_cpu_use_ratio=p_nz * e_u * (s_p * A_p + s_n * A_n) + (1 - p_nz) * mo,
            expected_near_zero_share_long=nz_share,
        )
        log.info(
            "workload calibrated: %.4f tasks/s (%.4f per node·min), mean duration %.0f s, production "
            "%.1f%% of arrivals / %.1f%% of running, m_o=%.3f, p_nz=%.3f",
            cal.task_arrival_rate_per_s, cal.arrivals_per_node_min, mean_d,
            100 * self._p_prod, 100 * s_p, mo, p_nz,
        )
        return cal

    def _anchor_cdf(self, t: float) -> float:
        a = self.config.duration_anchors_s
        if t <= a[0][0]:
            return 0.0
        for (t0, p0), (t1, p1) in zip(a, a[1:]):
            if t <= t1:
                return p0 + (p1 - p0) * math.log(t / t0) / math.log(t1 / t0)
        return 1.0

    # ------------------------------------------------------------- sampling
    def _draw_requests(self, rng: np.random.Generator, prod: np.ndarray,
                       sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CPU and memory requests on the grid, Gaussian-copula correlated, per band group and job size."""
        n = prod.shape[0]
        rho = self.config.request_cpu_mem_correlation
        z1 = rng.standard_normal(n)
        z2 = rho * z1 + math.sqrt(1 - rho * rho) * rng.standard_normal(n)
        u1 = _norm_cdf(z1).astype(float)
        u2 = _norm_cdf(z2).astype(float)
        cpu = np.empty(n)
        mem = np.empty(n)
        last = len(self._grid) - 1
        for is_prod, size in set(zip(prod.tolist(), sizes.tolist())):
            sel = (prod == is_prod) & (sizes == size)
            cc, mc = self._w_cdf[(is_prod, size)]
            cpu[sel] = self._grid[np.minimum(np.searchsorted(cc, u1[sel], side="right"), last)]
            mem[sel] = self._grid[np.minimum(np.searchsorted(mc, u2[sel], side="right"), last)]
        return cpu, mem

    def _draw_usage_params(self, rng: np.random.Generator, cpu_req: np.ndarray, mem_req: np.ndarray):
        """Per-task CPU process parameters and memory use (vectorised)."""
        cfg = self.config
        n = cpu_req.shape[0]
        nz = rng.random(n) < self._p_nz
        kappa = cfg.cpu_use_ratio_concentration
        active = rng.beta(self._m_o * kappa, (1 - self._m_o) * kappa, n) * cpu_req
        near = rng.beta(1.0, 2.0, n) * np.minimum(cpu_req, cfg.near_zero_cpu)
        mu = np.maximum(np.where(nz, near, active), _MU_MIN)
        s = cfg.sigma_scatter
        scatter = np.exp(rng.normal(-0.5 * s * s, s, n)) if s > 0 else np.ones(n)
        sig_i = (cfg.inst_sigma_slope * mu + cfg.inst_sigma_intercept) * scatter
        sig_a = (cfg.avg_sigma_slope * mu + cfg.avg_sigma_intercept) * scatter
        a2 = 1.0 + (sig_a / mu) ** 2
        i2 = 1.0 + (sig_i / mu) ** 2
        ns = rng.random(n) < cfg.nonstationary_frac
        vL = np.where(ns, a2 ** cfg.nonstationary_variance_share - 1.0, 0.0)
        vR = a2 / (1.0 + vL) - 1.0
        vW = i2 / a2 - 1.0
        km = cfg.mem_use_ratio_concentration
        mem_used = rng.beta(cfg.mem_use_ratio_mean * km, (1 - cfg.mem_use_ratio_mean) * km, n) * mem_req
        return mu, vL, vR, vW, ns, mem_used

    def _draw_constraints(self, rng: np.random.Generator) -> tuple[Constraint, ...]:
        cfg = self.config
        if rng.random() >= cfg.constrained_job_frac:
            return ()
        k = min(cfg.max_constraints, int(rng.geometric(cfg.extra_constraint_geom_p)), len(self._common_attrs))
        share = self._attr_share
        best: tuple[Constraint, ...] = ()
        for attempt in range(20):
            kk = k if attempt < 10 else 1
            attrs = self._common_attrs[np.argsort(rng.random(self._common_attrs.size))[:kk]]
            cons = []
            match = 1.0
            for j in sorted(attrs.tolist()):
                p = float(cfg.attribute_probs[j])
                if rng.random() < p:
                    cons.append(Constraint(self.attribute_names[j], ConstraintOp.EQUAL, 1))
                    match *= share[j]
                else:
                    cons.append(Constraint(self.attribute_names[j], ConstraintOp.NOT_EQUAL, 1))
                    match *= 1.0 - share[j]
            best = tuple(cons)
            if match >= cfg.min_match_fraction:
                return best
        return best

    def _restrictive(self, rng: np.random.Generator, base: tuple[Constraint, ...]) -> tuple[Constraint, ...]:
        """Add EQUAL on a rare attribute; keep only the job constraints some of those nodes satisfy."""
        j = int(self._rare_attrs[int(rng.integers(self._rare_attrs.size))])
        name = self.attribute_names[j]
        has = self._node_attr_matrix
        cand = has[:, j].copy()
        kept = [Constraint(name, ConstraintOp.EQUAL, 1)]
        for c in base:
            if c.attribute == name:
                continue
            col = has[:, self._attr_index[c.attribute]]
            ok = cand & (col if c.op == ConstraintOp.EQUAL else ~col)
            if ok.any():
                cand = ok
                kept.append(c)
        return tuple(sorted(kept, key=lambda c: c.attribute))

    def _copies(self, n: int) -> np.ndarray:
        """How many copies of each of n jobs (MASB duplication: floor(m), +1 with prob frac(m))."""
        m = self.config.workload_multiplier
        whole = int(math.floor(m))
        frac = m - whole
        extra = self._rng_clone.random(n) < frac if frac > 0 else np.zeros(n, dtype=bool)
        return whole + extra.astype(np.int64)

    def _job_meta(self, rng: np.random.Generator, prod: np.ndarray):
        """User index, priority and scheduling class per job.

        [RECON] class rule (no source): free → 0, middle → 0 or 1, production → 2 or 3.
        """
        cfg = self.config
        n = prod.shape[0]
        user = np.searchsorted(self._user_cdf_a, rng.random(n), side="right")
        free = ~prod & (rng.random(n) < cfg.free_share_of_nonproduction)
        u = rng.random(n)
        prio = np.empty(n, dtype=np.int64)
        for band, sel in ((Band.PRODUCTION, prod), (Band.FREE, free), (Band.MIDDLE, ~prod & ~free)):
            vals = np.array(self._prio_vals[band])
            idx = np.minimum(np.searchsorted(self._prio_cdf_a[band], u[sel], side="right"), vals.size - 1)
            prio[sel] = vals[idx]
        coin = rng.random(n) < 0.5
        sclass = np.where(prod, 2 + coin, np.where(free, 0, coin.astype(np.int64)))
        return np.minimum(user, cfg.users - 1), prio, sclass

    # ------------------------------------------------------------- state
    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        new = max(need, 2 * self._cap, 1024)

        def ext(a: np.ndarray) -> np.ndarray:
            b = np.zeros(new, dtype=a.dtype)
            b[: a.shape[0]] = a
            return b

        self._mu, self._vL, self._vR, self._vW = ext(self._mu), ext(self._vL), ext(self._vR), ext(self._vW)
        self._ns, self._L, self._regime_end = ext(self._ns), ext(self._L), ext(self._regime_end)
        self._mem, self._start, self._alive = ext(self._mem), ext(self._start), ext(self._alive)
        self._ids.extend([None] * (new - self._cap))
        self._reason.extend([None] * (new - self._cap))
        self._free.extend(range(new - 1, self._cap - 1, -1))  # pop() hands out the lowest slot first
        self._cap = new

    def _add_tasks(self, start_us: np.ndarray, end_us: np.ndarray, params, ids: list, reasons: list) -> np.ndarray:
        """Put tasks into free slots (they count as running only once their AddTask is emitted)."""
        n = len(ids)
        if len(self._free) < n:
            self._grow(self._n_live_slots + n)
        free = self._free
        slots = free[len(free) - n:][::-1]
        del free[len(free) - n:]
        sl = np.array(slots, dtype=np.int64)
        mu, vL, vR, vW, ns, mem_used = params
        self._mu[sl], self._vL[sl], self._vR[sl], self._vW[sl] = mu, vL, vR, vW
        self._ns[sl], self._mem[sl] = ns, mem_used
        self._L[sl] = 1.0
        self._regime_end[sl] = start_us  # a non-stationary task draws its first regime at its first record
        self._start[sl] = start_us
        self._alive[sl] = True
        ends = self._ends
        held = 0
        for s_, tid, r, e in zip(slots, ids, reasons, end_us.tolist()):
            self._ids[s_] = tid
            self._reason[s_] = r
            heapq.heappush(ends, (e, s_))
            held += len(tid)
        self._held_ids += held
        self._n_live_slots += n
        return sl

    def _count_live(self, n: int) -> None:
        self.live_tasks += n
        if self.live_tasks > self.max_live_tasks:
            self.max_live_tasks = self.live_tasks

    def state_size(self) -> int:
        """Entries held: occupied slots + end-heap entries + task ids.

        It is O(running tasks + the prefetched block of arrivals) and does not
        grow with elapsed time; the streaming test checks exactly that.
        """
        return self._n_live_slots + len(self._ends) + self._held_ids

    @property
    def prefetched_tasks(self) -> int:
        """Task ids of drawn but not yet arrived jobs (at most one block of ``_JOB_BLOCK`` jobs)."""
        return self._held_ids - self.live_tasks

    @property
    def slot_capacity(self) -> int:
        """Allocated per-task array length (≤ 2 × the peak of live slots, or 1024)."""
        return self._cap

    # ------------------------------------------------------------- streaming
    def __iter__(self) -> Iterator[WorkloadEvent]:
        if self._started:
            raise RuntimeError("a WorkloadGenerator can be iterated only once; make a new one with the same config")
        self._started = True
        return self._run()

    def _run(self) -> Iterator[WorkloadEvent]:
        cfg = self.config
        t0 = cfg.start_us
        t_end = t0 + int(round(cfg.duration_s * _US))
        P = self._period_us

        # 1. the cell: all machines, then their attributes (the trace reader's order)
        for nd in self.nodes:
            yield AddNode(t0, nd.node_id, nd.cpu, nd.mem, nd.platform)
        for nd in self.nodes:
            if nd.attributes:
                yield AddNodeAttributes(t0, nd.node_id, tuple((a, 1) for a in nd.attributes))
        self.events_emitted += len(self.nodes) + sum(1 for nd in self.nodes if nd.attributes)
        # 2. the warm start
        yield from self._warm_start(t0)
        # 3. the event loop
        self._job_gap_us = _US / self.calibration.job_arrival_rate_per_s
        self._arrival_f = float(t0)
        self._refill_block()
        next_tick = t0 + P
        churn: list[tuple[int, int, int]] = []  # (time, kind 0=down 1=up, node index)
        if cfg.churn:
            rate = -math.log(1 - cfg.churn_down_frac_29d) / (29 * 86400 * _US)
            if rate > 0:
                for i, t in enumerate(self._rng_churn.exponential(1 / rate, len(self.nodes)).tolist()):
                    heapq.heappush(churn, (t0 + int(t) + 1, 0, i))
        while True:
            t_arr = self._block[0][self._block_pos]
            t_rem = self._ends[0][0] if self._ends else t_end + 1
            t_churn = churn[0][0] if churn else t_end + 1
            t = min(t_arr, t_rem, t_churn, next_tick)
            if t > t_end:
                break
            while churn and churn[0][0] == t:
                yield from self._churn_event(churn, heapq.heappop(churn))
            while self._ends and self._ends[0][0] == t:
                self._ends_time, slot = heapq.heappop(self._ends)
                yield from self._remove(slot)
            if t_arr == t:
                yield from self._emit_job(t)
            if next_tick == t:
                yield from self._tick(t)
                next_tick += P

    def _churn_event(self, heap, item) -> Iterator[WorkloadEvent]:
        t, kind, i = item
        nd = self.nodes[i]
        rng = self._rng_churn
        if kind == 0:
            self.events_emitted += 1
            yield RemoveNode(t, nd.node_id)
            heapq.heappush(heap, (t + 1 + int(rng.exponential(self.config.churn_downtime_mean_s * _US)), 1, i))
        else:
            self.events_emitted += 1
            yield AddNode(t, nd.node_id, nd.cpu, nd.mem, nd.platform)
            if nd.attributes:
                self.events_emitted += 1
                yield AddNodeAttributes(t, nd.node_id, tuple((a, 1) for a in nd.attributes))
            rate = -math.log(1 - self.config.churn_down_frac_29d) / (29 * 86400 * _US)
            heapq.heappush(heap, (t + 1 + int(rng.exponential(1 / rate)), 0, i))

    def _warm_start(self, t0: int) -> Iterator[WorkloadEvent]:
        """Tasks running at t0, drawn from the M/G/∞ steady state (length-biased durations, uniform ages).

        Each pre-existing task is emitted as a one-task job.
        """
        cfg = self.config
        rng = self._rng_warm
        n = int(rng.poisson(cfg.target_tasks_per_node * len(self._full_nodes)))
        if n == 0:
            return
        seg = np.minimum(np.searchsorted(np.cumsum(self._seg_w_warm), rng.random(n), side="right"),
                         len(self._seg_mass) - 1)
        prod = rng.random(n) < self._seg_pp[seg]
        # length-biased log-uniform on [lo, hi] is uniform on [lo, hi]
        dur_s = self._seg_lo[seg] + rng.random(n) * (self._seg_hi[seg] - self._seg_lo[seg])
        age_s = rng.random(n) * dur_s
        start = t0 - np.floor(age_s * _US).astype(np.int64)
        end = np.maximum(start + np.ceil(dur_s * _US).astype(np.int64), t0 + 1)
        # the size of the job each task came from (size-biased), which sets its request level
        jsize = self._size_vals[np.minimum(np.searchsorted(self._size_ptask_cdf, rng.random(n), side="right"),
                                           self._size_vals.size - 1)]
        cpu, mem = self._draw_requests(rng, prod, jsize)
        user, prio, sclass = self._job_meta(rng, prod)
        restrictive = rng.random(n) < cfg.restrictive_prob
        reason_idx = np.minimum(np.searchsorted(self._reason_cdf_a, rng.random(n), side="right"),
                                len(self._reasons) - 1)
        copies = self._copies(n).tolist()
        params = self._draw_usage_params(self._rng_task, cpu, mem)
        events: list[WorkloadEvent] = []
        ids: list[tuple[tuple[int, int], ...]] = []
        cpu_l, mem_l, user_l = cpu.tolist(), mem.tolist(), user.tolist()
        prio_l, sclass_l = prio.tolist(), sclass.tolist()
        for i in range(n):
            cons = self._draw_constraints(rng)
            if restrictive[i]:
                cons = self._restrictive(rng, cons)
            jids = tuple((self._next_job_id + c, 0) for c in range(copies[i]))
            self._next_job_id += copies[i]
            ids.append(jids)
            u = f"user{user_l[i]:04d}"
            for jid, _ in jids:
                events.append(AddTask(t0, jid, 0, u, prio_l[i], sclass_l[i], cpu_l[i], mem_l[i], 0.0, cons, False))
        sl = self._add_tasks(start, end, params, ids, [self._reasons[k] for k in reason_idx.tolist()])
        self._count_live(len(events))
        self.events_emitted += len(events)
        yield from events
        # the record of the last period, so usage is known from t0 on
        self._update_regimes(t0, sl)
        yield from self._records(t0, sl)

    def _refill_block(self) -> None:
        """Draw the next ``_JOB_BLOCK`` jobs at once (numpy per block, not per job) and slot their tasks.

        The tasks wait in their slots, invisible to usage ticks (start in the
        future), until their job's AddTask events are emitted.
        """
        cfg = self.config
        rng = self._rng_arr
        B = _JOB_BLOCK
        times_f = self._arrival_f + np.cumsum(rng.exponential(self._job_gap_us, B))
        self._arrival_f = float(times_f[-1])
        times = np.floor(times_f).astype(np.int64)
        single = rng.random(B) < cfg.single_task_job_frac
        tail = self._job_vals[np.minimum(np.searchsorted(self._job_cdf_a, rng.random(B), side="right"),
                                         self._job_vals.size - 1)]
        sizes = np.where(single, 1, tail)
        prod = rng.random(B) < self._p_prod
        user, prio, sclass = self._job_meta(rng, prod)
        cpu, mem = self._draw_requests(rng, prod, sizes)
        diff = (sizes > 1) & (rng.random(B) < cfg.different_machines_prob)
        copies = self._copies(B)
        cons = [self._draw_constraints(rng) for _ in range(B)]
        # per task
        n = int(sizes.sum())
        job_of = np.repeat(np.arange(B), sizes)
        tprod = prod[job_of]
        u = rng.random(n)
        seg = np.where(tprod, np.searchsorted(np.cumsum(self._seg_w_prod), u, side="right"),
                       np.searchsorted(np.cumsum(self._seg_w_np), u, side="right"))
        seg = np.minimum(seg, len(self._seg_mass) - 1)
        lo, hi = self._seg_lo[seg], self._seg_hi[seg]
        dur_us = np.ceil(lo * (hi / lo) ** rng.random(n) * _US).astype(np.int64)
        tstart = times[job_of]
        restrictive = np.flatnonzero(rng.random(n) < cfg.restrictive_prob)
        task_cons = {int(i): self._restrictive(rng, cons[job_of[i]]) for i in restrictive}
        reason_idx = np.minimum(np.searchsorted(self._reason_cdf_a, rng.random(n), side="right"),
                                len(self._reasons) - 1)
        first_jid = []
        ids = []
        copies_l, sizes_l = copies.tolist(), sizes.tolist()
        for b in range(B):
            j0 = self._next_job_id
            self._next_job_id += copies_l[b]
            first_jid.append(j0)
            for k in range(sizes_l[b]):
                ids.append(tuple((j0 + c, k) for c in range(copies_l[b])))
        params = self._draw_usage_params(self._rng_task, cpu[job_of], mem[job_of])
        self._add_tasks(tstart, tstart + dur_us, params, ids, [self._reasons[k] for k in reason_idx.tolist()])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
        self._block = [times.tolist(), sizes_l, copies_l, first_jid, user.tolist(), prio.tolist(), sclass.tolist(),
                       cpu.tolist(), mem.tolist(), diff.tolist(), cons, offsets, task_cons]
        self._block_pos = 0

    def _emit_job(self, t: int) -> Iterator[WorkloadEvent]:
        (times, sizes, copies, first_jid, user, prio, sclass, cpu, mem, diff, cons, offsets,
         task_cons) = self._block
        b = self._block_pos
        n, j0, off = sizes[b], first_jid[b], offsets[b]
        u, p, sc, c, m, d, jc = f"user{user[b]:04d}", prio[b], sclass[b], cpu[b], mem[b], diff[b], cons[b]
        for jid in range(j0, j0 + copies[b]):
            for k in range(n):
                yield AddTask(t, jid, k, u, p, sc, c, m, 0.0, task_cons.get(off + k, jc), d)
        self._count_live(n * copies[b])
        self.events_emitted += n * copies[b]
        self._block_pos += 1
        if self._block_pos == len(times):
            self._refill_block()

    def _remove(self, slot: int) -> Iterator[WorkloadEvent]:
        """End a task (and its clones).

        No partial usage record is emitted: a record is known only when its
        window closes, i.e. with the removal itself, when it no longer helps a
        scheduler (the trace reader drops such records for the same reason).
        """
        t = self._ends_time
        reason = self._reason[slot]
        ids = self._ids[slot]
        for jid, k in ids:
            yield RemoveTask(t, jid, k, reason)
        self.events_emitted += len(ids)
        self.live_tasks -= len(ids)
        self._held_ids -= len(ids)
        self._alive[slot] = False
        self._ids[slot] = None
        self._reason[slot] = None
        self._free.append(slot)
        self._n_live_slots -= 1

    def _sample(self, rng: np.random.Generator, sl: np.ndarray):
        """5-min mean, one 1-s sample, approximate max CPU, and memory for the slots."""
        m = np.minimum(self._mu[sl] * self._L[sl] * _gamma1(rng, self._vR[sl]), 1.0)
        vW = self._vW[sl]
        x = np.minimum(m * _gamma1(rng, vW), 1.0)
        # max of ~300 one-second samples, approximated as 3 σ above the record mean
        mx = np.minimum(np.maximum(x, m * (1.0 + 3.0 * np.sqrt(vW))), 1.0)
        noise = self.config.mem_usage_noise
        mem = self._mem[sl]
        if noise > 0:
            mem = np.maximum(mem * (1.0 + noise * rng.standard_normal(sl.shape[0])), 0.0)
        return m, x, mx, mem

    def _tick(self, t: int) -> Iterator[WorkloadEvent]:
        """One usage record per running task for the period ending at t (tasks that started at t excluded)."""
        sl = np.flatnonzero(self._alive[: self._cap] & (self._start[: self._cap] < t))
        if sl.size == 0:
            return
        self._update_regimes(t, sl)
        yield from self._records(t, sl)

    def _update_regimes(self, t: int, sl: np.ndarray) -> None:
        """New regime level for non-stationary tasks whose regime has run out."""
        due = self._ns[sl] & (self._regime_end[sl] <= t)
        if due.any():
            ch = sl[due]
            rng = self._rng_usage
            self._L[ch] = _gamma1(rng, self._vL[ch])
            self._regime_end[ch] = t + rng.exponential(self.config.regime_mean_s * _US, ch.size)

    def _records(self, t: int, sl: np.ndarray) -> Iterator[WorkloadEvent]:
        if sl.size == 0:
            return
        rng = self._rng_usage
        m, x, mx, mem = self._sample(rng, sl)
        ws = np.maximum(self._start[sl], t - self._period_us)
        # records in window-start order (stable): the GCD file order, so a trace round trip is exact
        order = np.argsort(ws, kind="stable")
        sl, m, x, mx, mem, ws = sl[order], m[order], x[order], mx[order], mem[order], ws[order].tolist()
        ids = self._ids
        cls = UpdateTaskUsedResources
        count = 0
        for s, mi, xi, mxi, memi, wsi in zip(sl.tolist(), m.tolist(), x.tolist(), mx.tolist(), mem.tolist(), ws):
            for jid, k in ids[s]:
                yield cls(t, jid, k, None, wsi, t, mi, memi, None, None, mxi, xi)
                count += 1
        self.events_emitted += count


def _gamma1(rng: np.random.Generator, v: np.ndarray) -> np.ndarray:
    """Mean-one Gamma draws with variance v (v ≤ 1e-12 gives exactly 1)."""
    v = np.asarray(v, dtype=float)
    out = np.ones(v.shape)
    pos = v > 1e-12
    if pos.any():
        vp = v[pos]
        out[pos] = rng.gamma(1.0 / vp, vp)
    return out


def generate(config: GeneratorConfig | None = None) -> Iterator[WorkloadEvent]:
    """The event stream of ``WorkloadGenerator(config)``."""
    return iter(WorkloadGenerator(config))
