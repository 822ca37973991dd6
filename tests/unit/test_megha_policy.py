"""Megha's pure policy (seed 001 §IV): constraint bit-vectors and first fit, an LM's true state
(partitions, repartition at resource granularity, validation, preemption), a GM's view and
its round-robin match, Algorithm 2, allocation-time bookkeeping, queues and the queue store."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cellbed.policy.megha import fairness
from cellbed.controller.megha.alloc import AllocClock, percentiles, record, summarize
from cellbed.policy.megha.validation import EXTERNAL, INTERNAL, PREEMPTION, ClusterState, LmTask, Refusal, blocks
from cellbed.policy.megha.match import HostBits, PartitionBits, first_fit, match_partition
from cellbed.controller.megha.queues import FileQueueStore, MemoryQueueStore, UserQueues
from cellbed.policy.megha.view import View
from cellbed.controller.megha.workload import ArrivalConfig, arrivals
from cellbed.v1 import megha_pb2 as meghapb
from cellbed.domain.constraints import Constraint, ConstraintOp

EQ, NE = ConstraintOp.EQUAL, ConstraintOp.NOT_EQUAL
A0, A1 = Constraint("a0", EQ, 1), Constraint("a1", EQ, 1)
NOT_A1 = Constraint("a1", NE, 1)

# Five hosts: attributes and free (cores, MiB)
ATTRS = [{"a0": 1}, {"a0": 1, "a1": 1}, {}, {"a1": 1}, {"a0": 1, "a1": 1}]


# --- bit-vectors and first fit (Algorithm 1) ----------------------------------------------------------
def test_bit_vectors_and_first_fit():
    bits = HostBits(ATTRS)
    assert bits.vector(A0).tolist() == [True, True, False, False, True]
    assert bits.vector(NOT_A1).tolist() == [True, False, True, False, False]   # absent counts as "not equal"
    part = PartitionBits(bits, np.arange(5))
    assert part.candidates([A0, A1]).tolist() == [False, True, False, False, True]   # a0 AND a1
    assert part.candidates([]).all()
    free_c = np.array([4.0, 0.5, 4.0, 4.0, 2.0])
    free_m = np.array([1024.0, 1024.0, 1024.0, 1024.0, 1024.0])
    # hosts 1 and 4 match; host 1 has 0.5 cores < 1.0 needed -> the first fit is host 4
    assert match_partition(part, [A0, A1], free_c, free_m, 1.0, 512) == 4
    # memory decides too: nobody has 2048 MiB
    assert match_partition(part, [A0], free_c, free_m, 1.0, 2048) == -1
    assert first_fit(np.zeros(0, dtype=bool), np.zeros(0), np.zeros(0), 1, 1) == -1


def test_partition_vectors_cover_only_its_hosts_and_are_cached():
    bits = HostBits(ATTRS)
    part = PartitionBits(bits, np.array([3, 4]))          # a partition of hosts 3 and 4
    v = part.vector(A0)
    assert v.tolist() == [False, True]
    assert part.vector(A0) is v                          # computed once per (partition, constraint)
    free = np.full(5, 8.0)
    assert match_partition(part, [A0], free, free, 1, 1) == 4   # LM host index, not partition position


def test_twenty_one_constraints_and_a_thousand_nodes():
    rng = np.random.default_rng(1)
    attrs = [{f"attr{j:02d}": 1 for j in range(21) if rng.random() < 0.9} for _ in range(1000)]
    cons = [Constraint(f"attr{j:02d}", EQ, 1) for j in range(21)]
    bits = HostBits(attrs)
    part = PartitionBits(bits, np.arange(1000))
    want = [i for i, a in enumerate(attrs) if len(a) == 21]
    free = np.ones(1000)
    assert np.flatnonzero(part.candidates(cons)).tolist() == want
    assert match_partition(part, cons, free, free, 1, 1) == (want[0] if want else -1)


# --- the LM's true state ---------------------------------------------------------------------------------
def cluster(n=4, gms=("g1", "g2"), cpu=4.0, mem=4096.0) -> ClusterState:
    return ClusterState([f"h{i}" for i in range(n)], [cpu] * n, [mem] * n, [{"a0": 1}] * n, list(gms))


def test_blocks_partition_hosts_equally():
    assert blocks(4, 2) == [0, 0, 1, 1]
    assert blocks(5, 2) == [0, 0, 0, 1, 1]
    assert blocks(3, 3) == [0, 1, 2]


def test_launch_is_validated_against_the_owner_and_free_resources():
    c = cluster()
    c.check_launch(0, 0, 4.0, 4096, [A0])                     # h0 is g1's and empty
    with pytest.raises(Refusal) as e:
        c.check_launch(2, 0, 1.0, 1, [])                       # h2 belongs to g2
    assert e.value.kind == INTERNAL and "g2's partition" in e.value.detail
    c.allocate(LmTask("t1", "u", 3.0, 1024, 0, 0, False))
    with pytest.raises(Refusal) as e:
        c.check_launch(0, 0, 2.0, 1024, [])                    # 4 - 3 = 1 core left < 2
    assert e.value.kind == INTERNAL and "1.000 cores" in e.value.detail
    with pytest.raises(Refusal):
        c.check_launch(0, 0, 0.5, 1, [A1])                     # host lacks a1
    c.check_invariants()


def test_repartition_cuts_a_logical_node_at_resource_granularity():
    c = cluster()
    # g2 takes R = (1.5 cores, 1000 MiB) from g1's node h1 = (K = 4 cores, 4096 MiB)
    c.check_repartition(1, 1, 1.5, 1000, [A0])
    c.allocate(LmTask("r1", "u", 1.5, 1000, 1, 1, True))
    assert (c.cap_cpu[1], c.cap_mem[1]) == (2.5, 3096)        # N = (K - R, M) stays g1's
    assert c.free(1) == (2.5, 3096.0)
    assert c.logical.tolist() == [0, 1]                        # N' = (R, M) is g2's
    with pytest.raises(Refusal) as e:
        c.check_repartition(1, 1, 3.0, 1, [])                 # only 2.5 left: external inconsistency
    assert e.value.kind == EXTERNAL
    with pytest.raises(Refusal):
        c.check_repartition(2, 1, 1.0, 1, [])                 # h2 is g2's own: not a repartition
    c.check_invariants()
    c.release("r1")                                            # N' lives as long as its task
    assert (c.cap_cpu[1], c.logical.tolist()) == (4.0, [0, 0])
    c.check_invariants()


def test_preemption_frees_the_fewest_newest_tasks_of_the_victim():
    c = cluster(n=2, gms=("g1",))
    for i, (cpu, start) in enumerate([(1.0, 10.0), (1.0, 30.0), (1.0, 20.0)]):
        c.allocate(LmTask(f"v{i}", "hog", cpu, 100, 0, 0, False, state="running", start_unix_s=start))
    c.allocate(LmTask("w", "other", 4.0, 100, 1, 0, False, state="running"))
    # h0: 1 core free; a 2-core task needs one more core: the newest hog task (v1, started at 30)
    h, victims = c.find_preemption(0, "hog", 2.0, 100, [])
    assert h == 0 and [v.name for v in victims] == ["v1"]
    h, victims = c.find_preemption(0, "hog", 3.5, 100, [])
    assert [v.name for v in victims] == ["v1", "v2", "v0"]
    with pytest.raises(Refusal) as e:
        c.find_preemption(0, "hog", 4.5, 100, [])             # even all of them leave 4 < 4.5
    assert e.value.kind == PREEMPTION
    with pytest.raises(Refusal):
        c.find_preemption(0, "nobody", 1.0, 1, [])


def test_allocation_never_exceeds_a_host():
    c = cluster(n=1, gms=("g1", "g2"))
    c.allocate(LmTask("a", "u", 2.0, 100, 0, 0, False))
    c.allocate(LmTask("b", "u", 2.0, 100, 0, 1, True))
    with pytest.raises(Refusal):
        c.check_launch(0, 0, 0.1, 1, [])
    with pytest.raises(ValueError):
        c.allocate(LmTask("a", "u", 0.0, 0, 0, 0, False))     # a task is allocated once
    c.check_invariants()


# --- the GM's view ------------------------------------------------------------------------------------------
def lm_state(lm, version, free_cpu, owner, gms=("g1", "g2"), full=True, idx=(), digest="d", epoch=1, usage=()):
    st = meghapb.LmState(lm=lm, instance=lm, epoch=epoch, version=version, hosts_digest=digest, gms=list(gms), full=full,
                     host_index=list(idx), owner=list(owner), free_cpu_cores=list(free_cpu),
                     free_mem_mib=[1000.0] * len(free_cpu), sent_unix_s=float(version))
    for u, c in usage:
        st.usage.add(user=u, used=meghapb.Resources(cpu_cores=c, mem_mib=0), tasks=1)
    return st


def view_with(lms=("l1", "l2")) -> View:
    v = View("g1", list(lms))
    for lm in lms:
        v[lm].set_hosts("d", [f"{lm}h{i}" for i in range(4)], [4.0] * 4, [1000.0] * 4, [{"a0": 1}] * 4)
    return v


def test_view_applies_full_and_delta_states_in_version_order():
    v = view_with(("l1",))
    assert v["l1"].apply(lm_state("l1", 5, [1, 2, 3, 4], [0, 0, 1, 1])) == "applied"
    assert v["l1"].free_cpu.tolist() == [1, 2, 3, 4]
    assert v["l1"].apply(lm_state("l1", 7, [0.5], [0], full=False, idx=[0])) == "applied"
    assert v["l1"].free_cpu.tolist() == [0.5, 2, 3, 4]
    # an older full state (delayed periodic update) does not undo host 0's newer value
    v["l1"].apply(lm_state("l1", 6, [9, 9, 9, 9], [0, 0, 1, 1]))
    assert v["l1"].free_cpu.tolist() == [0.5, 9, 9, 9]
    assert v["l1"].apply(lm_state("l1", 9, [1, 1, 1, 1], [0, 0, 1, 1], epoch=0)) == "stale"
    assert v["l1"].apply(lm_state("l1", 9, [1, 1, 1, 1], [0, 0, 1, 1], digest="other")) == "need_hosts"


def test_view_matches_internal_partitions_round_robin_then_external():
    v = view_with()
    for lm in ("l1", "l2"):
        v[lm].apply(lm_state(lm, 1, [4, 4, 4, 4], [0, 0, 1, 1]))   # hosts 0, 1 are g1's
    picks = [v.match([], 1.0, 10)[0] for _ in range(2)]
    assert [(c.kind, c.lm, c.host) for c in picks] == [("launch", "l1", "l1h0"), ("launch", "l2", "l2h0")]
    for lm in ("l1", "l2"):                                         # g1's nodes full: external
        v[lm].apply(lm_state(lm, 2, [0, 0, 4, 4], [0, 0, 1, 1]))
    picks = [v.match([], 1.0, 10)[0] for _ in range(2)]
    assert [(c.kind, c.lm, c.host) for c in picks] == [("repartition", "l1", "l1h2"), ("repartition", "l2", "l2h2")]
    choice, scanned = v.match([], 5.0, 10)                          # bigger than any host
    assert choice is None and scanned == 8                      # 2 LMs x (2 internal + 2 external)
    assert "none is big enough" in v.why_not([], 5.0, 10)
    assert v.why_not([A1], 1.0, 10).startswith("no host satisfies the constraints (0 of 8")


# --- fairness (Algorithm 2) -----------------------------------------------------------------------------------
def test_algorithm_2_preempts_only_for_users_below_share_largest_violation_first():
    shares = {"a": 0.10, "b": 0.25, "c": 0.15, "d": 0.50}
    # a uses 5% < 10%: may preempt; b exceeds by 15 points, d by 5; c is under
    cons = {"a": 0.05, "b": 0.40, "c": 0.05, "d": 0.55}
    assert fairness.victims("a", shares, cons) == ["b", "d"]
    assert fairness.victims("b", shares, cons) == []             # over its share: requeue
    assert fairness.victims("d", {"a": 0.5, "d": 0.5}, {"a": 0.5, "d": 0.2}) == []   # nobody over share
    # dominant share: CPU 2/10 = 20%, memory 512/1024 = 50% -> 50%
    assert fairness.dominant_share(2, 512, 10, 1024) == 0.5


# --- allocation time (eq. 1-2) -------------------------------------------------------------------------------------
def test_parts_sum_to_start_minus_arrival():
    clk = AllocClock(arrival=100.0, queued_at=100.0)
    clk.dequeue(100.020)                  # 20 ms in the queue
    clk.proc += 0.001                     # 1 ms match
    clk.failed_attempt(rtt=0.004, lm_queue=0.0015, lm_proc=0.0005)   # 2 ms on the wire
    clk.requeue(100.025)
    clk.dequeue(100.030)                  # +5 ms queued
    # the successful attempt: 0.1 ms LM queue + 0.4 ms validation + 1 ms GM->LM->node
    rec = record("t", "u", "megha", clk, start=100.0315, host="h", lm_queue=0.0001, lm_proc=0.0004, comm=0.001)
    assert rec.framework_queue_ms == pytest.approx(20 + 1.5 + 5 + 0.1)
    assert rec.processing_ms == pytest.approx(1 + 0.5 + 0.4)
    assert rec.communication_ms == pytest.approx(2 + 1)
    assert rec.total_ms == pytest.approx(sum(rec.parts_ms)) == pytest.approx(31.5)
    assert rec.total_ms == pytest.approx((rec.start_s - rec.arrival_s) * 1000)     # eq. 1 = eq. 2
    assert rec.attempts == 2
    s = summarize([rec])
    assert s["placed"] == 1 and s["p50"] == pytest.approx(31.5)
    assert math.isnan(percentiles([])["p99"])
    p = percentiles(range(1, 1001))
    assert p["p50"] == pytest.approx(500.5) and p["p99.9"] == pytest.approx(999.001)


# --- queues and the store ------------------------------------------------------------------------------------------
def test_user_queues_round_robin_and_parking():
    q = UserQueues(["a", "b"])
    for n in ("a1", "a2", "a3"):
        q.push("a", n)
    q.push("b", "b1")
    assert [q.pop() for _ in range(3)] == [("a", "a1"), ("b", "b1"), ("a", "a2")]
    q.park("a", "a2")
    assert q.position("a", "a3") == 1 and q.position("a", "a2") == 2 and len(q) == 2
    assert q.pop() == ("a", "a3")
    assert q.pop() is None                                   # a2 is parked
    assert q.unpark() == 1 and q.pop() == ("a", "a2")


def test_file_queue_store_survives_a_restart_and_compacts(tmp_path):
    s = FileQueueStore(str(tmp_path), fsync=False)
    for i in range(100):
        s.put("g1", f"t{i}", f"blob{i}".encode())
    for i in range(90):
        s.remove("g1", f"t{i}")
    s.close()
    with open(tmp_path / "g1.queue.jsonl", "a") as f:
        f.write('{"put": "torn", "ta')                      # a crash mid-write
    s2 = FileQueueStore(str(tmp_path))
    assert [n for n, _ in s2.load("g1")] == [f"t{i}" for i in range(90, 100)]
    assert dict(s2.load("g1"))["t95"] == b"blob95"
    lines = (tmp_path / "g1.queue.jsonl").read_text().count("\n")
    assert lines < 190                                       # compacted along the way
    m = MemoryQueueStore()
    m.put("g", "x", b"1")
    m.remove("g", "x")
    assert m.load("g") == []


async def test_concurrent_submits_share_one_fsync(tmp_path):
    import asyncio
    s = FileQueueStore(str(tmp_path), fsync=True)

    async def submit(i):
        s.put("g1", f"t{i}", b"x")
        await s.sync()
        return s._synced >= 1
    assert all(await asyncio.gather(*(submit(i) for i in range(40))))
    assert 1 <= s.fsyncs < 40 and s._synced == 40              # group commit: far fewer fsyncs than puts
    await s.sync()                                              # nothing new: no fsync
    assert s.fsyncs < 40
    s.close()


# --- workload -------------------------------------------------------------------------------------------------------
def test_arrivals_are_seeded_and_about_half_the_jobs_are_constrained():
    cfg = ArrivalConfig(seed=3, duration_s=200, job_rate_per_s=10, users=("u1", "u2"))
    a, b = arrivals(cfg), arrivals(cfg)
    assert [x.task.SerializeToString() for x in a] == [x.task.SerializeToString() for x in b]
    jobs = {}
    for x in a:
        jobs.setdefault(x.job, x)
    frac = sum(bool(x.task.constraints) for x in jobs.values()) / len(jobs)
    assert 0.45 < frac < 0.55, frac                         # digest §E.9: ~50%
    assert {x.task.user for x in a} == {"u1", "u2"}
    assert all(b.time_s >= a_.time_s for a_, b in zip(a, a[1:]))
