"""The sampling scheduler's claim after a report (issue 27's randomized run): a task whose end was
reported is no longer claimable, and a claim of it is refused, not an INTERNAL KeyError."""
import numpy as np

from cellbed.v1 import megha_pb2 as meghapb
from controller.megha.sampling import SamplingScheduler


def scheduler() -> SamplingScheduler:
    return SamplingScheduler("sched1", None, None, np.random.default_rng(0), hosts=["s1"], cap_cpu=[4.0],
                             cap_mem=[4096.0], attributes=[{}])


def test_a_claim_of_a_reported_task_is_refused_and_counted():
    s = scheduler()
    s.tasks["t1"] = (meghapb.MeghaTask(name="t1"), None)
    s.unbound.add("t1")
    s.report(meghapb.TaskEvent(name="t1", kind=meghapb.TASK_EVENT_KIND_STARTED + 1))   # not STARTED: a failure
    r = s.claim(meghapb.ClaimTaskRequest(worker="s1", task="t1"))
    assert r.granted is False and s.counters["claims_refused"] == 1
    assert "t1" not in s.unbound


def test_a_claim_of_a_task_the_scheduler_does_not_hold_is_refused():
    s = scheduler()
    s.unbound.add("ghost")                      # claimable by the set, unknown to the table
    r = s.claim(meghapb.ClaimTaskRequest(worker="s1", task="ghost"))
    assert r.granted is False and s.counters["claims_refused"] == 1


def test_an_unbound_task_is_claimed_once():
    s = scheduler()
    s.tasks["t2"] = (meghapb.MeghaTask(name="t2"), None)
    s.unbound.add("t2")
    first = s.claim(meghapb.ClaimTaskRequest(worker="s1", task="t2"))
    second = s.claim(meghapb.ClaimTaskRequest(worker="s1", task="t2"))
    assert (first.granted, first.task.name, second.granted) == (True, "t2", False)
