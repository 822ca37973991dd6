"""The GCD-shaped generator's configuration (every parameter with its unit, default and source) and the cell it describes: machine classes, node specs, and the calibration the generator derives."""
from __future__ import annotations

from cellbed.domain.config import check_keys, field_names
from cellbed.domain.errors import InvalidArgument

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping
from cellbed.workload.events import MAX_PRIORITY, Band, EndReason, band_of


US_PER_S = 1_000_000
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
        self._check_cell()
        self._check_durations()
        self._check_jobs()
        self._check_requests()
        self._check_usage()
        self._check_constraints()
        self._check_ends()

    def _check_cell(self) -> None:
        if not isinstance(self.nodes, int) or self.nodes < 1:
            _bad("nodes", "an integer >= 1", self.nodes)
        _positive(self, "duration_s")
        if not isinstance(self.start_us, int) or self.start_us < 0:
            _bad("start_us", "an integer >= 0", self.start_us)
        if not isinstance(self.seed, int) or self.seed < 0:
            _bad("seed", "an integer >= 0", self.seed)
        if not self.machine_classes:
            _bad("machine_classes", "a non-empty tuple", self.machine_classes)
        for mc in self.machine_classes:
            if not (0 < mc.cpu <= 1 and 0 < mc.mem <= 1 and mc.share >= 0):
                _bad("machine_classes", "classes with cpu, mem in (0, 1] and share >= 0", mc)
        if sum(mc.share for mc in self.machine_classes) <= 0:
            _bad("machine_classes", "classes whose shares sum to > 0", self.machine_classes)
        if not (isinstance(self.workload_multiplier, (int, float)) and 1 <= self.workload_multiplier <= 64):
            _bad("workload_multiplier", "in [1, 64]", self.workload_multiplier)
        _unit(self, "compaction", hi_open=True)
        if round(self.nodes * (1 - self.compaction)) < 1:
            _bad("compaction", "small enough to keep at least one node", self.compaction)
        _positive(self, "target_tasks_per_node")
        for name in ("target_used_cpu", "target_used_mem", "target_prod_requested_cpu", "target_prod_requested_mem"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v < 2):
                _bad(name, "in (0, 2)", v)

    def _check_durations(self) -> None:
        a = self.duration_anchors_s
        if len(a) < 2:
            _bad("duration_anchors_s", "at least two (seconds, cdf) anchors", a)
        ts = [p[0] for p in a]
        ps = [p[1] for p in a]
        if ts[0] <= 0 or any(t1 <= t0 for t0, t1 in zip(ts, ts[1:])):
            _bad("duration_anchors_s", "anchors with strictly increasing times > 0 s", a)
        if ps[0] != 0 or ps[-1] != 1 or any(p1 < p0 for p0, p1 in zip(ps, ps[1:])):
            _bad("duration_anchors_s", "a CDF rising from 0.0 at the first anchor to 1.0 at the last", a)
        if len(self.production_prob_by_segment) != len(a) - 1:
            _bad("production_prob_by_segment", f"{len(a) - 1} values (one per duration segment)",
                self.production_prob_by_segment)
        if any(not 0 <= p <= 1 for p in self.production_prob_by_segment):
            _bad("production_prob_by_segment", "probabilities in [0, 1]", self.production_prob_by_segment)
        seg_mass = [p1 - p0 for p0, p1 in zip(ps, ps[1:])]
        prod = sum(m * p for m, p in zip(seg_mass, self.production_prob_by_segment))
        if not 0 < prod < 1:
            _bad("production_prob_by_segment", "such that the production share of arrivals is in (0, 1)", prod)
        _unit(self, "free_share_of_nonproduction")

    def _check_jobs(self) -> None:
        _unit(self, "single_task_job_frac")
        if not self.tasks_per_job_values or any(not isinstance(v, int) or v < 2 for v in self.tasks_per_job_values):
            _bad("tasks_per_job_values", "a non-empty tuple of integers >= 2", self.tasks_per_job_values)
        if not 0 <= self.tasks_per_job_exponent <= 5:
            _bad("tasks_per_job_exponent", "in [0, 5]", self.tasks_per_job_exponent)
        _unit(self, "max_job_fraction_of_nodes", lo_open=True)
        _unit(self, "different_machines_prob")
        if not isinstance(self.users, int) or self.users < 1:
            _bad("users", "an integer >= 1", self.users)
        if not 0 <= self.user_zipf_exponent <= 5:
            _bad("user_zipf_exponent", "in [0, 5]", self.user_zipf_exponent)
        pw = self.priority_weights
        if len(pw) != MAX_PRIORITY + 1 or any(w < 0 for w in pw):
            _bad("priority_weights", f"{MAX_PRIORITY + 1} non-negative weights", pw)
        for band in Band:
            if sum(w for p, w in enumerate(pw) if band_of(p) == band) <= 0:
                _bad("priority_weights", f"positive total weight in band {band.name}", pw)

    def _check_requests(self) -> None:
        g = self.request_grid
        if len(g) < 2 or any(not 0 < v <= 1 for v in g) or any(v1 <= v0 for v0, v1 in zip(g, g[1:])):
            _bad("request_grid", "at least two strictly increasing values in (0, 1]", g)
        if not 0.05 <= self.request_log_spread <= 5:
            _bad("request_log_spread", "in [0.05, 5]", self.request_log_spread)
        if not 0 <= self.request_job_size_exponent <= 2:
            _bad("request_job_size_exponent", "in [0, 2]", self.request_job_size_exponent)
        if not -0.99 <= self.request_cpu_mem_correlation <= 0.99:
            _bad("request_cpu_mem_correlation", "in [-0.99, 0.99]", self.request_cpu_mem_correlation)

    def _check_usage(self) -> None:
        _unit(self, "cpu_use_ratio_mean", lo_open=True, hi_open=True)
        _positive(self, "cpu_use_ratio_concentration")
        _unit(self, "mem_use_ratio_mean", lo_open=True, hi_open=True)
        _positive(self, "mem_use_ratio_concentration")
        _unit(self, "near_zero_frac", hi_open=True)
        _unit(self, "near_zero_cpu", lo_open=True)
        _positive(self, "long_task_s")
        for name in ("inst_sigma_slope", "inst_sigma_intercept", "avg_sigma_slope", "avg_sigma_intercept"):
            v = getattr(self, name)
            if not 0 <= v <= 5:
                _bad(name, "in [0, 5]", v)
        if self.avg_sigma_slope > self.inst_sigma_slope or self.avg_sigma_intercept > self.inst_sigma_intercept:
            _bad("avg_sigma_slope", "≤ inst_sigma_slope, with avg_sigma_intercept ≤ inst_sigma_intercept "
                "(5-min means cannot vary more than 1-s samples)", (self.avg_sigma_slope, self.avg_sigma_intercept))
        if not 0 <= self.sigma_scatter <= 2:
            _bad("sigma_scatter", "in [0, 2]", self.sigma_scatter)
        _unit(self, "nonstationary_frac")
        _unit(self, "nonstationary_variance_share")
        _positive(self, "regime_mean_s")
        _positive(self, "usage_period_s")
        if self.usage_period_s * US_PER_S != int(self.usage_period_s * US_PER_S):
            _bad("usage_period_s", "a whole number of microseconds", self.usage_period_s)
        if not 0 <= self.mem_usage_noise <= 0.5:
            _bad("mem_usage_noise", "in [0, 0.5]", self.mem_usage_noise)

    def _check_constraints(self) -> None:
        ap = self.attribute_probs
        if not ap or any(not 0 < p <= 1 for p in ap):
            _bad("attribute_probs", "a non-empty tuple of probabilities in (0, 1]", ap)
        _unit(self, "constrained_job_frac")
        _unit(self, "extra_constraint_geom_p", lo_open=True)
        if not isinstance(self.max_constraints, int) or self.max_constraints < 1:
            _bad("max_constraints", "an integer >= 1", self.max_constraints)
        _unit(self, "min_match_fraction")
        _unit(self, "restrictive_prob")
        _unit(self, "restrictive_max_match", lo_open=True)
        if self.constrained_job_frac > 0 and not any(p >= self.restrictive_max_match for p in ap):
            _bad("attribute_probs", "to include attributes at or above restrictive_max_match "
                "(for ordinary constraints)", ap)
        if self.restrictive_prob > 0 and not any(p < self.restrictive_max_match for p in ap):
            _bad("attribute_probs", "to include an attribute below restrictive_max_match "
                "(restrictive_prob > 0 needs a rare attribute)", ap)

    def _check_ends(self) -> None:
        erw = self.end_reason_weights
        if not erw or any(not isinstance(r, EndReason) or w < 0 for r, w in erw) or sum(w for _, w in erw) <= 0:
            _bad("end_reason_weights", "(EndReason, weight >= 0) pairs with positive total", erw)
        _unit(self, "churn_down_frac_29d", hi_open=True)
        _positive(self, "churn_downtime_mean_s")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "GeneratorConfig":
        """Build a config from plain data (e.g. a TOML table); unknown keys raise ValueError naming the key.

        Lists become tuples; ``machine_classes`` entries may be ``[cpu, mem, share, platform]`` or
        tables with those keys; ``end_reason_weights`` may be a table ``{FINISH = 0.6, ...}``.
        """
        try:
            check_keys(data, field_names(cls), "GeneratorConfig")
        except InvalidArgument as e:   # the generator's own errors are ValueErrors
            raise ValueError(str(e)) from None

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


def _bad(name: str, rng: str, value) -> None:
    raise ValueError(f"GeneratorConfig.{name} must be {rng}, got {value!r}")


def _unit(cfg, name: str, lo_open=False, hi_open=False) -> None:
    v = getattr(cfg, name)
    lo_ok = v > 0 if lo_open else v >= 0
    hi_ok = v < 1 if hi_open else v <= 1
    if not (isinstance(v, (int, float)) and lo_ok and hi_ok):
        _bad(name, f"in {'(' if lo_open else '['}0, 1{')' if hi_open else ']'}", v)


def _positive(cfg, name: str) -> None:
    v = getattr(cfg, name)
    if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
        _bad(name, "a finite number > 0", v)
