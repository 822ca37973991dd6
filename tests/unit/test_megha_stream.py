"""How the Megha model cell reads a stream (cellbed.model.megha_stream, pure): runs and their own
durations (a resubmission is a run of its own, the evicted run counts), updates folded at the
arrival instant or kept as actions with the run's whole request, machines and their states."""
import pytest

from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.model.megha_stream import NodeState, RunEnd, TaskUpdate, read_stream
from cellbed.workload import events as ev

S = 1_000_000
USERS = ("u1", "u2")
C_A = Constraint("rack", ConstraintOp.EQUAL, "a")


def plan(events, duration_s=300.0):
    return read_stream(events, duration_s, USERS)


def test_a_resubmitted_task_is_a_run_of_its_own_and_the_evicted_run_counts():
    p = plan([ev.AddNode(0, 1, 0.5, 0.5),
              ev.AddTask(10 * S, 1, 0, "x", 5, 1, 0.01, 0.01), ev.RemoveTask(50 * S, 1, 0, ev.EndReason.EVICT),
              ev.AddTask(60 * S, 1, 0, "x", 5, 1, 0.01, 0.01), ev.RemoveTask(200 * S, 1, 0, ev.EndReason.FINISH),
              ev.AddTask(250 * S, 1, 0, "x", 5, 1, 0.01, 0.01)])
    # evicted run: 10→50 s; its resubmission 60→200 s; the third runs until the run ends (0)
    assert [(t, x.name, x.duration_s) for t, x in p.arrivals] == [
        (10.0, "t1-0", 40.0), (60.0, "t1-0-r1", 140.0), (250.0, "t1-0-r2", 0.0)]
    assert p.ends == {"t1-0": RunEnd(50.0, ev.EndReason.EVICT), "t1-0-r1": RunEnd(200.0, ev.EndReason.FINISH)}
    assert (p.counts["resubmissions"], p.counts["tasks_ended_evict"], p.counts["tasks_ended_finish"]) == (2, 1, 1)


def test_runs_at_zero_are_the_warm_start_and_requests_are_scaled():
    p = plan([ev.AddTask(0, 7, 3, "x", 5, 1, 0.5, 0.25, constraints=(C_A,))])
    ((t, task),) = p.warm
    assert t == 0.0 and p.arrivals == [] and task.name == "t7-3" and task.user in USERS
    assert (task.request.cpu_cores, task.request.mem_mib) == (16.0, 16384)      # 0.5 × 32 cores, 0.25 × 64 GiB
    assert task.constraints[0].attribute == "rack"


def test_an_update_at_the_arrival_instant_is_folded_and_a_later_one_is_an_action():
    p = plan([ev.AddNode(0, 1, 0.5, 0.5),                 # times count from the stream's first event
              ev.AddTask(5 * S, 2, 0, "x", 5, 1, 0.1, 0.1),
              ev.UpdateTaskConstraints(5 * S, 2, 0, (C_A,)),
              ev.UpdateTaskRequiredResources(9 * S, 2, 0, 6, 1, 0.2, 0.05),
              ev.UpdateTaskConstraints(12 * S, 2, 0, ())])
    ((_, task),) = p.arrivals
    assert [c.attribute for c in task.constraints] == ["rack"] and task.request.cpu_cores == pytest.approx(3.2)
    assert p.actions == [
        (9.0, TaskUpdate("t2-0", 0.2, 0.05, 6, (C_A,), "request")),          # the whole request after it
        (12.0, TaskUpdate("t2-0", 0.2, 0.05, 6, (), "constraints"))]
    assert (p.counts["constraints_updates_folded"], p.counts["request_updates"], p.counts["constraints_updates"]) == \
        (1, 1, 1)


def test_machines_and_their_later_states():
    p = plan([ev.AddNode(0, 4, 0.5, 0.5), ev.AddNodeAttributes(0, 4, (("rack", "a"),)),
              ev.AddNode(0, 9, 1.0, 1.0),
              ev.UpdateNodeTotalResources(20 * S, 4, 0.25, 0.5),
              ev.RemoveNode(30 * S, 9), ev.AddNode(40 * S, 9, 1.0, 1.0), ev.AddNodeAttributes(40 * S, 9, (("g", 1),)),
              ev.AddNode(50 * S, 11, 0.5, 0.25)])
    assert [(m.node_id, m.cpu, m.mem, m.attributes, m.present) for m in p.machines] == [
        (4, 0.5, 0.5, {"rack": "a"}, True), (9, 1.0, 1.0, {}, True), (11, 0.5, 0.25, {}, False)]
    assert p.actions == [
        (20.0, NodeState(4, True, 0.25, 0.5, (("rack", "a"),))),
        (30.0, NodeState(9, False, 1.0, 1.0, ())),
        (40.0, NodeState(9, True, 1.0, 1.0, (("g", 1),))),                    # one action for the instant
        (50.0, NodeState(11, True, 0.5, 0.25, ()))]


def test_reading_stops_at_the_duration():
    p = plan([ev.AddTask(0, 1, 0, "x", 5, 1, 0.1, 0.1), ev.RemoveTask(400 * S, 1, 0, ev.EndReason.FINISH),
              ev.AddTask(500 * S, 2, 0, "x", 5, 1, 0.1, 0.1)], duration_s=300.0)
    assert [x.name for _, x in p.warm + p.arrivals] == ["t1-0"] and p.ends == {}
    assert p.warm[0][1].duration_s == 0.0                                      # runs until the run ends
