"""Unit tests for the synthetic GCD-shaped generator (DESIGN §10.2, digest §E.3–E.12).

The calibration tests share one generated cell: 2,000 nodes over 6 simulated
hours, consumed once (about 1.7 M events, ~15 s on a 2-core box) and sampled
hourly, not materialised.  Each assertion states its tolerance and why.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from cellbed.workload.events import (
    AddNode,
    AddNodeAttributes,
    AddTask,
    Band,
    ConstraintOp,
    EndReason,
    RemoveNode,
    RemoveTask,
    UpdateTaskUsedResources,
    constraints_match,
)
from cellbed.workload.generator import GeneratorConfig, WorkloadGenerator, generate
from cellbed.workload.genmath import beta_cdf

HOUR_US = 3600 * 1_000_000
NODES = 2000
HOURS = 6


class CellSample:
    """One pass over the stream, keeping only what the calibration tests need."""

    def __init__(self, gen: WorkloadGenerator, hours: int) -> None:
        self.gen = gen
        cfg = gen.config
        t0 = cfg.start_us
        self.t0 = t0
        self.t_end = t0 + hours * HOUR_US
        self.cpu_cap = sum(n.cpu for n in gen.nodes)
        self.mem_cap = sum(n.mem for n in gen.nodes)
        live: dict[tuple[int, int], list] = {}  # key -> [is_prod, cpu_req, mem_req, last cpu_rate, last mem]
        self.series: dict[tuple[int, int], list[tuple[float, float]]] = {}  # warm tasks: (sampled, cpu_rate)
        self.snapshots: list[tuple[float, float, float, float, float]] = []
        self.arrivals: list[tuple[tuple[int, int], int]] = []
        self.removed_at: dict[tuple[int, int], int] = {}
        self.adds = 0
        self.constrained = 0
        self.restricted: list[AddTask] = []
        self.warm = 0
        self.prod_arrivals = 0
        self.cpu_requests: list[float] = []
        self.mem_requests: list[float] = []
        self.node_attrs: dict[int, dict] = {}
        self.first_removal_after_t0: int | None = None
        self.ordered = True
        rare = None
        last_t = t0
        next_snap = t0 + HOUR_US
        for ev in gen:
            t = ev.time_us
            if t < last_t:
                self.ordered = False
            last_t = t
            while t >= next_snap:
                self._snapshot(live)
                next_snap += HOUR_US
            kind = type(ev)
            if kind is UpdateTaskUsedResources:
                key = (ev.job_id, ev.task_index)
                v = live[key]
                v[3], v[4] = ev.cpu_rate, ev.canonical_memory
                s = self.series.get(key)
                if s is not None and t > t0:
                    s.append((ev.sampled_cpu, ev.cpu_rate))
            elif kind is AddTask:
                key = (ev.job_id, ev.task_index)
                prod = ev.band == Band.PRODUCTION
                live[key] = [prod, ev.cpu_request, ev.mem_request, None, None]
                self.adds += 1
                self.constrained += bool(ev.constraints)
                if rare is None:
                    n = len(self.node_attrs)
                    share = Counter(a for attrs in self.node_attrs.values() for a in attrs)
                    rare = {a for a, c in share.items() if c / n < 0.01}
                if any(c.op == ConstraintOp.EQUAL and c.attribute in rare for c in ev.constraints):
                    self.restricted.append(ev)
                self.cpu_requests.append(ev.cpu_request)
                self.mem_requests.append(ev.mem_request)
                if t == t0:
                    self.warm += 1
                    self.series[key] = []
                else:
                    self.arrivals.append((key, t))
                    self.prod_arrivals += prod
            elif kind is RemoveTask:
                key = (ev.job_id, ev.task_index)
                del live[key]
                self.series.pop(key, None)
                self.removed_at[key] = t
                if self.first_removal_after_t0 is None:
                    self.first_removal_after_t0 = t
            elif kind is AddNodeAttributes:
                self.node_attrs[ev.node_id] = ev.as_dict()
            elif kind is AddNode:
                self.node_attrs.setdefault(ev.node_id, {})
        self._snapshot(live)  # at t_end
        self.long_series = {k: np.array(v, dtype=float) for k, v in self.series.items() if len(v) >= 12 * hours}

    def _snapshot(self, live) -> None:
        vals = live.values()
        n = len(self.gen.nodes)
        used_cpu = sum(v[3] for v in vals if v[3] is not None)
        used_mem = sum(v[4] for v in vals if v[4] is not None)
        prod_cpu = sum(v[1] for v in vals if v[0])
        prod_mem = sum(v[2] for v in vals if v[0])
        self.snapshots.append((len(live) / n, used_cpu / self.cpu_cap, used_mem / self.mem_cap,
                               prod_cpu / self.cpu_cap, prod_mem / self.mem_cap))


@pytest.fixture(scope="module")
def cell() -> CellSample:
    gen = WorkloadGenerator(GeneratorConfig(nodes=NODES, duration_s=HOURS * 3600, seed=2011))
    return CellSample(gen, HOURS)


# ----------------------------------------------------------------------------- calibration (acceptance 1)


def test_stream_is_time_ordered_and_hourly_sampled(cell):
    assert cell.ordered
    assert len(cell.snapshots) == HOURS + 1  # 1 h .. 6 h, plus the end


def test_running_tasks_per_node_is_about_11(cell):
    per_node = np.array([s[0] for s in cell.snapshots])
    # the running count is ~Poisson(22,000) (σ ≈ 0.7%) plus job-size clustering of
    # arrivals; ±5% on every hourly snapshot is > 4σ
    assert np.all(np.abs(per_node - 11.0) < 0.55), per_node


def test_used_cpu_and_memory_fall_in_the_gcd_bands(cell):
    cpu = np.array([s[1] for s in cell.snapshots])
    mem = np.array([s[2] for s in cell.snapshots])
    # digest §E.11: used CPU 40–50%, used memory 60–70% of capacity, on every snapshot
    assert np.all((cpu > 0.40) & (cpu < 0.50)), cpu
    assert np.all((mem > 0.60) & (mem < 0.70)), mem
    # and centred on the calibration targets (0.45 / 0.65).  Across 10 seeds the 6-h means had
    # σ ≈ 0.007 (CPU) and 0.01 (memory) and sat ~0.005 low (tasks younger than one 5-min
    # record have no usage yet), so ±0.025 is ≥ 2.5σ
    assert abs(cpu.mean() - 0.45) < 0.025
    assert abs(mem.mean() - 0.65) < 0.025


def test_production_reservations_match_the_interpretation(cell):
    # interpretation (generator docstring): Σ production *requests* of running tasks /
    # Σ cell capacity, cell-wide and placement-independent: ≈ 85% CPU, ≈ 70% memory.
    # ~11.6k long-lived production tasks with heavy-tailed, job-clustered requests: across
    # 16 seeds the hourly values had σ ≈ 0.016 (and hours are strongly correlated, so the 6-h
    # mean is no tighter); ±0.05 on every snapshot is ~3σ
    cpu = np.array([s[3] for s in cell.snapshots])
    mem = np.array([s[4] for s in cell.snapshots])
    assert np.all(np.abs(cpu - 0.85) < 0.05), cpu
    assert np.all(np.abs(mem - 0.70) < 0.05), mem


def test_share_of_tasks_running_over_20_minutes(cell):
    # arrivals whose fate is known at the end of the window (arrived ≥ 20 min before it)
    cutoff = cell.t_end - 20 * 60 * 1_000_000
    known = [(k, t) for k, t in cell.arrivals if t < cutoff]
    over = [cell.removed_at.get(k, cell.t_end) - t > 20 * 60 * 1_000_000 for k, t in known]
    share = float(np.mean(over))
    # digest §E.5: 20–40% run over 20 min; the anchored CDF puts it at 30%; ~33k arrivals
    # in ~6k jobs give σ ≈ 1%, so ±0.04 around 0.30 is ~4σ and well inside 20–40%
    assert 0.20 < share < 0.40
    assert abs(share - 0.30) < 0.04


def test_about_half_the_tasks_are_constrained(cell):
    share = cell.constrained / cell.adds
    # digest §E.9 / [001]: ~50%; constraints are per job, so clustering inflates the
    # binomial σ to ~1.2% here; ±0.03 is 2.5σ
    assert abs(share - 0.5) < 0.03, share


def test_a_few_tasks_in_10k_are_restricted_to_very_few_nodes(cell):
    per_10k = 1e4 * len(cell.restricted) / cell.adds
    # digest §E.9 / [000]: 10–15 per 10k (default 12.5); ~57k tasks give ~70 such
    # tasks, Poisson σ ≈ 1.5 per 10k, so [8, 17] is 3σ either side
    assert 8 < per_10k < 17, per_10k
    n = len(cell.node_attrs)
    for ev in cell.restricted[:25]:
        matching = sum(constraints_match(ev.constraints, attrs) for attrs in cell.node_attrs.values())
        assert 1 <= matching < 0.01 * n  # placeable, but on < 1% of the nodes


def test_instantaneous_cpu_sigma_grows_linearly_with_mu(cell):
    # [003] Fig. 3 / digest §E.8: σ ≈ 0.36·μ + 0.015 over long tasks.  Per-task sample σ
    # from 72 spiky samples is biased low (rare spikes are missed), so estimate it without
    # that bias: bin tasks by the mean 5-min CPU of the first 3 h, and in each bin take the
    # root-mean of the unbiased sample variances of the 1-s samples of the last 3 h
    # (independent halves, so binning does not select on the noise), divided by the
    # log-normal scatter factor exp(s²/2).  The halves capture only part of the hourly regime
    # variance, which biases the intercept slightly low: tolerance slope ±0.06, intercept
    # 0.010–0.020.
    series = list(cell.long_series.values())
    assert len(series) > 10_000
    first = np.array([s[: len(s) // 2, 1].mean() for s in series])
    second_mean = np.array([s[len(s) // 2:, 0].mean() for s in series])
    second_var = np.array([s[len(s) // 2:, 0].var(ddof=1) for s in series])
    edges = np.quantile(first, np.linspace(0, 1, 13))
    b = np.clip(np.searchsorted(edges, first, side="right") - 1, 0, 11)
    scatter = math.exp(cell.gen.config.sigma_scatter ** 2 / 2)
    xs = [second_mean[b == k].mean() for k in range(12)]
    ys = [math.sqrt(second_var[b == k].mean()) / scatter for k in range(12)]
    slope, intercept = np.polyfit(xs, ys, 1)
    assert 0.30 < slope < 0.42, (slope, intercept)
    assert 0.010 < intercept < 0.020, (slope, intercept)


def test_about_47_percent_of_long_tasks_are_near_zero(cell):
    means = np.array([s[:, 1].mean() for s in cell.long_series.values()])
    share = float((means < 0.01).mean())
    # digest §E.8: 46.5%, calibrated over long tasks counted once each, as [003] did.  The tasks
    # alive for all 6 h are a length-biased sample with slightly fewer (large-request)
    # production tasks, which reads ~0.49–0.50 across seeds (binomial σ < 0.5%): allow ±0.05
    assert abs(share - 0.465) < 0.05, share


def _ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.abs(fa - fb).max())


def test_about_30_percent_of_long_tasks_are_non_stationary_at_hourly_scale(cell):
    # [003] §3: two random 1-h windows (12 samples each) differ by a two-sample KS test at
    # 5% for ~30% of long tasks.  Same test here, asymptotic critical value 1.358·√(24/144).
    rng = np.random.default_rng(0)
    crit = 1.358 * math.sqrt(24 / 144)
    rejected = []
    for s in cell.long_series.values():
        x = s[:, 0]
        w1 = int(rng.integers(0, x.size - 24 + 1))
        w2 = int(rng.integers(w1 + 12, x.size - 12 + 1))
        rejected.append(_ks_statistic(x[w1:w1 + 12], x[w2:w2 + 12]) > crit)
    share = float(np.mean(rejected))
    # binomial σ < 0.5% over ~19k tasks; ±0.06 covers the model's dependence on window gaps
    assert abs(share - 0.30) < 0.06, share


def test_requests_lie_on_the_grid_and_most_are_small(cell):
    grid = set(cell.gen.config.request_grid)
    assert set(cell.cpu_requests) <= grid and set(cell.mem_requests) <= grid
    # digest §E.7: "most jobs request less than 5% of the average machine" (0.05 × 0.529).
    # We reach ~73% of arriving tasks (0.71–0.74 over 6 seeds; the [RECON] 90% would need
    # smaller non-production requests than the used-CPU calibration allows); tasks of a job
    # share their request, so clustering makes σ ≈ 2%: test "most" as > 65%
    small = np.mean([c < 0.05 * 0.529 for c in cell.cpu_requests[cell.warm:]])
    assert small > 0.65, small


def test_production_is_about_10_percent_of_arrivals(cell):
    share = cell.prod_arrivals / len(cell.arrivals)
    # digest §E.6 [RECON] 10% by task count; job clustering makes σ ≈ 1.5%, so ±0.05
    assert abs(share - 0.10) < 0.05, share


def test_arrival_rate_matches_the_self_calibration(cell):
    cal = cell.gen.calibration
    expected = cal.task_arrival_rate_per_s * HOURS * 3600
    # jobs arrive as Poisson (~6.5k jobs) with sizes up to 160 tasks: σ of the task count
    # ≈ 4%; ±15% is ~3.5σ
    assert abs(len(cell.arrivals) / expected - 1) < 0.15
    # digest §E.4: ≈ 0.048 arrivals per node·minute follows from 11 tasks/node and the
    # §E.5 duration anchors (24 h anchor tuned for it)
    assert abs(cal.arrivals_per_node_min - 0.048) < 0.002


def test_the_cell_starts_warm(cell):
    # M/G/∞ steady state at t0: Poisson(11 · N) running tasks (σ ≈ 0.7%)
    assert abs(cell.warm / (11 * NODES) - 1) < 0.03
    # and they have ages, so some end within minutes (not all at their full duration)
    assert cell.first_removal_after_t0 - cell.t0 < 60 * 1_000_000


def test_calibration_hits_every_target_in_expectation():
    cal = WorkloadGenerator(GeneratorConfig(nodes=500, duration_s=60)).calibration
    assert cal.expected_tasks_per_node == pytest.approx(11.0)
    assert cal.expected_used_cpu == pytest.approx(0.45, abs=1e-6)
    assert cal.expected_used_mem == pytest.approx(0.65, abs=1e-6)
    assert cal.expected_prod_requested_cpu == pytest.approx(0.85, abs=1e-6)
    assert cal.expected_prod_requested_mem == pytest.approx(0.70, abs=1e-6)
    assert cal.expected_cpu_use_ratio == pytest.approx(0.45, abs=1e-6)
    assert cal.expected_near_zero_share_long == pytest.approx(0.465, abs=1e-6)
    assert cal.share_over_20min == pytest.approx(0.30)
    assert 0.0 < cal.near_zero_prob < 1.0 and 0.0 < cal.active_cpu_ratio_mean < 1.0


# ----------------------------------------------------------------------------- reproducibility (acceptance 2)

SMALL = dict(nodes=150, duration_s=2 * 3600, churn=True, churn_down_frac_29d=0.9, churn_downtime_mean_s=600,
             workload_multiplier=1.3)


def test_same_seed_gives_the_identical_stream():
    a = list(generate(GeneratorConfig(seed=42, **SMALL)))
    b = list(generate(GeneratorConfig(seed=42, **SMALL)))
    assert len(a) > 10_000
    assert a == b


def test_different_seed_gives_a_different_stream():
    a = list(generate(GeneratorConfig(seed=42, **SMALL)))
    b = list(generate(GeneratorConfig(seed=43, **SMALL)))
    assert a != b
    assert [e for e in a if isinstance(e, AddTask)][:50] != [e for e in b if isinstance(e, AddTask)][:50]


def test_generator_uses_no_global_random_state():
    random.seed(1)
    np.random.seed(1)
    py_state, np_state = random.getstate(), np.random.get_state()[1].copy()
    for _ in generate(GeneratorConfig(nodes=50, duration_s=1800, seed=3)):
        pass
    assert random.getstate() == py_state
    assert np.array_equal(np.random.get_state()[1], np_state)


def test_a_generator_iterates_only_once():
    gen = WorkloadGenerator(GeneratorConfig(nodes=10, duration_s=60))
    list(gen)
    with pytest.raises(RuntimeError, match="only once"):
        iter(gen)


# ----------------------------------------------------------------------------- streaming (acceptance 4)


def test_live_state_is_bounded_by_the_running_tasks():
    # 3 simulated days at 500 nodes, hourly usage records to keep the test quick: ~35k
    # tasks pass through while ~5.5k run at any time.  The generator's own counters
    # (not RSS) must track the running set and not grow with elapsed time.
    gen = WorkloadGenerator(GeneratorConfig(nodes=500, duration_s=3 * 86400, usage_period_s=3600, seed=5))
    live = added = 0
    sizes = []
    next_check = gen.config.start_us + HOUR_US
    for ev in gen:
        while ev.time_us >= next_check:
            assert gen.live_tasks == live  # the counter is the consumer-visible running set
            # slots + end-heap entries + ids, for the running tasks and one prefetched block of
            # 64 jobs (≤ 64 × 40 tasks here: the largest job is 8% of 500 nodes), nothing else
            assert gen.state_size() == 3 * (live + gen.prefetched_tasks)
            assert gen.prefetched_tasks <= 64 * 40
            sizes.append(gen.state_size())
            next_check += HOUR_US
        if isinstance(ev, AddTask):
            live += 1
            added += 1
        elif isinstance(ev, RemoveTask):
            live -= 1
    assert len(sizes) >= 71
    assert added > 5 * gen.max_live_tasks  # far more tasks streamed than were ever held
    assert max(sizes) < 1.15 * sizes[0]  # flat: O(running tasks), not O(elapsed time)
    assert gen.slot_capacity <= max(1024, 2 * (gen.max_live_tasks + 64 * 40))  # slots are reused


# ----------------------------------------------------------------------------- scaling knobs, churn


def _count_at(gen: WorkloadGenerator, t_us: int) -> tuple[int, int]:
    live = nodes = 0
    for ev in gen:
        if ev.time_us > t_us:
            break
        if isinstance(ev, AddTask):
            live += 1
        elif isinstance(ev, RemoveTask):
            live -= 1
        elif isinstance(ev, AddNode):
            nodes += 1
    return live, nodes


def test_workload_multiplier_duplicates_tasks_with_identical_usage():
    base = dict(nodes=300, duration_s=1800, seed=9)
    one, n1 = _count_at(WorkloadGenerator(GeneratorConfig(**base)), 600_000_000)
    two, n2 = _count_at(WorkloadGenerator(GeneratorConfig(workload_multiplier=2.0, **base)), 600_000_000)
    assert n1 == n2 == 300
    # the warm cell is exactly doubled: every pre-existing task got one clone
    assert two == 2 * one
    tick = [ev for ev in generate(GeneratorConfig(workload_multiplier=2.0, **base))
            if isinstance(ev, UpdateTaskUsedResources) and ev.time_us == 600_000_000 + 300_000_000]
    assert len(tick) > 1000 and len(tick) % 2 == 0
    # MASB duplicated a task's events: original and clone (the next job id) report the same usage
    for orig, clone in zip(tick[::2], tick[1::2]):
        assert clone.job_id == orig.job_id + 1 and clone.task_index == orig.task_index
        assert (clone.cpu_rate, clone.sampled_cpu, clone.canonical_memory) == (
            orig.cpu_rate, orig.sampled_cpu, orig.canonical_memory)


def test_cell_compaction_removes_nodes_but_keeps_the_workload():
    base = dict(nodes=400, duration_s=600, seed=4)
    full_gen = WorkloadGenerator(GeneratorConfig(**base))
    comp_gen = WorkloadGenerator(GeneratorConfig(compaction=0.25, **base))
    assert len(comp_gen.nodes) == 300
    assert {n.node_id for n in comp_gen.nodes} < {n.node_id for n in full_gen.nodes}
    full, _ = _count_at(full_gen, 600_000_000)
    comp, nodes = _count_at(comp_gen, 600_000_000)
    assert nodes == 300
    # same seed, same workload (calibrated on the full cell): ~14.7 tasks per remaining node
    assert comp == full


def test_node_churn_takes_nodes_down_and_back():
    cfg = GeneratorConfig(nodes=200, duration_s=6 * 3600, seed=8, churn=True, churn_down_frac_29d=0.9,
                          churn_downtime_mean_s=1800, usage_period_s=3600)
    down: dict[int, int] = {}
    removals = returns = 0
    for ev in generate(cfg):
        if isinstance(ev, RemoveNode):
            assert ev.node_id not in down
            down[ev.node_id] = ev.time_us
            removals += 1
        elif isinstance(ev, AddNode) and ev.node_id in down:
            assert ev.time_us > down.pop(ev.node_id)
            returns += 1
    # rate -ln(0.1)/29 d per node: expect 200·6 h·rate ≈ 4 removals; Poisson, so 1..15
    assert 1 <= removals <= 15
    assert returns >= removals - len(down)


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(nodes=0), r"GeneratorConfig\.nodes must be an integer >= 1"),
        (dict(compaction=1.0), r"GeneratorConfig\.compaction must be in \[0, 1\)"),
        (dict(workload_multiplier=0.5), r"GeneratorConfig\.workload_multiplier must be in \[1, 64\]"),
        (dict(target_used_cpu=0.0), r"GeneratorConfig\.target_used_cpu must be in \(0, 2\)"),
        (dict(duration_anchors_s=((60.0, 0.0), (30.0, 1.0))), r"GeneratorConfig\.duration_anchors_s"),
        (dict(production_prob_by_segment=(0.5,)), r"GeneratorConfig\.production_prob_by_segment must be 6 values"),
        (dict(request_grid=(0.5, 0.25)), r"GeneratorConfig\.request_grid"),
        (dict(priority_weights=(1.0,) * 9 + (0.0,) * 3), r"GeneratorConfig\.priority_weights .*PRODUCTION"),
        (dict(avg_sigma_slope=0.5), r"GeneratorConfig\.avg_sigma_slope"),
        (dict(attribute_probs=(0.5,) * 21), r"GeneratorConfig\.attribute_probs .*rare attribute"),
        (dict(near_zero_frac=1.0), r"GeneratorConfig\.near_zero_frac must be in \[0, 1\)"),
        (dict(usage_period_s=-5), r"GeneratorConfig\.usage_period_s must be a finite number > 0"),
    ],
)
def test_invalid_config_names_the_field_and_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GeneratorConfig(**kwargs)


def test_unreachable_targets_fail_at_start_up_naming_the_target():
    with pytest.raises(ValueError, match="calibration infeasible: .*target_prod_requested_cpu"):
        WorkloadGenerator(GeneratorConfig(nodes=100, target_prod_requested_cpu=1.9, request_grid=(0.001, 0.002)))


def test_config_from_plain_data_such_as_toml():
    cfg = GeneratorConfig.from_mapping({
        "nodes": 100,
        "duration_anchors_s": [[1.0, 0.0], [60.0, 0.5], [7200.0, 0.9], [86400.0, 1.0]],
        "production_prob_by_segment": [0.05, 0.3, 0.8],
        "machine_classes": [[0.5, 0.5, 0.9, "B"], {"cpu": 1.0, "mem": 1.0, "share": 0.1, "platform": "C"}],
        "end_reason_weights": {"finish": 0.7, "KILL": 0.3},
    })
    assert cfg.duration_anchors_s[1] == (60.0, 0.5)
    assert cfg.machine_classes[1].platform == "C"
    assert cfg.end_reason_weights == ((EndReason.FINISH, 0.7), (EndReason.KILL, 0.3))
    assert WorkloadGenerator(cfg).calibration.expected_used_cpu == pytest.approx(0.45, abs=1e-6)
    with pytest.raises(ValueError, match=r"GeneratorConfig: unknown key\(s\) nodez; allowed: "):
        GeneratorConfig.from_mapping({"nodez": 5})
    with pytest.raises(ValueError, match="unknown reason 'CRASH'"):
        GeneratorConfig.from_mapping({"end_reason_weights": {"crash": 1.0}})


def test_every_config_field_is_documented_with_a_source_or_recon():
    docs = GeneratorConfig.field_docs()
    assert all(docs.values()), [k for k, v in docs.items() if not v]


# ----------------------------------------------------------------------------- numeric helpers


@pytest.mark.parametrize("x", [0.0, 0.01, 0.3, 0.5, 0.9, 1.0])
def test_beta_cdf_matches_closed_forms(x):
    assert beta_cdf(x, 1.0, 1.0) == pytest.approx(x)  # uniform
    assert beta_cdf(x, 3.0, 1.0) == pytest.approx(x ** 3)  # I_x(a, 1) = x^a
    assert beta_cdf(x, 1.0, 2.5) == pytest.approx(1 - (1 - x) ** 2.5)  # I_x(1, b) = 1 - (1-x)^b
    assert beta_cdf(x, 2.0, 2.0) == pytest.approx(3 * x ** 2 - 2 * x ** 3)
