"""SanConfig: every SAN constant, with the paper's value as its default, and the reason codes."""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Mapping

from cellbed.domain.config import check_keys, field_names
from cellbed.runtime.plugins import refs
from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.policy.masb import accept
from cellbed.policy.scores import SCORES
from cellbed.v1 import masb_pb2 as masbpb

REASON_PB = {accept.CAPACITY: masbpb.REJECTION_REASON_CAPACITY, accept.CONSTRAINTS: masbpb.REJECTION_REASON_CONSTRAINTS,
             accept.RUS: masbpb.REJECTION_REASON_RUS, accept.OVERLOADED: masbpb.REJECTION_REASON_OVERLOADED,
             accept.SAME_HOST: masbpb.REJECTION_REASON_SAME_HOST, accept.NO_ANSWER: masbpb.REJECTION_REASON_NO_ANSWER,
             accept.GPA: masbpb.REJECTION_REASON_GPA}
REASON_NAME = {v: k for k, v in REASON_PB.items()}



@dataclasses.dataclass(frozen=True)
class SanConfig:
    enabled: bool = True
    max_util: float = 0.9                  # of capacity, for use and production requests (RUS)
    rus_threshold_pct: float = 10.0        # a rise above this many points between samples is a spike
    spike_policy: str = "none"             # none | pause | kill  (non-production VMs, on a spike with a breach)
    window_s: float = 30.0                 # step 3 collection window
    recommendation_expiry_s: float = 180.0
    report_period_s: float = 60.0          # NodeReport to the brokers
    max_parallel: int = 4                  # SANs at once on this host
    fit: str = "sum"                       # accept rule CPU test: sum | gpa
    gpa_rho: float = 0.01                  # GPA: accepted probability of exceeding capacity
    gpa_min_samples: int = 100             # GPA: fewer samples -> the sum test
    realloc_score: str = "sras"            # step 4 re-scoring
    scs_score: str = "sras"                # host score after removal, in the SCS fitness
    tabu_restarts: int = 25
    tabu_steps: int = 5
    tabu_patience: int = 6
    log_scs_rate: float = 1 / 50
    log_scoring_rate: float = 1 / 5000
    log_target_rate: float = 1 / 5000
    decision_log: str = ""                 # JSONL path; "" = keep in memory
    migration_bandwidth_mib_s: int = 0     # 0 = unlimited
    max_downtime_ms: int = 0               # 0 = QEMU default
    migration_timeout_s: float = 120.0
    request_timeout_s: float = 10.0
    cost_bandwidth_mib_s: float = 1250.0   # the SCS cost estimate's bandwidth
    keep_recent: int = 200                 # finished negotiations kept for ListNegotiations
    boot_grace_s: float = 0.0              # a VM's first seconds (booting) do not count towards overload
    unmovable_s: float = 300.0             # a task whose SAN found no target is left out of SCS this long
    max_scs_per_round: int = 4             # SCS re-runs (step 1 again) per overload round
    quiet_report_s: float = 240.0          # event-driven sampling: an unchanged host reports again after this

    _CHOICES = {"spike_policy": ("none", "pause", "kill"), "scs_score": tuple(SCORES)}

    def validate(self) -> "SanConfig":
        for k, allowed in self._CHOICES.items():
            if getattr(self, k) not in allowed:
                raise InvalidArgument(f"san.{k}={getattr(self, k)!r}: allowed {', '.join(allowed)}")
        for k, stage in (("fit", "fit"), ("realloc_score", "score")):    # policy references (DESIGN §17)
            refs.parse(stage, getattr(self, k))
        check_range("san.max_util", self.max_util, 0.05, 1.0)
        check_range("san.rus_threshold_pct", self.rus_threshold_pct, 0.0, 100.0, "points")
        check_range("san.window_s", self.window_s, 0.001, 3600.0, "s")
        check_range("san.recommendation_expiry_s", self.recommendation_expiry_s, 0.001, 86400.0, "s")
        check_range("san.report_period_s", self.report_period_s, 0.01, 86400.0, "s")
        check_range("san.max_parallel", self.max_parallel, 1, 1000)
        check_range("san.tabu_restarts", self.tabu_restarts, 1, 10_000)
        check_range("san.tabu_steps", self.tabu_steps, 1, 10_000)
        check_range("san.tabu_patience", self.tabu_patience, 1, 10_000)
        for k in ("log_scs_rate", "log_scoring_rate", "log_target_rate"):
            check_range(f"san.{k}", getattr(self, k), 0.0, 1.0)
        check_range("san.cost_bandwidth_mib_s", self.cost_bandwidth_mib_s, 0.001, 1e7, "MiB/s")
        check_range("san.gpa_rho", self.gpa_rho, 1e-6, 0.5)
        check_range("san.gpa_min_samples", self.gpa_min_samples, 2, 1_000_000)
        check_range("san.boot_grace_s", self.boot_grace_s, 0.0, 3600.0, "s")
        check_range("san.unmovable_s", self.unmovable_s, 0.0, 86400.0, "s")
        check_range("san.max_scs_per_round", self.max_scs_per_round, 1, 1000)
        check_range("san.quiet_report_s", self.quiet_report_s, 0.01, 86400.0, "s")
        return self

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> "SanConfig":
        check_keys(d, field_names(cls), "san")
        return cls(**dict(d)).validate()


@dataclasses.dataclass
class Negotiation:
    pb: masbpb.Negotiation
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


