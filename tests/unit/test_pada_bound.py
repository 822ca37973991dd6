"""cellbed.policy.masb.pada_bound: the normal-approximation PA:DA bound and the greedy repacking."""
import math

import numpy as np
import pytest

from cellbed.policy.masb.pada_bound import (classify_counts, pa_share_normal, pada, pada_normal, repack_balanced,
                                            required_sigma, rest_mean)


def test_pada_edge_cases():
    assert pada(3, 1) == 3.0
    assert pada(1, 0) == math.inf
    assert math.isnan(pada(0, 0))


def test_required_sigma_gives_exactly_the_ratio():
    for mu in (50.0, 60.0, 64.0, 69.0):
        s = required_sigma(mu, 3.0)
        assert pada_normal(mu, s) == pytest.approx(3.0, rel=1e-9)
        assert pada_normal(mu, s * 1.1) < 3.0 < pada_normal(mu, s * 0.9)
    assert required_sigma(64.0) == pytest.approx(8.8956, abs=1e-3)   # (70 − 64)/Φ⁻¹(0.75)


def test_required_sigma_at_or_above_the_edge_is_zero():
    assert required_sigma(70.0) == 0.0
    assert required_sigma(75.0) == 0.0
    assert required_sigma(60.0, ratio=1.0) == math.inf    # half below the edge: any σ


def test_packing_lowers_the_rest():
    assert rest_mean(63.0, 0.1, 90.0) == pytest.approx(60.0)
    assert pada_normal(63.0, 10.0, packed_share=0.1) > pada_normal(63.0, 10.0)
    with pytest.raises(ValueError):
        rest_mean(60.0, 1.0)


def test_pa_share_normal_limits():
    assert pa_share_normal(60.0, 0.0) == 1.0
    assert pa_share_normal(70.0, 0.0) == 0.0
    assert pa_share_normal(70.0, 5.0) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pa_share_normal(60.0, -1.0)


def test_classify_counts_spread_test_and_literal_banding():
    p = np.array([[40.0, 65.0], [40.0, 75.0], [20.0, 60.0], [80.0, 80.0], [95.0, 10.0], [101.0, 5.0]])
    c = classify_counts(p)
    assert (c["pa"], c["da"], c["ta"], c["sta"], c["overloaded"]) == (1, 2, 1, 1, 1)
    assert c["da_mask"].tolist() == [False, True, True, False, False, False]
    lit = classify_counts(p, spread=math.inf)
    assert (lit["pa"], lit["da"]) == (2, 1)      # (20, 60) is PA under the digest's literal bands


def test_repack_balances_and_keeps_the_load():
    rng = np.random.default_rng(1)
    cap = np.array([[16.0, 32768.0]] * 50 + [[16.0, 16384.0]] * 30)
    tasks = np.column_stack([rng.gamma(0.5, 1.0, 900), rng.gamma(0.5, 2000.0, 900)])
    p = repack_balanced(tasks, cap)
    assert p.shape == cap.shape
    np.testing.assert_allclose((p / 100.0 * cap).sum(axis=0), tasks.sum(axis=0), rtol=1e-9)
    rel = (p / p.mean(axis=0)).max(axis=1)          # fullest resource relative to the cell's mean use
    assert rel.max() - rel.min() < 0.25
    assert abs(p[50:, 1].mean() - p[:50, 1].mean()) < 5.0   # memory-poor nodes are not left fuller
    with pytest.raises(ValueError):
        repack_balanced(tasks, np.zeros_like(cap))
