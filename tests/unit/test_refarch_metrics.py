"""The reference architecture's job metrics (seed 002 §V-A), on a hand-computed example: the
arithmetic is in the comments."""
import math

import pytest

from cellbed.experiment.report.jobs import job_metrics

# job 0: two tasks submitted at 10 s. a runs 30 s from 12 s; b waits, runs 50 s from 40 s.
# job 1: one task submitted at 20 s, runs 10 s from 20 s (no wait).
# job 2: one task submitted at 30 s, never started (unfinished).
TASKS = {"task": ["a", "b", "c", "d"], "job": [0, 0, 1, 2], "arrival_s": [10.0, 10.0, 20.0, 30.0],
         "duration_s": [30.0, 50.0, 10.0, 5.0]}
STARTS = {"a": 12.0, "b": 40.0, "c": 20.0}


def test_the_metrics_of_a_hand_computed_example():
    m = job_metrics(TASKS, STARTS)
    # TRT = start + duration - arrival: a 12+30-10 = 32, b 40+50-10 = 80, c 20+10-20 = 10
    assert m["tasks"] == 3 and m["trt_mean_s"] == pytest.approx((32 + 80 + 10) / 3)
    assert m["trt_p50_s"] == pytest.approx(32.0)
    # JMS = last completion - first submission: job 0 max(42, 90) - 10 = 80; job 1 30 - 20 = 10
    assert m["jms_mean_s"] == pytest.approx((80 + 10) / 2)
    # NJSL = JMS / longest task (a bag of tasks' critical path): job 0 80/50 = 1.6, job 1 10/10 = 1
    assert m["njsl_mean"] == pytest.approx((1.6 + 1.0) / 2)
    # JWT = first start - first submission: job 0 12 - 10 = 2, job 1 20 - 20 = 0
    assert m["jwt_mean_s"] == pytest.approx((2 + 0) / 2)
    assert (m["jobs"], m["jobs_unfinished"]) == (2, 1)      # job 2's task never started


def test_nothing_started_gives_no_numbers_not_zeros():
    m = job_metrics(TASKS, {})
    assert m["jobs"] == 0 and m["jobs_unfinished"] == 3 and math.isnan(m["trt_mean_s"]) and math.isnan(m["jms_mean_s"])
