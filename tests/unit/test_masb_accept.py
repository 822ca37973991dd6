"""The target's answers (SAN steps 3 and 5), the overload/RUS check and step 4's ordering."""
import random

import numpy as np
import pytest

from cellbed.policy.masb import accept, overload
from cellbed.policy.masb.choose import Acceptor, order_targets
from cellbed.domain.constraints import Constraint, ConstraintOp

T = accept.TargetState("h2", (1.0, 1000.0), (0.5, 400.0), (0.1, 100.0), (0.3, 200.0), {"ssd": 1})


def task(used=(0.2, 100.0), req=(0.3, 200.0), prod=False, cons=()):
    return accept.TaskDemand("t", used, req, prod, tuple(cons))


@pytest.mark.parametrize("t,forced,accepted,reason", [
    (task(), False, True, ""),                                              # 0.5+0.1+0.2 = 0.8 ≤ 0.9
    (task(used=(0.35, 100.0)), False, False, accept.CAPACITY),              # 0.95 > 0.9
    (task(used=(0.35, 100.0)), True, True, ""),                             # forced: total capacity only
    (task(used=(1.2, 100.0)), True, False, accept.CAPACITY),                # larger than the host
    (task(prod=True, req=(0.7, 10.0)), False, False, accept.RUS),           # 0.3+0.7 = 1.0 > 0.9
    (task(cons=[Constraint("ssd", ConstraintOp.EQUAL, 0)]), False, False, accept.CONSTRAINTS),
    (task(cons=[Constraint("ssd", ConstraintOp.EQUAL, 0)]), True, False, accept.CONSTRAINTS),  # always
])
def test_accept_rule(t, forced, accepted, reason):
    a = accept.evaluate(T, t, 0.9, forced=forced)
    assert a.accepted is accepted and a.reason == reason
    if not accepted and reason == accept.CAPACITY and not forced:
        assert a.projected[0] == pytest.approx(0.95) and a.limit[0] == pytest.approx(0.9)
        assert "0.950" in a.detail and "0.9" in a.detail


def test_gpa_fit_is_an_alternative_cpu_test():
    """A spiky host (large σ) passes the sum test but fails the GPA percentile test."""
    spiky = accept.TargetState("h3", (1.0, 1000.0), (0.4, 100.0), (0.0, 0.0), (0.0, 0.0), {},
                               cpu_mean=0.4, cpu_var=0.04, cpu_samples=500)
    t = accept.TaskDemand("t", (0.3, 10.0), (0.3, 10.0), False, (), cpu_mean=0.3, cpu_var=0.01, cpu_samples=500)
    assert accept.evaluate(spiky, t, 0.9, fit="sum").accepted
    a = accept.evaluate(spiky, t, 0.9, fit="gpa")
    assert not a.accepted and a.reason == accept.GPA and a.projected[0] > 0.9


def test_overload_names_resource_and_numbers():
    v = overload.check(overload.HostLoad((1.0, 1000.0), (0.95, 100.0), (0.2, 950.0)), 0.9)
    assert v and v.excess[0] == pytest.approx(0.05)
    assert any("cpu used 0.950 > 0.9" in r for r in v.reasons)
    assert any(r.startswith("RUS: production mem") for r in v.reasons)
    assert not overload.check(overload.HostLoad((1.0, 1000.0), (0.9, 900.0), (0.9, 900.0)), 0.9)


def test_spike_is_a_rise_above_the_threshold():
    assert overload.spike(None, np.array([50.0, 50.0])) == ""
    assert overload.spike(np.array([40.0, 50.0]), np.array([55.0, 55.0]), 10.0) == "cpu +15.0 points"


def test_targets_are_score_weighted_with_forced_last():
    acc = [Acceptor("near90", (1.0, 1000.0), (0.7, 700.0), False), Acceptor("empty", (1.0, 1000.0), (0.0, 0.0), False),
           Acceptor("forced", (1.0, 1000.0), (0.95, 950.0), True)]
    firsts = {}
    for seed in range(400):
        order = order_targets(acc, (0.1, 100.0), random.Random(seed))
        assert order[-1][0].host == "forced" and order[-1][1] == 0.0
        firsts[order[0][0].host] = firsts.get(order[0][0].host, 0) + 1
    # SRAS(80%, 80%) ≈ 0.89 vs SRAS(10%, 10%) ≈ 0.6: chosen first in proportion ≈ 0.6
    share = firsts["near90"] / 400
    assert 0.5 < share < 0.7, firsts
