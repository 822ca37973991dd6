"""The broker's cache (timestamps, expiry, newest wins, constraints) and its choices
(GetCandidateNodes with sampling and forced candidates; initial allocation)."""
import numpy as np
import pytest

from cellbed.domain import wire
from cellbed.broker.cache import NodeCache
from cellbed.policy.masb.broker_select import BrokerParams, candidates, initial, rus_ok
from cellbed.v1 import masb_pb2 as masbpb
from cellbed.domain.constraints import Constraint, ConstraintOp


def rep(host, ts, used=(0.5, 500.0), cap=(1.0, 1000.0), attrs=None, req=(0.5, 500.0), prod=(0.0, 0.0)):
    return masbpb.NodeReport(host=host, capacity=wire.resources(*cap), used=wire.resources(*used),
                          requested=wire.resources(*req), prod_requested=wire.resources(*prod),
                          attributes=wire.attributes_pb(attrs or {}), sampled_unix_s=ts)


def test_newest_measurement_wins_and_old_entries_expire():
    c = NodeCache(expiry_s=300)
    assert c.update(rep("a", 100.0, used=(0.1, 1.0)))
    assert not c.update(rep("a", 50.0, used=(0.9, 1.0)))     # older: ignored
    assert c.used[c.index["a"]][0] == pytest.approx(0.1)
    assert c.update(rep("b", 10.0))
    assert list(c.fresh(200.0)) == [0, 1]
    assert [c.hosts[i] for i in c.fresh(320.0)] == ["a"]     # b measured at 10 s: older than 300 s
    assert c.expire(320.0) == ["b"] and len(c) == 1
    assert c.update(rep("b", 330.0)) and len(c) == 2          # a node that reports again comes back


def test_constraint_matching_is_vectorised_with_gcd_semantics():
    c = NodeCache()
    for h, attrs in (("x", {"ssd": 1, "rack": "r1"}), ("y", {"ssd": 0}), ("z", {})):
        c.update(rep(h, 1.0, attrs=attrs))
    idx = np.arange(3)
    m = lambda *cs: [c.hosts[i] for i in idx[c.match(idx, cs)]]
    assert m(Constraint("ssd", ConstraintOp.EQUAL, 1)) == ["x"]
    assert m(Constraint("ssd", ConstraintOp.NOT_EQUAL, 1)) == ["y", "z"]     # absent counts as different
    assert m(Constraint("ssd", ConstraintOp.LESS_THAN, 1)) == ["y"]
    assert m(Constraint("ssd", ConstraintOp.GREATER_THAN, 0), Constraint("rack", ConstraintOp.EQUAL, "r1")) == ["x"]
    c.update(rep("x", 2.0, attrs={"rack": "r1"}))                             # ssd removed
    assert m(Constraint("ssd", ConstraintOp.EQUAL, 1)) == []


def test_candidates_are_sampled_by_score_and_forced_when_nothing_has_room():
    rng = np.random.default_rng(0)
    cap = np.array([[1.0, 1000.0]] * 4)
    used = np.array([[0.7, 700.0], [0.1, 100.0], [0.95, 950.0], [0.85, 850.0]])
    pool = np.arange(4)
    p = BrokerParams(candidate_count=2)
    res = candidates(pool, np.ones(4, bool), cap, used, np.array([0.1, 100.0]), rng, p)
    hosts = sorted(pk.index for pk in res.picks)
    assert hosts == [0, 1] and not any(pk.forced for pk in res.picks)      # 2 and 3 would exceed 90%
    assert res.scanned == 4
    # nothing has room for a big task: forced candidates whose total capacity fits
    res = candidates(pool, np.ones(4, bool), cap, used, np.array([0.85, 100.0]), rng, p)
    assert res.picks and all(pk.forced and pk.score == 0.0 for pk in res.picks)
    # the scan limit bounds the work
    res = candidates(pool, np.ones(4, bool), cap, used, np.array([0.1, 100.0]), rng,
                     BrokerParams(realloc_scan_limit=1))
    assert res.scanned == 1


def test_initial_allocation_prefers_sias_then_falls_back_on_use():
    cap = np.array([[1.0, 1000.0]] * 3)
    req = np.array([[0.2, 200.0], [0.6, 600.0], [0.95, 950.0]])
    used = np.array([[0.1, 100.0], [0.3, 300.0], [0.2, 100.0]])
    ranked, scanned, sc = initial(np.arange(3), np.ones(3, bool), cap, req, used, np.array([0.05, 50.0]),
                                  BrokerParams())
    assert [p.index for p in ranked] == [0, 1, 2] and sc[2] == 0.0 and scanned == 3
    assert rus_ok(np.array([[0.8, 0.0]]), cap[:1], np.array([0.2, 0.0]), 0.9).tolist() == [False]


def test_initial_limit_keeps_the_head_of_the_same_ranking():
    rng = np.random.default_rng(7)
    n = 60
    cap = np.tile([4.0, 16384.0], (n, 1))
    req = cap * rng.uniform(0.0, 1.1, (n, 2))          # some nodes score 0 (requests above 90 %)
    used = req * rng.uniform(0.2, 0.9, (n, 1))
    task = np.array([0.25, 512.0])
    full, _, _ = initial(np.arange(n), np.ones(n, bool), cap, req, used, task, BrokerParams())
    assert any(p.score == 0.0 for p in full) and any(p.score > 0 for p in full)   # both parts exercised
    positive = sum(p.score > 0 for p in full)
    for limit in (1, 3, positive, positive + 2, n):
        head, _, _ = initial(np.arange(n), np.ones(n, bool), cap, req, used, task, BrokerParams(), limit=limit)
        assert head == full[:limit], limit


def test_a_failed_launch_takes_its_load_back_unless_a_newer_report_replaced_the_entry():
    c = NodeCache()
    c.update(rep("a", 100.0, used=(0.2, 200.0), req=(0.3, 300.0), prod=(0.1, 100.0)))
    i = c.index["a"]
    at = c.add_load("a", (0.1, 50.0), (0.2, 100.0), production=True)
    assert at == 100.0 and c.used[i].tolist() == pytest.approx([0.3, 250.0])
    assert c.undo_load("a", (0.1, 50.0), (0.2, 100.0), True, at)
    assert (c.used[i].tolist(), c.req[i].tolist(), c.prod[i].tolist()) == (
        pytest.approx([0.2, 200.0]), pytest.approx([0.3, 300.0]), pytest.approx([0.1, 100.0]))
    at = c.add_load("a", (0.1, 50.0), (0.2, 100.0))
    c.update(rep("a", 160.0, used=(0.25, 210.0), req=(0.35, 310.0)))   # the node reported meanwhile
    assert not c.undo_load("a", (0.1, 50.0), (0.2, 100.0), False, at)
    assert c.used[i].tolist() == pytest.approx([0.25, 210.0])            # the report stands as measured
    assert c.add_load("zz", (0.1, 1.0), (0.1, 1.0)) is None and not c.undo_load("zz", (0.1, 1.0), (0.1, 1.0), False, None)
