"""ASR classifier and shares (DESIGN §8, seed digest §D.7)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cellbed.policy.scores import AsrBands, AsrClass, AsrCounts, asr, asr_counts, classify, node_class

IDLE, OVER, STA, TA, PA, DA = (
    AsrClass.IDLE,
    AsrClass.OVERLOADED,
    AsrClass.STA,
    AsrClass.TA,
    AsrClass.PA,
    AsrClass.DA,
)
EPS = 1e-9

# (p, task_count, expected, why)
BOUNDARIES = [
    # --- IDLE wins over everything: no tasks ---
    ((0, 0), 0, IDLE, "no tasks"),
    ((150, 0), 0, IDLE, "no tasks, whatever p says"),
    ((0, 0), 1, PA, "one task using nothing: max 0 < 70, spread 0"),
    # --- 100: OVERLOADED is strictly above ---
    ((100, 100), 3, STA, "100 is not > 100, but > 90"),
    ((100 + EPS, 0), 3, OVER, "any p_r > 100"),
    ((50, 250), 3, OVER, "any p_r > 100"),
    # --- 90: STA is strictly above, TA includes 90 ---
    ((90, 90), 3, TA, "both in [70, 90]"),
    ((90 + EPS, 90), 3, STA, "one p_r > 90"),
    ((95, 50), 3, STA, "reference row (95, 50)"),
    ((90, 0), 3, DA, "90 is TA-band, 0 is not: mixed"),
    # --- 70: TA starts at 70 inclusive, PA needs < 70 ---
    ((70, 70), 3, TA, "70 is in [70, 90]"),
    ((70, 70 - EPS), 3, DA, "one at 70, one just below: neither all-TA nor all-PA"),
    ((70 - EPS, 70 - EPS), 3, PA, "both < 70, spread 0"),
    ((85, 70), 3, TA, "digest row (85, 70)"),
    ((75, 20), 3, DA, "reference DA example (75, 20)"),
    # --- 30-point spread ---
    ((69, 39), 3, PA, "spread exactly 30"),
    ((69, 39 - 1e-6), 3, DA, "spread 30.000001"),
    ((40, 10), 3, PA, "spread 30"),
    ((40, 9.5), 3, DA, "spread 30.5"),
    ((60, 10), 3, DA, "spread 50: DA here, PA under the digest's literal banding"),
    ((31, 0), 3, DA, "spread 31 at low fill"),
    # --- other resource counts ---
    ((50,), 3, PA, "one resource"),
    ((70,), 3, TA, "one resource"),
    ((10, 20, 40), 3, PA, "three resources, spread 30"),
    ((75, 80, 90, 70), 3, TA, "four resources in band"),
    ((75, 80, 90, 69), 3, DA, "four resources, one below 70"),
]


@pytest.mark.parametrize(
    ("p", "tasks", "want", "why"), BOUNDARIES, ids=[f"{b[0]}-{b[2].name}" for b in BOUNDARIES]
)
def test_classify_boundaries(p, tasks, want, why):
    got = classify(p, task_count=tasks)
    assert isinstance(got, AsrClass)
    assert got is want, why


def test_classify_vectorised_matches_rows():
    two = [b for b in BOUNDARIES if len(b[0]) == 2]
    P = np.array([b[0] for b in two], dtype=float)
    tc = np.array([b[1] for b in two])
    codes = classify(P, task_count=tc)
    assert codes.dtype == np.int8 and codes.shape == (len(two),)
    assert [AsrClass(c) for c in codes] == [b[2] for b in two]


def test_classify_without_task_count_never_idle():
    assert classify([0, 0]) is PA
    assert classify(np.zeros((3, 2))).tolist() == [PA] * 3


def test_idle_rows_may_hold_nan():
    codes = classify(np.array([[np.nan, np.nan], [10, 10]]), task_count=np.array([0, 2]))
    assert codes.tolist() == [IDLE, PA]
    with pytest.raises(ValueError, match="row 0"):
        classify(np.array([[np.nan, np.nan], [10, 10]]), task_count=np.array([1, 2]))


def test_literal_banding_and_custom_bands():
    literal = AsrBands(pa_spread_pct=math.inf)
    assert classify([60, 10], bands=literal) is PA  # digest §D.7 caveat
    tight = AsrBands(overload_pct=100, sta_pct=80, ta_low_pct=60, pa_spread_pct=20)
    assert classify([85, 70], bands=tight) is STA
    assert classify([65, 75], bands=tight) is TA
    assert classify([50, 25], bands=tight) is DA  # spread 25 > 20


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"overload_pct": 0}, "overload_pct"),
        ({"sta_pct": 101}, "sta_pct"),  # above overload
        ({"ta_low_pct": 90}, "ta_low_pct"),  # must be < sta_pct
        ({"ta_low_pct": -1}, "ta_low_pct"),
        ({"pa_spread_pct": -5}, "pa_spread_pct"),
        ({"pa_spread_pct": math.nan}, "pa_spread_pct"),
    ],
)
def test_bad_bands_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"AsrBands\.{field} must be"):
        AsrBands(**kwargs)


@pytest.mark.parametrize(
    "bad",
    [
        {"p": np.zeros((2, 2)), "task_count": np.array([1])},
        {"p": np.zeros((2, 2)), "task_count": np.array([1.0, 2.0])},
        {"p": np.zeros((2, 2)), "task_count": np.array([-1, 2])},
        {"p": np.zeros((2, 2, 2))},
        {"p": [[-3.0, 1.0]]},
    ],
)
def test_classify_bad_inputs(bad):
    with pytest.raises(ValueError):
        classify(bad["p"], task_count=bad.get("task_count"))


# ---------------------------------------------------------------------------
# Shares
# ---------------------------------------------------------------------------


def test_shares_exclude_idle_and_overloaded():
    #        IDLE     OVER       STA       TA        TA        PA        PA        PA        DA
    P = np.array([[0, 0], [120, 5], [95, 50], [80, 80], [90, 70], [10, 10], [30, 20], [60, 40], [75, 20]], float)
    tc = np.array([0, 4, 2, 3, 5, 1, 2, 2, 1])
    c = asr(P, task_count=tc)
    assert c == AsrCounts(idle=1, overloaded=1, sta=1, ta=2, pa=3, da=1)
    assert c.active == 7 and c.total == 9
    # shares over the 7 active nodes only
    assert (c.sta_share, c.ta_share, c.pa_share, c.da_share) == pytest.approx((1 / 7, 2 / 7, 3 / 7, 1 / 7))
    assert sum(c.shares().values()) == pytest.approx(1.0)
    assert set(c.shares()) == {STA, TA, PA, DA}


def test_shares_undefined_without_active_nodes():
    c = asr(np.array([[0, 0], [150, 0]]), task_count=np.array([0, 1]))
    assert (c.idle, c.overloaded, c.active) == (1, 1, 0)
    assert all(math.isnan(v) for v in c.shares().values())
    assert asr_counts([]) == AsrCounts()


def test_asr_counts_accepts_members_and_rejects_junk():
    assert asr_counts([PA, PA, DA]) == AsrCounts(pa=2, da=1)
    with pytest.raises(ValueError):
        asr_counts([7])
    with pytest.raises(ValueError):
        asr_counts([0.5])


def test_masb_reference_ratio_example():
    # MASB's month: PA ≈ 68%, DA ≈ 22%, STA+TA ≈ 10% → PA:DA ≈ 3:1.
    c = AsrCounts(idle=40, overloaded=1, sta=4, ta=6, pa=68, da=22)
    assert c.pa_share == pytest.approx(0.68)
    assert c.pa_share / c.da_share == pytest.approx(3.09, abs=0.01)
    assert c.sta_share + c.ta_share == pytest.approx(0.10)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@given(
    P=st.tuples(st.integers(1, 30), st.integers(1, 5)).flatmap(
        lambda nr: hnp.arrays(np.float64, nr, elements=st.floats(0.0, 130.0))
    ),
    data=st.data(),
)
def test_classify_matches_the_definitions(P, data):
    tc = data.draw(hnp.arrays(np.int64, P.shape[0], elements=st.integers(0, 3)))
    codes = classify(P, task_count=tc)
    for row, n, code in zip(P, tc, codes):
        mx, mn = row.max(), row.min()
        if n == 0:
            want = IDLE
        elif mx > 100:
            want = OVER
        elif mx > 90:
            want = STA
        elif mn >= 70:
            want = TA
        elif mx < 70 and mx - mn <= 30:
            want = PA
        else:
            want = DA
        assert code == want
    c = asr_counts(codes)
    assert c.total == P.shape[0]
    if c.active:
        assert sum(c.shares().values()) == pytest.approx(1.0)


# --- node_class: the plain-Python one-node path the node agents use --------------------------------

@pytest.mark.parametrize("p, tasks, want, why", [b for b in BOUNDARIES if b[1] != 0])
def test_node_class_boundaries(p, tasks, want, why):
    # the same table as classify, with capacity 100 so that load == percent
    assert node_class(p, (100.0,) * len(p)) is want, why


@given(
    st.lists(st.tuples(st.floats(0, 400), st.floats(0.1, 64)), min_size=1, max_size=4),
    st.sampled_from([AsrBands(), AsrBands(overload_pct=120, sta_pct=80, ta_low_pct=60, pa_spread_pct=10)]),
)
def test_node_class_agrees_with_classify(rows, bands):
    load = [lo for lo, _ in rows]
    cap = [c for _, c in rows]
    want = classify(100.0 * np.asarray(load) / np.asarray(cap), bands=bands)
    assert node_class(load, cap, bands) is want


@pytest.mark.parametrize("load, cap, msg", [
    ((1.0, 2.0), (1.0,), "same, non-zero number"),
    ((), (), "same, non-zero number"),
    ((1.0,), (0.0,), "capacity must be finite and > 0"),
    ((-1.0,), (1.0,), "load must be finite and ≥ 0"),
    ((math.nan,), (1.0,), "load must be finite"),
])
def test_node_class_bad_input(load, cap, msg):
    with pytest.raises(ValueError, match=msg):
        node_class(load, cap)
