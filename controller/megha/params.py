"""Tunables of the Megha agents, with units and validators (DESIGN §13)."""
from __future__ import annotations

import dataclasses

from cellbed.domain.errors import check_range


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Processing time of decisions on a model cell, seconds. In virtual time computation takes
    no time, so the agents sleep this long (as a single-threaded server is busy) where a real
    one computes; on a real cell (cost=None) the measured wall time is used instead. Defaults
    are of the order measured on this project's 2-core box (scripts/bench_megha.py, "match")."""

    gm_match_base_s: float = 20e-6          # one GM match: the AND of a task's vectors, per task
    gm_match_per_node_s: float = 10e-9      # ... plus the first-fit scan, per node scanned
    lm_validate_s: float = 30e-6            # one LM validation (launch, repartition, preemption)
    sampling_decision_s: float = 5e-6       # a sampling scheduler choosing d random nodes

    def validate(self) -> "CostModel":
        for f in dataclasses.fields(self):
            check_range(f"cost.{f.name}", getattr(self, f.name), 0.0, 1.0, "s")
        return self

    def gm_match_s(self, scanned: int) -> float:
        return self.gm_match_base_s + self.gm_match_per_node_s * scanned

    def seconds(self, op: str, n: int = 0) -> float:
        """The clock's cost function (cellbed.runtime.clock.CostFn): *op* over *n* items."""
        if op == "gm_match":
            return self.gm_match_s(n)
        if op == "gm_preempt":
            return self.gm_match_base_s
        if op == "lm_validate":
            return self.lm_validate_s
        if op == "sampling_decision":
            return self.sampling_decision_s
        raise KeyError(f"cost model: unknown operation {op!r}")


@dataclasses.dataclass(frozen=True)
class LmParams:
    update_period_s: float = 10.0           # periodic state update to the GMs (Megha: 10 s)
    replicate_period_s: float = 0.5         # active -> standby replication and heartbeat
    takeover_after_s: float = 3.0           # standby takes over after this long without a heartbeat
    event_flush_s: float = 0.005            # task events to a GM are batched this long
    event_retry_s: float = 1.0              # retry of undelivered task events
    start_timeout_s: float = 180.0          # StartVm deadline (TCG boots are slow)
    stop_timeout_s: float = 60.0            # StopVm deadline
    discover_timeout_s: float = 120.0       # every host must answer GetHostState within this at start
    replicate_timeout_s: float = 2.0        # an accepted task is replicated to the standby before the reply
                                            # (and before StartVm); a standby slower than this is caught up
                                            # in the background instead
    orphan_wait_s: float = 150.0            # after a takeover, a task whose StartVm the dead active had sent
                                            # is watched this long (> the node's boot timeout) before it is
                                            # declared lost: the node may still start it
    max_starting_per_host: int = 0          # VMs booting at once per host (0 = no limit); a task waiting
                                            # for its turn is in worker queueing (a TCG box boots slowly)
    piggyback_full: bool = True             # every reply carries the state of all partitions (the paper's
                                            # "partial state about an entire LM cluster after every launch");
                                            # False: successful replies carry only the changed host
    max_clock_skew_s: float = 30.0          # a request's timestamp further in this LM's future is refused

    def validate(self) -> "LmParams":
        check_range("update_period_s", self.update_period_s, 0.01, 3600, "s")
        check_range("replicate_period_s", self.replicate_period_s, 0.01, 60, "s")
        check_range("takeover_after_s", self.takeover_after_s, 2 * self.replicate_period_s, 3600, "s")
        check_range("event_flush_s", self.event_flush_s, 0.0, 10, "s")
        check_range("event_retry_s", self.event_retry_s, 0.01, 600, "s")
        check_range("start_timeout_s", self.start_timeout_s, 1, 3600, "s")
        check_range("stop_timeout_s", self.stop_timeout_s, 1, 3600, "s")
        check_range("discover_timeout_s", self.discover_timeout_s, 1, 3600, "s")
        check_range("replicate_timeout_s", self.replicate_timeout_s, 0.01, 60, "s")
        check_range("orphan_wait_s", self.orphan_wait_s, 0, 3600, "s")
        check_range("max_starting_per_host", self.max_starting_per_host, 0, 1000)
        check_range("max_clock_skew_s", self.max_clock_skew_s, 0.0, 3600, "s")
        return self


@dataclasses.dataclass(frozen=True)
class GmParams:
    request_timeout_s: float = 10.0         # deadline of a request to an LM
    immediate_retries: int = 2              # re-match at once after an inconsistency (fresh state), then requeue
    retry_period_s: float = 10.0            # parked tasks are retried at least this often (besides view changes)
    fairness: bool = True                   # preempt for users below their share under contention
    max_preempt_lms: int = 4                # LMs asked per preemption attempt before requeueing
    records_kept: int = 200_000             # allocation records kept in memory
    max_clock_skew_s: float = 30.0          # an LM state or task event timestamped further in this GM's
                                            # future is refused (dropped and counted, over MQTT)
    lost_launch_check_s: float = 15.0       # how often STARTING tasks are looked up at their LM: one its
                                            # (restarted) LM no longer holds, twice in a row, is requeued;
                                            # 0 = never (the model cell, whose LMs do not crash)

    def validate(self) -> "GmParams":
        check_range("request_timeout_s", self.request_timeout_s, 0.01, 600, "s")
        check_range("immediate_retries", self.immediate_retries, 0, 100)
        check_range("retry_period_s", self.retry_period_s, 0.001, 3600, "s")
        check_range("max_preempt_lms", self.max_preempt_lms, 1, 10_000)
        check_range("records_kept", self.records_kept, 0, 10_000_000)
        check_range("max_clock_skew_s", self.max_clock_skew_s, 0.0, 3600, "s")
        check_range("lost_launch_check_s", self.lost_launch_check_s, 0.0, 3600, "s")
        return self
