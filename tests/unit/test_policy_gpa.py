"""Fit tests: deterministic sum and Gaussian Percentile Approximation
(DESIGN §7 "Fit test option", seed digest §B.4)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cellbed.policy.scores import (
    FIT_PARAMS,
    FIT_TESTS,
    Demand,
    GpaParams,
    SumFitParams,
    gpa_fit,
    gpa_projection,
    sum_fit,
    sum_projection,
)

CAP = np.array([1.0, 1.0])  # (cpu, mem), normalised
ENOUGH = 200  # samples


@pytest.mark.parametrize(
    ("rho", "z"),
    [
        (0.10, 1.2816),
        (0.05, 1.6449),
        (0.01, 2.3263),  # Φ⁻¹(0.99)
        (0.001, 3.0902),
    ],
)
def test_z_values(rho, z):
    assert GpaParams(rho=rho).z == pytest.approx(z, abs=1e-4)


# Node: Σμ = 0.5, Σσ² = 0.03; task: μ = 0.1, σ² = 0.01.
# μ' = 0.6, σ' = √0.04 = 0.2.
NODE = Demand(size=[0.6, 0.5], cpu_mean=0.5, cpu_var=0.03, cpu_samples=ENOUGH)
TASK = Demand(size=[0.1, 0.25], cpu_mean=0.1, cpu_var=0.01, cpu_samples=ENOUGH)

HAND = [
    # rho,   cpu cap, fits, arithmetic
    (0.01, 1.0, False, "0.6 + 2.3263·0.2 = 1.0653 > 1.0"),
    (0.01, 1.1, True, "0.6 + 2.3263·0.2 = 1.0653 ≤ 1.1"),
    (0.05, 1.0, True, "0.6 + 1.6449·0.2 = 0.9290 ≤ 1.0"),
    (0.10, 1.0, True, "0.6 + 1.2816·0.2 = 0.8563 ≤ 1.0"),
    (0.10, 0.85, False, "0.6 + 1.2816·0.2 = 0.8563 > 0.85"),
    (0.001, 1.2, False, "0.6 + 3.0902·0.2 = 1.2180 > 1.2"),
]


@pytest.mark.parametrize(("rho", "cpu_cap", "fits", "why"), HAND, ids=[h[3] for h in HAND])
def test_gpa_hand_computed(rho, cpu_cap, fits, why):
    # memory: 0.5 + 0.25 = 0.75 ≤ 1, never the binding resource here
    assert gpa_fit(NODE, TASK, [cpu_cap, 1.0], GpaParams(rho=rho)) is fits, why


def test_gpa_projection_numbers():
    proj = gpa_projection(NODE, TASK, GpaParams(rho=0.01))
    assert proj == pytest.approx([0.6 + 2.3263478740408408 * 0.2, 0.75])


def test_sum_test_on_the_same_example_accepts():
    # Deterministic: cpu 0.6 + 0.1 = 0.7, mem 0.75, both ≤ 1. GPA at ϱ=0.01 refuses.
    assert sum_fit(NODE, TASK, CAP) is True
    assert gpa_fit(NODE, TASK, CAP, GpaParams(rho=0.01)) is False
    assert sum_projection(NODE, TASK) == pytest.approx([0.7, 0.75])


def test_memory_stays_a_hard_sum():
    # CPU fits easily (σ = 0, μ' = 0.2) but memory 0.75 + 0.375 = 1.125 > 1.
    node = Demand(size=[0.1, 0.75], cpu_mean=0.1, cpu_var=0.0, cpu_samples=ENOUGH)
    big_mem = Demand(size=[0.1, 0.375], cpu_mean=0.1, cpu_var=0.0, cpu_samples=ENOUGH)
    assert gpa_fit(node, big_mem, CAP) is False
    # memory exactly at capacity: 0.75 + 0.25 = 1.0 ≤ 1.0
    ok_mem = Demand(size=[0.1, 0.25], cpu_mean=0.1, cpu_var=0.0, cpu_samples=ENOUGH)
    assert gpa_fit(node, ok_mem, CAP) is True


def test_sigma_zero_boundary_is_inclusive():
    # σ' = 0: F is a step at μ'; μ' = c fits (≤), just above does not.
    node = Demand(size=[0.5, 0.0], cpu_mean=0.5, cpu_samples=ENOUGH)
    task = Demand(size=[0.5, 0.0], cpu_mean=0.5, cpu_samples=ENOUGH)
    assert gpa_fit(node, task, CAP) is True
    assert gpa_fit(node, task, [np.nextafter(1.0, 0.0), 1.0]) is False


# ---------------------------------------------------------------------------
# The min_samples fallback
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_samples", "node_samples", "uses_gpa"),
    [
        (99, ENOUGH, False),  # candidate under-sampled → deterministic
        (100, ENOUGH, True),  # exactly min_samples → GPA
        (ENOUGH, 99, False),  # a resident task under-sampled → deterministic
        (ENOUGH, math.inf, True),  # empty node
        (0, 0, False),  # no statistics at all
    ],
)
def test_fallback_below_min_samples(task_samples, node_samples, uses_gpa):
    node = Demand(size=[0.6, 0.5], cpu_mean=0.5, cpu_var=0.03, cpu_samples=node_samples)
    task = Demand(size=[0.1, 0.25], cpu_mean=0.1, cpu_var=0.01, cpu_samples=task_samples)
    # GPA at ϱ=0.01 refuses (1.0653 > 1); the deterministic sum (0.7) accepts.
    assert gpa_fit(node, task, CAP, GpaParams(rho=0.01)) is (not uses_gpa)
    if not uses_gpa:
        assert gpa_projection(node, task) == pytest.approx(sum_projection(node, task))


def test_node_aggregate_keeps_fewest_samples():
    a = Demand([0.1, 0.1], 0.1, 0.01, 500)
    b = Demand([0.2, 0.1], 0.2, 0.02, 40)
    tot = Demand.total([a, b], 2)
    assert tot.size == pytest.approx([0.3, 0.2])
    assert (float(tot.cpu_mean), float(tot.cpu_var), float(tot.cpu_samples)) == pytest.approx((0.3, 0.03, 40))
    empty = Demand.total([], 2)
    assert math.isinf(float(empty.cpu_samples)) and not empty.size.any()


def test_custom_min_samples():
    node = Demand(size=[0.6, 0.5], cpu_mean=0.5, cpu_var=0.03, cpu_samples=30)
    assert gpa_fit(node, TASK, CAP, GpaParams(rho=0.01, min_samples=30)) is False  # GPA used
    assert gpa_fit(node, TASK, CAP, GpaParams(rho=0.01)) is True  # 30 < 100 → sum


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

unit = st.floats(0.0, 1.0)


@st.composite
def demands(draw, samples=st.integers(100, 10_000)):
    size = [draw(unit), draw(unit)]
    return Demand(size=size, cpu_mean=draw(unit), cpu_var=draw(st.floats(0.0, 0.05)), cpu_samples=draw(samples))


@given(node_size=st.tuples(unit, unit), task_size=st.tuples(unit, unit), cap=st.tuples(unit, unit),
       rho=st.sampled_from([0.1, 0.05, 0.01, 0.001]), max_util=st.sampled_from([1.0, 0.9]))
def test_sigma_zero_equals_sum_test(node_size, task_size, cap, rho, max_util):
    node = Demand(size=node_size, cpu_mean=node_size[0], cpu_var=0.0, cpu_samples=ENOUGH)
    task = Demand(size=task_size, cpu_mean=task_size[0], cpu_var=0.0, cpu_samples=ENOUGH)
    assert gpa_fit(node, task, cap, GpaParams(rho=rho, max_util=max_util)) == sum_fit(
        node, task, cap, SumFitParams(max_util=max_util)
    )


@given(node=demands(), task=demands(samples=st.integers(0, 99)), cap=st.tuples(unit, unit))
def test_under_sampled_task_equals_sum_test(node, task, cap):
    assert gpa_fit(node, task, cap) == sum_fit(node, task, cap)


@given(node=demands(), task=demands(), cpu_cap=st.floats(0.01, 3.0), rho=st.sampled_from([0.1, 0.05, 0.01, 0.001]))
def test_matches_the_normal_cdf_form(node, task, cpu_cap, rho):
    """Paper form: fits ⇔ F(c | μ', σ'²) ≥ 1 − ϱ (away from the boundary)."""
    mu = float(node.cpu_mean + task.cpu_mean)
    sigma = math.sqrt(float(node.cpu_var + task.cpu_var))
    assume(sigma > 1e-6)
    bound = mu + NormalDist().inv_cdf(1 - rho) * sigma
    assume(abs(bound - cpu_cap) > 1e-9)
    cdf_fits = NormalDist(mu, sigma).cdf(cpu_cap) >= 1 - rho
    got = gpa_fit(node, task, [cpu_cap, 10.0], GpaParams(rho=rho))
    assert got == cdf_fits


@given(node=demands(), task=demands(), cap=st.tuples(st.floats(0.0, 3.0), st.floats(0.0, 3.0)))
def test_larger_rho_never_rejects_what_a_smaller_one_accepts(node, task, cap):
    strict = gpa_fit(node, task, cap, GpaParams(rho=0.001))
    loose = gpa_fit(node, task, cap, GpaParams(rho=0.1))
    assert loose or not strict


def test_vectorised_over_nodes():
    # 3 nodes: the example node, an empty node, and an under-sampled one
    nodes = Demand(
        size=[[0.6, 0.5], [0.0, 0.0], [0.6, 0.5]],
        cpu_mean=[0.5, 0.0, 0.5],
        cpu_var=[0.03, 0.0, 0.03],
        cpu_samples=[ENOUGH, math.inf, 10],
    )
    got = gpa_fit(nodes, TASK, CAP, GpaParams(rho=0.01))
    assert got.dtype == np.bool_ and got.tolist() == [False, True, True]
    assert sum_fit(nodes, TASK, CAP).tolist() == [True, True, True]
    per_node_caps = np.array([[1.1, 1.0], [0.05, 1.0], [0.65, 1.0]])
    assert gpa_fit(nodes, TASK, per_node_caps, GpaParams(rho=0.01)).tolist() == [True, False, False]


def test_cpu_index_selects_the_cpu_column():
    # Resources ordered (mem, cpu): the GPA applies to column 1 only.
    node = Demand(size=[0.5, 0.6], cpu_mean=0.5, cpu_var=0.03, cpu_samples=ENOUGH)
    task = Demand(size=[0.25, 0.1], cpu_mean=0.1, cpu_var=0.01, cpu_samples=ENOUGH)
    q = GpaParams(rho=0.01, cpu_index=1)
    assert gpa_projection(node, task, q) == pytest.approx([0.75, 1.0652695748])
    assert gpa_fit(node, task, [1.0, 1.0], q) is False
    with pytest.raises(ValueError, match="cpu_index"):
        gpa_fit(node, task, [1.0, 1.0], GpaParams(cpu_index=2))


def test_sum_fit_max_util():
    node = Demand(size=[0.5, 0.625])
    task = Demand(size=[0.25, 0.25])  # → (0.75, 0.875)
    assert sum_fit(node, task, CAP) is True
    assert sum_fit(node, task, CAP, SumFitParams(max_util=0.9)) is True
    assert sum_fit(node, task, CAP, SumFitParams(max_util=0.8)) is False  # 0.875 > 0.8


# ---------------------------------------------------------------------------
# Validation and registry
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rho": 0.0}, "rho"),
        ({"rho": 0.6}, "rho"),
        ({"rho": math.nan}, "rho"),
        ({"min_samples": 1}, "min_samples"),
        ({"min_samples": 100.5}, "min_samples"),
        ({"max_util": 0.0}, "max_util"),
        ({"max_util": 1.5}, "max_util"),
        ({"cpu_index": -1}, "cpu_index"),
    ],
)
def test_bad_gpa_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"GpaParams\.{field} must be"):
        GpaParams(**kwargs)


def test_bad_sum_params():
    with pytest.raises(ValueError, match=r"SumFitParams\.max_util must be"):
        SumFitParams(max_util=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": [-0.1, 0.0]},
        {"size": [0.1, 0.0], "cpu_var": -0.01},
        {"size": [0.1, 0.0], "cpu_mean": math.nan},
        {"size": [[[0.1]]]},
        {"size": []},
    ],
)
def test_bad_demand(kwargs):
    with pytest.raises(ValueError, match="Demand"):
        Demand(**kwargs)


def test_mismatched_shapes_raise():
    with pytest.raises(ValueError, match="task.size"):
        gpa_fit(NODE, Demand(size=[0.1, 0.1, 0.1]), CAP)
    with pytest.raises(ValueError, match="capacity"):
        sum_fit(NODE, TASK, [1.0, 1.0, 1.0])


def test_registry_same_interface():
    assert set(FIT_TESTS) == {"sum", "gpa"} == set(FIT_PARAMS)
    for name, fits in FIT_TESTS.items():
        assert fits(NODE, TASK, [2.0, 2.0], FIT_PARAMS[name]()) is True
        assert fits(NODE, TASK, [0.1, 0.1]) is False
