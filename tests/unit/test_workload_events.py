"""Unit tests for cellbed.workload.events: immutability, bands, constraint matching, merge."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellbed.workload.events import (
    AddNode,
    AddNodeAttributes,
    AddTask,
    Band,
    Constraint,
    ConstraintOp,
    EndReason,
    RemoveNode,
    RemoveNodeAttributes,
    RemoveTask,
    UpdateNodeTotalResources,
    UpdateTaskConstraints,
    UpdateTaskRequiredResources,
    UpdateTaskUsedResources,
    band_of,
    check_ordered,
    constraints_match,
    merge,
)


def _task(t=0, job=1, idx=0, prio=9, **kw):
    args = dict(user="u", priority=prio, scheduling_class=2, cpu_request=0.0625, mem_request=0.03125)
    args.update(kw)
    return AddTask(t, job, idx, **args)


ALL_EVENTS = [
    _task(),
    UpdateTaskRequiredResources(1, 1, 0, 4, 1, 0.01, 0.02),
    UpdateTaskUsedResources(2, 1, 0, None, 0, 2, 0.01, 0.02),
    UpdateTaskConstraints(3, 1, 0, (Constraint("a", ConstraintOp.EQUAL, 1),)),
    RemoveTask(4, 1, 0, EndReason.FINISH),
    AddNode(0, 7, 0.5, 0.25, "B"),
    UpdateNodeTotalResources(1, 7, 0.5, 0.5),
    AddNodeAttributes(2, 7, (("a", 1),)),
    RemoveNodeAttributes(3, 7, ("a",)),
    RemoveNode(4, 7),
]


@pytest.mark.parametrize("ev", ALL_EVENTS, ids=lambda e: type(e).__name__)
def test_events_are_frozen_slotted_and_hashable(ev):
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.time_us = 99
    assert not hasattr(ev, "__dict__")  # __slots__ all the way down
    assert hash(ev) == hash(dataclasses.replace(ev))
    assert ev == dataclasses.replace(ev)


def test_events_of_different_types_with_equal_fields_differ():
    # dataclass equality includes the class: same node and time, different meaning
    assert RemoveNode(4, 7) != AddNode(4, 7, 0.0, 0.0)
    assert RemoveTask(4, 1, 0, EndReason.KILL) != RemoveTask(4, 1, 0, EndReason.FAIL)


@pytest.mark.parametrize(
    "priority, band",
    [(0, Band.FREE), (1, Band.FREE), (2, Band.MIDDLE), (8, Band.MIDDLE), (9, Band.PRODUCTION), (11, Band.PRODUCTION)],
)
def test_band_boundaries_follow_gcd(priority, band):
    # digest §E.6: free 0–1, middle 2–8, production 9–11
    assert band_of(priority) == band
    assert _task(prio=priority).band == band


@pytest.mark.parametrize("priority", [-1, 12])
def test_priority_outside_0_11_is_rejected(priority):
    with pytest.raises(ValueError, match="priority"):
        band_of(priority)
    with pytest.raises(ValueError, match=r"AddTask.priority must be in 0..11"):
        _task(prio=priority)
    with pytest.raises(ValueError, match="priority"):
        UpdateTaskRequiredResources(0, 1, 0, priority, None, 0.1, 0.1)


def test_negative_request_is_rejected():
    with pytest.raises(ValueError, match="requests must be >= 0"):
        _task(cpu_request=-0.1)


def test_end_reason_codes_are_gcd_event_types():
    # digest §E.2: EVICT 2, FAIL 3, FINISH 4, KILL 5, LOST 6
    assert [int(r) for r in (EndReason.EVICT, EndReason.FAIL, EndReason.FINISH, EndReason.KILL, EndReason.LOST)] == [
        2, 3, 4, 5, 6]
    assert [int(o) for o in ConstraintOp] == [0, 1, 2, 3]


def test_task_key_and_attribute_dict():
    assert _task(job=5, idx=3).task_key == (5, 3)
    assert RemoveTask(0, 5, 3, EndReason.LOST).task_key == (5, 3)
    assert AddNodeAttributes(0, 1, (("a", 1), ("b", "x"))).as_dict() == {"a": 1, "b": "x"}


NODE = {"arch": "x86", "cores": 8, "ssd": 1}


@pytest.mark.parametrize(
    "constraint, expected",
    [
        (Constraint("arch", ConstraintOp.EQUAL, "x86"), True),
        (Constraint("arch", ConstraintOp.EQUAL, "arm"), False),
        (Constraint("gpu", ConstraintOp.EQUAL, 1), False),  # absent attribute never equals
        (Constraint("arch", ConstraintOp.NOT_EQUAL, "arm"), True),
        (Constraint("arch", ConstraintOp.NOT_EQUAL, "x86"), False),
        (Constraint("gpu", ConstraintOp.NOT_EQUAL, 1), True),  # absent attribute differs from anything
        (Constraint("cores", ConstraintOp.GREATER_THAN, 4), True),  # 8 > 4
        (Constraint("cores", ConstraintOp.GREATER_THAN, 8), False),  # 8 > 8 is false
        (Constraint("cores", ConstraintOp.LESS_THAN, 16), True),  # 8 < 16
        (Constraint("cores", ConstraintOp.LESS_THAN, 8), False),
        (Constraint("arch", ConstraintOp.LESS_THAN, 3), False),  # non-integer attribute: no order
        (Constraint("gpu", ConstraintOp.GREATER_THAN, 0), False),  # absent attribute: no order
    ],
)
def test_constraint_matching(constraint, expected):
    assert constraint.matches(NODE) is expected


def test_constraints_match_is_a_conjunction():
    ok = Constraint("ssd", ConstraintOp.EQUAL, 1)
    bad = Constraint("arch", ConstraintOp.EQUAL, "arm")
    assert constraints_match((), NODE)
    assert constraints_match((ok,), NODE)
    assert not constraints_match((ok, bad), NODE)


def test_merge_orders_by_time_with_stable_tiebreak():
    a = [RemoveNode(1, 1), RemoveNode(5, 2), RemoveNode(5, 3)]
    b = [RemoveNode(0, 10), RemoveNode(5, 11), RemoveNode(9, 12)]
    out = [e.node_id for e in merge(a, b)]
    # ties at t=5: all of stream a (in its own order) before stream b
    assert out == [10, 1, 2, 3, 11, 12]


def test_merge_is_lazy():
    def forever(start):
        for t in itertools.count(start, 2):
            yield RemoveNode(t, t)

    out = list(itertools.islice(merge(forever(0), forever(1)), 6))
    assert [e.time_us for e in out] == [0, 1, 2, 3, 4, 5]


def test_merge_rejects_unordered_input():
    with pytest.raises(ValueError, match="not time-ordered"):
        list(merge([RemoveNode(2, 1), RemoveNode(1, 2)]))
    with pytest.raises(ValueError, match="my stream is not time-ordered"):
        list(check_ordered([RemoveNode(2, 1), RemoveNode(1, 2)], "my stream"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 20), max_size=15).map(sorted), min_size=1, max_size=5))
def test_merge_equals_stable_sort_of_the_concatenation(time_lists):
    streams = [[RemoveNode(t, 1000 * i + j) for j, t in enumerate(ts)] for i, ts in enumerate(time_lists)]
    flat = [(e.time_us, i, j, e) for i, s in enumerate(streams) for j, e in enumerate(s)]
    expected = [e for *_, e in sorted(flat, key=lambda x: x[:3])]
    assert list(merge(*streams)) == expected
