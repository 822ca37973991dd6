"""An LM's cluster state under a changing cell (cellbed.policy.megha.validation, pure): a host's
capacity or attributes change (a machine UPDATE, REMOVE as (0, 0), ADD back), and a running
task's request changes in place."""
import pytest

from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.policy.megha.validation import ClusterState, LmTask


def cluster() -> ClusterState:
    # two hosts of 4 cores / 8192 MiB, owned by gm1 and gm2
    return ClusterState(["h0", "h1"], [4.0, 4.0], [8192.0, 8192.0], [{"rack": "a"}, {"rack": "b"}], ["gm1", "gm2"])


def task(c: ClusterState, name: str, host: int, cpu: float, mem: float, start: float, logical=False) -> LmTask:
    t = LmTask(name, "u", cpu, mem, host, 1 if logical else host, logical, start_unix_s=start)
    c.allocate(t)
    return t


def test_a_shrunk_host_lists_the_newest_tasks_that_no_longer_fit():
    c = cluster()
    task(c, "old", 0, 2.0, 1000, start=1.0)
    task(c, "mid", 0, 1.0, 1000, start=2.0)
    task(c, "new", 0, 1.0, 1000, start=3.0)
    digest, version = c.digest, c.version
    # 4 cores used; shrink to 2.5: stopping "new" (→ 3) is not enough, "mid" too (→ 2)
    assert c.set_host(0, cpu=2.5) == ["new", "mid"]
    assert c.total_cpu[0] == 2.5 and c.cap_cpu[0] == 2.5 and c.digest != digest and c.version > version
    assert c.set_host(0, cpu=0.0, mem=0.0) == ["new", "mid", "old"]              # removal: all of them
    assert c.set_host(0, cpu=4.0, mem=8192.0) == [] and c.free(0) == (0.0, 8192.0 - 3000)


def test_a_loan_stays_when_its_host_changes_and_capacity_counts_it():
    c = cluster()
    task(c, "lent", 0, 1.0, 512, start=1.0, logical=True)          # N' = 1 core cut out of h0 for gm2
    assert c.cap_cpu[0] == 3.0
    c.set_host(0, cpu=6.0)
    assert (c.total_cpu[0], c.cap_cpu[0]) == (6.0, 5.0)
    c.check_invariants()


def test_new_attributes_change_which_hosts_satisfy_a_constraint():
    c = cluster()
    b = Constraint("rack", ConstraintOp.EQUAL, "b")
    assert [c.satisfies(h, [b]) for h in (0, 1)] == [False, True]
    c.set_host(0, attributes={"rack": "b"})
    assert [c.satisfies(h, [b]) for h in (0, 1)] == [True, True] and c.attributes[0] == {"rack": "b"}


def test_a_task_is_resized_in_place_only_if_its_host_has_the_room():
    c = cluster()
    t = task(c, "t", 1, 1.0, 1000, start=1.0)
    task(c, "other", 1, 2.0, 1000, start=1.0)
    assert c.resize("t", 2.0, 2000) and c.tasks["t"] is t and (t.cpu, t.mem) == (2.0, 2000.0)
    assert c.free(1) == (0.0, 8192.0 - 3000) and c.usage["u"][:2] == [4.0, 3000.0]
    assert not c.resize("t", 2.5, 2000)                             # 0.5 core more than h1 has
    assert (t.cpu, c.used_cpu[1]) == (2.0, 4.0)
    c.check_invariants()


def test_a_loan_grows_out_of_its_node():
    c = cluster()
    t = task(c, "lent", 0, 1.0, 512, start=1.0, logical=True)
    assert c.resize("lent", 3.0, 512) and c.cap_cpu[0] == pytest.approx(1.0) and t.cpu == 3.0
    assert not c.resize("lent", 4.5, 512)
    c.check_invariants()
