"""SIAS, SRAS and their GAIN variants (DESIGN §8, seed digest §D.8, §D.13).

The reference formula, with m = mean p_r and D = max p_r − min p_r:
    SIAS = max(0, 0.5 + 0.5·exp(−m²/2500)       − D/90)
    SRAS = max(0, 0.6 + 0.4·exp(−(90−m)²/500)   − D/90)
both 0 if any p_r > 90 (STA) or > 100 (OVERLOADED).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cellbed.policy.scores import (
    GAIN_TIE_BREAK,
    SCORE_PARAMS,
    SCORES,
    AsrClass,
    SiasParams,
    SrasParams,
    classify,
    gain,
    gain_of,
    gain_sort_key,
    rank_by_gain,
    sias,
    sias_from_load,
    sias_gain,
    sras,
    sras_from_load,
    sras_gain,
    utilisation_pct,
)

TOL = 1e-3

# ---------------------------------------------------------------------------
# Reference table. DESIGN §8 rows first, then the extra rows of digest §D.13.
# Comments: m, D, the exp term, and the sum before clipping/gating.
# ---------------------------------------------------------------------------

REFERENCE = [
    # (cpu%, mem%), SIAS, SRAS
    # m=0, D=0. SIAS: exp(−0/2500)=1 → .5+.5·1 = 1.000.  SRAS: exp(−8100/500)≈0 → .6+.4·0 = .600
    ((0, 0), 1.000, 0.600),
    # m=45, D=0. SIAS: exp(−2025/2500)=.4449 → .5+.2224 = .722.  SRAS: exp(−2025/500)=.0174 → .6+.0070 = .607
    ((45, 45), 0.722, 0.607),
    # m=70, D=0. SIAS: exp(−4900/2500)=.1409 → .5+.0704 = .570.  SRAS: exp(−400/500)=.4493 → .6+.1797 = .780
    ((70, 70), 0.570, 0.780),
    # m=90, D=0. SIAS: exp(−8100/2500)=.0392 → .5+.0196 = .520.  SRAS: exp(−0/500)=1 → .6+.4 = 1.000
    ((90, 90), 0.520, 1.000),
    # m=47.5, D=55 (55/90=.6111). SIAS: exp(−2256.25/2500)=.4056 → .5+.2028−.6111 = .092.
    #   SRAS: exp(−1806.25/500)=.0270 → .6+.0108−.6111 = −.0003 → clipped to 0
    ((75, 20), 0.092, 0.000),
    # 95 > 90: STA gate → 0 (ungated: SIAS .5+.0611−.5 = .061, SRAS .6+.2168−.5 = .317)
    ((95, 50), 0.0, 0.0),
    # 101 > 100: OVERLOADED gate → 0 (ungated both negative anyway: −.365, −.374)
    ((101, 10), 0.0, 0.0),
    # --- digest §D.13 extra rows ---
    # m=10, D=0. SIAS: exp(−100/2500)=.9608 → .980.  SRAS: exp(−6400/500)≈0 → .600
    ((10, 10), 0.980, 0.600),
    # m=20, D=0. SIAS: exp(−400/2500)=.8521 → .926.  SRAS: exp(−4900/500)=.0001 → .600
    ((20, 20), 0.926, 0.600),
    # m=60, D=0. SIAS: exp(−3600/2500)=.2369 → .618.  SRAS: exp(−900/500)=.1653 → .666
    ((60, 60), 0.618, 0.666),
    # m=80, D=0. SIAS: exp(−6400/2500)=.0773 → .539.  SRAS: exp(−100/500)=.8187 → .927
    ((80, 80), 0.539, 0.927),
    # m=35, D=50 (.5556). SIAS: exp(−1225/2500)=.6126 → .5+.3063−.5556 = .251.
    #   SRAS: exp(−3025/500)=.0024 → .6+.0009−.5556 = .045
    ((60, 10), 0.251, 0.045),
    # m=77.5, D=15 (.1667). SIAS: exp(−6006.25/2500)=.0905 → .5+.0452−.1667 = .379.
    #   SRAS: exp(−156.25/500)=.7316 → .6+.2926−.1667 = .726
    ((85, 70), 0.379, 0.726),
    # m=45, D=90 (1.0): SIAS .7224−1 = −.278 → 0; SRAS .6070−1 = −.393 → 0. (90 is not > 90: no gate.)
    ((90, 0), 0.0, 0.0),
    ((0, 90), 0.0, 0.0),
]


@pytest.mark.parametrize(("p", "want_sias", "want_sras"), REFERENCE, ids=[str(r[0]) for r in REFERENCE])
def test_reference_values_one_node(p, want_sias, want_sras):
    assert sias(p) == pytest.approx(want_sias, abs=TOL)
    assert sras(p) == pytest.approx(want_sras, abs=TOL)


def test_reference_values_vectorised():
    P = np.array([r[0] for r in REFERENCE], dtype=float)
    np.testing.assert_allclose(sias(P), [r[1] for r in REFERENCE], atol=TOL)
    np.testing.assert_allclose(sras(P), [r[2] for r in REFERENCE], atol=TOL)


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------


def test_default_params_are_the_reference_ones():
    assert (SiasParams().lam, SiasParams().beta, SiasParams().gamma) == (0.5, 2500.0, 1.0)
    assert (SrasParams().lam, SrasParams().beta, SrasParams().gamma) == (0.6, 500.0, 1.0)
    for cls in (SiasParams, SrasParams):
        assert (cls().max_util_pct, cls().overload_pct) == (90.0, 100.0)


BAD_PARAMS = [
    ("lam", -0.1),
    ("lam", 1.5),
    ("lam", math.nan),
    ("beta", 0.0),
    ("beta", -5.0),
    ("beta", math.inf),
    ("gamma", -1.0),
    ("gamma", "1"),
    ("max_util_pct", 0.0),
    ("max_util_pct", 101.0),  # above overload_pct (100)
    ("overload_pct", -1.0),
    ("lam", True),
]


@pytest.mark.parametrize("cls", [SiasParams, SrasParams])
@pytest.mark.parametrize(("field", "value"), BAD_PARAMS)
def test_bad_params_name_the_field_and_range(cls, field, value):
    with pytest.raises(ValueError, match=rf"{cls.__name__}\.{field} must be") as e:
        cls(**{field: value})
    assert "[" in str(e.value) or "(" in str(e.value)  # an allowed range is stated


def test_params_are_frozen():
    with pytest.raises(AttributeError):
        SiasParams().lam = 0.3  # type: ignore[misc]


def test_custom_params_change_the_score():
    # λ=0.8, γ=0: SIAS(90,0) = .8 + .2·exp(−2025/2500) = .8 + .2·.4449 = .889 (no penalty)
    assert sias([90, 0], SiasParams(lam=0.8, gamma=0.0)) == pytest.approx(0.889, abs=TOL)
    # max_util 80: (85, 85) is now STA → 0; SRAS peak moves to 80
    assert sras([85, 85], SrasParams(max_util_pct=80.0)) == 0.0
    assert sras([80, 80], SrasParams(max_util_pct=80.0)) == pytest.approx(1.0)


# ---------------------------------------------------------------------------
# Shapes, masks and input checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("score", [sias, sras])
def test_one_node_returns_float_many_return_array(score):
    assert isinstance(score([10, 20]), float)
    out = score(np.array([[10, 20], [30, 40], [95, 0]]))
    assert isinstance(out, np.ndarray) and out.shape == (3,) and out.dtype == np.float64
    assert score(np.zeros((0, 2))).shape == (0,)


@pytest.mark.parametrize("score", [sias, sras])
def test_mask_excludes_with_nan_not_zero(score):
    P = np.array([[10, 10], [95, 95], [10, 10], [np.nan, 5]])
    mask = np.array([True, True, False, False])
    out = score(P, mask=mask)
    assert out[0] > 0
    assert out[1] == 0.0  # matching but STA: a real zero
    assert np.isnan(out[2]) and np.isnan(out[3])  # excluded: undefined, even with NaN inputs
    assert math.isnan(score([10, 10], mask=False))
    assert score([10, 10], mask=True) == score([10, 10])


@pytest.mark.parametrize("score", [sias, sras])
@pytest.mark.parametrize(
    "bad",
    [
        {"p": [[np.nan, 1.0]]},
        {"p": [[-1.0, 1.0]]},
        {"p": [[np.inf, 1.0]]},
        {"p": np.zeros((2, 2, 2))},
        {"p": np.zeros((2, 0))},
        {"p": [[1.0, 1.0]], "mask": np.array([1])},  # not boolean
        {"p": [[1.0, 1.0]], "mask": np.array([True, False])},  # wrong length
    ],
)
def test_bad_inputs_raise(score, bad):
    with pytest.raises(ValueError):
        score(bad["p"], mask=bad.get("mask"))


def test_from_load_convenience():
    # node 0: requests (2, 3) of capacity (4, 8), task (1, 1) → p = (75, 50)
    # node 1: (0, 0) of (4, 8) + (1, 1) → p = (25, 12.5)
    load = np.array([[2.0, 3.0], [0.0, 0.0]])
    cap = np.array([4.0, 8.0])
    task = np.array([1.0, 1.0])
    p = utilisation_pct(load, cap, task)
    np.testing.assert_allclose(p, [[75, 50], [25, 12.5]])
    np.testing.assert_allclose(sias_from_load(load, cap, task), sias(p))
    np.testing.assert_allclose(sras_from_load(load, cap, task), sras(p))
    assert sias_from_load(load[0], cap, task) == sias([75, 50])
    with pytest.raises(ValueError, match="capacity"):
        utilisation_pct(load, [4.0, 0.0], task)
    with pytest.raises(ValueError, match="task"):
        utilisation_pct(load, cap, [-1.0, 0.0])


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

SCORE_FNS = [pytest.param(sias, id="sias"), pytest.param(sras, id="sras")]


def pct_matrix(lo=0.0, hi=120.0, max_resources=5):
    """(N, R) utilisation matrices, 1 ≤ R ≤ max_resources."""
    return st.tuples(st.integers(1, 20), st.integers(1, max_resources)).flatmap(
        lambda nr: hnp.arrays(np.float64, nr, elements=st.floats(lo, hi, allow_nan=False))
    )


@pytest.mark.parametrize("score", SCORE_FNS)
@given(P=pct_matrix())
def test_clipped_into_unit_interval_for_any_number_of_resources(score, P):
    out = score(P)
    assert out.shape == (P.shape[0],)
    assert np.all(out >= 0.0) and np.all(out <= 1.0)


@pytest.mark.parametrize("score", SCORE_FNS)
@given(P=pct_matrix(), data=st.data())
def test_zero_regions(score, P, data):
    # Push one resource of every node above 90 (STA) or above 100 (OVERLOADED).
    col = data.draw(st.integers(0, P.shape[1] - 1))
    level = data.draw(st.floats(90.0, 500.0, exclude_min=True))
    P = P.copy()
    P[:, col] = level
    assert np.all(score(P) == 0.0)


@pytest.mark.parametrize("score", SCORE_FNS)
def test_exactly_90_is_not_sta(score):
    assert score([90.0, 90.0]) > 0
    assert score([np.nextafter(90.0, 100.0), 90.0]) == 0.0


@pytest.mark.parametrize("score", SCORE_FNS)
@given(P=pct_matrix(0.0, 90.0), perm_seed=st.randoms(use_true_random=False))
def test_depends_only_on_mean_and_spread(score, P, perm_seed):
    """Generalisation to R resources: column order does not matter, and
    duplicating every column (same m, same D, twice the resources) changes
    nothing."""
    cols = list(range(P.shape[1]))
    perm_seed.shuffle(cols)
    np.testing.assert_allclose(score(P[:, cols]), score(P), atol=1e-12)
    np.testing.assert_allclose(score(np.repeat(P, 2, axis=1)), score(P), atol=1e-12)


@given(t=st.floats(0.0, 90.0))
def test_one_resource_has_no_disproportion(t):
    assert sias([t]) == pytest.approx(0.5 + 0.5 * math.exp(-t * t / 2500))
    assert sras([t]) == pytest.approx(0.6 + 0.4 * math.exp(-((90 - t) ** 2) / 500))


@given(a=st.floats(0.0, 90.0), b=st.floats(0.0, 90.0), r=st.integers(1, 5))
def test_diagonal_monotone(a, b, r):
    """On the diagonal (D = 0) SIAS falls and SRAS rises with the fill level,
    so every proportional PA point beats every TA point for SIAS and the
    reverse for SRAS."""
    assume(a < b)
    lo, hi = [a] * r, [b] * r
    assert sias(lo) >= sias(hi)
    assert sras(lo) <= sras(hi)
    if b - a > 1e-6:
        assert sias(lo) > sias(hi) and sras(lo) < sras(hi)


@pytest.mark.parametrize("score", SCORE_FNS)
@given(P=pct_matrix(0.0, 90.0))
def test_disproportion_never_helps(score, P):
    """Moving a node to the diagonal at the same mean never lowers its score."""
    m = P.mean(axis=1, keepdims=True)
    diag = np.broadcast_to(m, P.shape)
    assert np.all(score(P) <= score(diag) + 1e-12)


# Corner boxes: the regions of DESIGN §8 "highest near (0,0), medium near
# (90,90), lowest in the off-diagonal corners", made concrete. Each box lies
# inside the ASR class it stands for (checked below with classify).
#   PA corner: every p_r in [0, 20]
#   TA box:    every p_r in [70, 90]          (= the whole TA class)
#   DA corner: every p_r in [0, 20] ∪ [70, 90], at least one in each part
# Worked bounds, 2 resources: SIAS  PA ≥ .758 (20,0) > TA ≤ .570 (70,70);
#   TA ≥ .316 (90,70) > DA ≤ .167 (70,20).
#   SRAS TA ≥ .705 (90,70) > PA ≤ .600 (20,20); PA ≥ .378 (20,0) > DA ≤ .051 (70,20).
# The tightest case is SIAS with 5 resources: TA ≥ .304 (90,90,90,90,70)
# vs DA ≤ .293 (70,20,20,20,20). With 6+ resources the SIAS TA/DA order of
# these boxes no longer holds, so R is drawn from 2..5.

low_pct = st.floats(0.0, 20.0)
high_pct = st.floats(70.0, 90.0)


@st.composite
def corner_boxes(draw):
    r = draw(st.integers(2, 5))
    pa = draw(st.lists(low_pct, min_size=r, max_size=r))
    ta = draw(st.lists(high_pct, min_size=r, max_size=r))
    n_high = draw(st.integers(1, r - 1))
    da = draw(st.lists(high_pct, min_size=n_high, max_size=n_high)) + draw(
        st.lists(low_pct, min_size=r - n_high, max_size=r - n_high)
    )
    da = draw(st.permutations(da))
    return np.array([pa, ta, da], dtype=float)


@given(boxes=corner_boxes())
def test_sias_order_pa_ta_da_on_corner_boxes(boxes):
    assert list(classify(boxes)) == [AsrClass.PA, AsrClass.TA, AsrClass.DA]
    pa, ta, da = sias(boxes)
    assert pa > ta > da


@given(boxes=corner_boxes())
def test_sras_order_ta_pa_da_on_corner_boxes(boxes):
    assert list(classify(boxes)) == [AsrClass.PA, AsrClass.TA, AsrClass.DA]
    pa, ta, da = sras(boxes)
    assert ta > pa > da


@pytest.mark.parametrize(("r", "step"), [(2, 0.5), (3, 2.0), (4, 5.0)])
def test_region_means_follow_the_order(r, step):
    """Over whole ASR regions (uniform grid on [0, 90]^R, classified with the
    default bands) the mean score follows the order. Measured, R=2:
    SIAS PA .65 > TA .47 > DA .22; SRAS TA .85 > PA .46 > DA .19."""
    axis = np.arange(0.0, 90.0 + 1e-9, step)
    P = np.array(list(itertools.product(axis, repeat=r)))
    cls = classify(P)
    orders = [(sias, [AsrClass.PA, AsrClass.TA, AsrClass.DA]), (sras, [AsrClass.TA, AsrClass.PA, AsrClass.DA])]
    for score, order in orders:
        s = score(P)
        means = [s[cls == c].mean() for c in order]
        assert means[0] > means[1] > means[2], (score.__name__, means)


@pytest.mark.parametrize(
    ("score", "better", "worse", "why"),
    [
        # The naive pointwise orders are FALSE for the reference formula; the
        # properties above are what holds. These rows document the counterexamples.
        (sias, (70, 70), (69, 39), "a TA point beats a PA point: .570 vs .5+.5·exp(−2916/2500)−30/90 = .322"),
        (sias, (31, 0), (70, 70), "a DA point (spread 31) beats the best TA point: .954−.344 = .610 vs .570"),
        # SRAS (69,69) PA: .6+.4·exp(−441/500) = .766;  (90,70) TA: .9275−.2222 = .705
        (sras, (69, 69), (90, 70), "a PA point beats a TA point: .766 vs .705"),
        (sras, (70, 69), (90, 70), "a DA point beats a TA point: .7726−.0111 = .761 vs .705"),
    ],
)
def test_naive_pointwise_order_does_not_hold(score, better, worse, why):
    assert score(better) > score(worse), why


# ---------------------------------------------------------------------------
# GAIN
# ---------------------------------------------------------------------------


@st.composite
def before_after(draw):
    P = draw(pct_matrix(0.0, 110.0))
    add = draw(hnp.arrays(np.float64, P.shape, elements=st.floats(0.0, 50.0)))
    return P, P + add


@pytest.mark.parametrize(("score", "score_gain"), [(sias, sias_gain), (sras, sras_gain)], ids=["sias", "sras"])
@given(pa=before_after())
def test_gain_is_clipped_difference(score, score_gain, pa):
    before, after = pa
    g = score_gain(before, after)
    assert np.all(g >= 0.0)
    np.testing.assert_allclose(g, np.maximum(score(after) - score(before), 0.0))


@given(pa=before_after())
def test_sias_gain_needs_less_disproportion(pa):
    """Digest §D.13: adding a task never lowers m, so SIAS_GAIN > 0 only if
    the task reduces D."""
    before, after = pa
    d_before = before.max(axis=1) - before.min(axis=1)
    d_after = after.max(axis=1) - after.min(axis=1)
    g = sias_gain(before, after)
    assert np.all(g[d_after >= d_before] == 0.0)


def test_gain_examples():
    # SIAS (10,50)→(30,50): m 30→40, D 40→20.
    #   before .5+.5·exp(−900/2500)−40/90 = .5+.3488−.4444 = .4044
    #   after  .5+.5·exp(−1600/2500)−20/90 = .5+.2636−.2222 = .5414 → gain .137
    assert sias_gain([10, 50], [30, 50]) == pytest.approx(0.137, abs=TOL)
    # SIAS (10,10)→(30,30): proportional growth only lowers SIAS → 0
    assert sias_gain([10, 10], [30, 30]) == 0.0
    # SRAS (10,10)→(80,80): .600 → .9275 → gain .327
    assert sras_gain([10, 10], [80, 80]) == pytest.approx(0.327, abs=TOL)
    # Excluded node: NaN, not 0
    assert math.isnan(sras_gain([10, 10], [80, 80], mask=False))
    with pytest.raises(ValueError, match="same nodes"):
        sias_gain(np.zeros((2, 2)), np.zeros((3, 2)))


def test_gain_of_any_score():
    def fill(p, params=None, *, mask=None):  # a toy score: mean fill / 100
        return np.asarray(p, dtype=float).mean(axis=-1) / 100.0

    fill_gain = gain_of(fill)
    assert fill_gain.__name__ == "fill_gain"
    assert fill_gain([10, 10], [30, 50]) == pytest.approx(0.3)
    assert fill_gain([30, 50], [10, 10]) == 0.0
    assert gain(fill, [10, 10], [30, 50]) == fill_gain([10, 10], [30, 50])


def test_gain_tie_break_by_absolute_score():
    # Three nodes tie at gain 0; the one with the highest absolute score wins
    # among them, but a positive gain beats all of them. NaN (excluded) is dropped.
    gains = np.array([0.0, 0.0, 0.2, 0.0, np.nan])
    absolute = np.array([0.3, 0.7, 0.1, 0.5, 0.9])
    assert rank_by_gain(gains, absolute).tolist() == [2, 1, 3, 0]
    keys = sorted(range(5), key=lambda i: gain_sort_key(gains[i], absolute[i]))
    assert keys == [2, 1, 3, 0, 4]
    # Exact ties keep input order (the caller's shuffle decides).
    assert rank_by_gain([0.0, 0.0], [0.5, 0.5]).tolist() == [0, 1]


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


def test_registry_entries_share_one_signature():
    load = np.array([[2.0, 3.0], [0.0, 0.0], [1.0, 1.0]])
    cap = np.array([4.0, 8.0])
    task = np.array([1.0, 1.0])
    mask = np.array([True, True, False])
    assert set(SCORES) == {"sias", "sras", "sias_gain", "sras_gain"} == set(SCORE_PARAMS)
    for name, fn in SCORES.items():
        out = fn(load, cap, task, SCORE_PARAMS[name](), mask=mask)
        assert out.shape == (3,) and np.isnan(out[2]) and np.all(out[:2] >= 0)
    p_before = utilisation_pct(load, cap)
    p_after = utilisation_pct(load, cap, task)
    np.testing.assert_allclose(SCORES["sias_gain"](load, cap, task), sias_gain(p_before, p_after))
    np.testing.assert_allclose(SCORES["sras_gain"](load, cap, task), sras_gain(p_before, p_after))
    assert GAIN_TIE_BREAK == {"sias_gain": "sias", "sras_gain": "sras"}


@settings(max_examples=25)
@given(P=pct_matrix(0.0, 120.0))
def test_vectorised_equals_row_by_row(P):
    for score in (sias, sras):
        rows = [score(row) for row in P]
        np.testing.assert_allclose(score(P), rows, atol=1e-12)
