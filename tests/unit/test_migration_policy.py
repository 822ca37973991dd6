"""Decisions taken while a live migration runs (cellbed/policy/migration/timeout.py): the
post-copy switch and the completion-timeout policies (DESIGN §6)."""

from __future__ import annotations

import pytest

from cellbed.domain.vm import JobProgress, MigrationOptions, TimeoutPolicy
from cellbed.policy.migration.timeout import (Action, JobWatch, POSTCOPY_AFTER_ITERATION, needs_postcopy_flag, next_action)

ABORT, AUTO, POST = TimeoutPolicy.ABORT, TimeoutPolicy.AUTO_CONVERGE, TimeoutPolicy.POSTCOPY
C, SW, AB, RETRY = Action.CONTINUE, Action.SWITCH_POSTCOPY, Action.ABORT, Action.ABORT_AND_RETRY_AUTO_CONVERGE

# Each row: name, options, memory_iteration, elapsed_s, switched, timed_out -> action, timeout flag.
# The completion timeout fires only when elapsed > timeout (strictly) and it has not fired before.
CASES = [
    # --- post-copy after the first full pass (iteration 2 has begun)
    ("postcopy, iteration 0", MigrationOptions(postcopy=True), 0, 1.0, False, False, C, False),
    ("postcopy, iteration 1", MigrationOptions(postcopy=True), 1, 1.0, False, False, C, False),
    ("postcopy, iteration 2", MigrationOptions(postcopy=True), 2, 1.0, False, False, SW, False),
    ("postcopy, iteration 7", MigrationOptions(postcopy=True), 7, 1.0, False, False, SW, False),
    ("no postcopy, iteration 5", MigrationOptions(), 5, 1.0, False, False, C, False),
    ("postcopy already switched", MigrationOptions(postcopy=True), 5, 1.0, True, False, C, False),
    # --- timeout 10 s: 10.0 is not > 10.0; 10.5 is
    ("abort, at timeout 10.0 = 10", MigrationOptions(completion_timeout_s=10), 1, 10.0, False, False, C, False),
    ("abort, 10.5 > 10", MigrationOptions(completion_timeout_s=10), 1, 10.5, False, False, AB, True),
    ("auto-converge, 10.5 > 10",
     MigrationOptions(completion_timeout_s=10, timeout_policy=AUTO), 1, 10.5, False, False, RETRY, True),
    ("auto-converge already on, 10.5 > 10",
     MigrationOptions(completion_timeout_s=10, timeout_policy=AUTO, auto_converge=True), 1, 10.5, False, False,
     AB, True),
    ("postcopy policy, 10.5 > 10",
     MigrationOptions(completion_timeout_s=10, timeout_policy=POST), 1, 10.5, False, False, SW, True),
    ("postcopy policy before timeout, iteration 3",
     MigrationOptions(completion_timeout_s=10, timeout_policy=POST), 3, 9.0, False, False, C, False),
    # --- once acted on, the timeout never fires again; once switched, nothing more happens
    ("abort, timeout already fired", MigrationOptions(completion_timeout_s=10), 1, 99.0, False, True, C, False),
    ("postcopy policy, already switched",
     MigrationOptions(completion_timeout_s=10, timeout_policy=POST), 1, 99.0, True, True, C, False),
    ("switched, timeout not yet handled",
     MigrationOptions(completion_timeout_s=10, timeout_policy=AUTO), 1, 99.0, True, False, C, False),
    # --- timeout 0 = never, however long it runs
    ("timeout 0, abort", MigrationOptions(completion_timeout_s=0), 1, 1e6, False, False, C, False),
    ("timeout 0, auto-converge",
     MigrationOptions(completion_timeout_s=0, timeout_policy=AUTO), 1, 1e6, False, False, C, False),
    ("timeout 0, postcopy policy",
     MigrationOptions(completion_timeout_s=0, timeout_policy=POST), 1, 1e6, False, False, C, False),
    # --- explicit post-copy switch (iteration ≥ 2) wins over the timeout and is not a timeout action
    ("postcopy + timeout, iteration 2",
     MigrationOptions(postcopy=True, completion_timeout_s=10), 2, 10.5, False, False, SW, False),
]


@pytest.mark.parametrize(("opts", "iteration", "elapsed", "switched", "timed_out", "action", "timeout"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_next_action(opts, iteration, elapsed, switched, timed_out, action, timeout):
    d = next_action(opts, JobProgress(memory_iteration=iteration, data_remaining=4096), elapsed,
                    switched=switched, timed_out=timed_out)
    assert d.action is action, d.why
    assert d.timeout is timeout
    if action is not C:
        assert d.why  # the log line carries a reason


def test_postcopy_threshold_is_iteration_two():
    assert POSTCOPY_AFTER_ITERATION == 2


def test_timeout_reason_carries_the_numbers():
    d = next_action(MigrationOptions(completion_timeout_s=10), JobProgress(memory_iteration=3, data_remaining=4096),
                    12.3, switched=False, timed_out=False)
    assert "12.3 s > timeout 10.0 s" in d.why
    assert "iteration 3" in d.why and "4096 B" in d.why


NEEDS_FLAG = [
    # postcopy, policy, flag needed
    (False, ABORT, False),
    (False, AUTO, False),
    (False, POST, True),    # a timeout switch needs post-copy enabled at start
    (True, ABORT, True),
    (True, AUTO, True),
    (True, POST, True),
]


@pytest.mark.parametrize(("postcopy", "policy", "want"), NEEDS_FLAG)
def test_needs_postcopy_flag(postcopy, policy, want):
    assert needs_postcopy_flag(MigrationOptions(postcopy=postcopy, timeout_policy=policy)) is want


def test_job_watch_records_a_timeout_once_and_marks_the_auto_converge_retry():
    """JobWatch is the backend's memory of one job: the first timeout names its action, a second
    sample after it does not fire again, and ABORT_AND_RETRY_AUTO_CONVERGE asks for the retry."""
    opts = MigrationOptions(completion_timeout_s=10.0, timeout_policy=TimeoutPolicy.AUTO_CONVERGE)
    w = JobWatch()
    assert w.decide(opts, JobProgress(memory_iteration=1), 5.0).action is Action.CONTINUE
    assert not w.timed_out and not w.retry_auto_converge and w.action_taken == ""
    d = w.decide(opts, JobProgress(memory_iteration=4, data_remaining=123), 11.0)
    assert d.action is Action.ABORT_AND_RETRY_AUTO_CONVERGE and d.timeout
    assert w.timed_out and w.retry_auto_converge
    assert w.action_taken.startswith("abort-retry-auto-converge: not complete after 11.0 s")
    assert w.decide(opts, JobProgress(memory_iteration=5), 12.0).action is Action.CONTINUE   # once only


def test_job_watch_plain_abort_does_not_ask_for_a_retry():
    w = JobWatch()
    d = w.decide(MigrationOptions(completion_timeout_s=1.0, timeout_policy=TimeoutPolicy.ABORT), JobProgress(), 2.0)
    assert d.action is Action.ABORT and w.timed_out and not w.retry_auto_converge
