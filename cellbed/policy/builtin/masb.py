"""MASB's built-in policies (seed 000): overload, task selection (SCS), the broker's candidates
and forced candidates, the target's fit (sum or GPA) and the source's target order."""
from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import numpy as np

from cellbed.policy import api
from cellbed.policy.masb import accept, overload as ovl, scs
from cellbed.policy.masb.choose import weighted_order
from cellbed.policy.masb.broker_select import sample_by_score, sample_forced
from cellbed.policy.scores import SCORES
from cellbed.policy.scores.gpa import GpaParams

MAX_UTIL = api.param(0.9, lo=0.05, hi=1.0, doc="the share of capacity above which a host counts as overloaded")


@dataclasses.dataclass(frozen=True)
class OverloadParams:
    max_util: float = MAX_UTIL


@api.policy(stage="overload", name="masb", params=OverloadParams,
            doc="used resources or production requests above max_util of capacity (MASB §4, the RUS rule)")
def overload(load: api.HostLoad, params: OverloadParams) -> api.Verdict:
    return ovl.check(load, params.max_util)


@dataclasses.dataclass(frozen=True)
class TabuParams:
    restarts: int = api.param(25, lo=1, hi=10_000)
    steps: int = api.param(5, lo=1, hi=10_000)
    patience: int = api.param(6, lo=1, hi=10_000)
    tenure: int = api.param(0, lo=0, hi=10_000, doc="0 = max(1, n // 4)")
    max_pairs: int = api.param(190, lo=0, hi=100_000)
    max_util: float = MAX_UTIL
    score: str = api.param("sras", choices=tuple(SCORES), doc="the score of the host after the move")

    def tabu(self) -> scs.TabuParams:
        return scs.TabuParams(**dataclasses.asdict(self))


@api.policy(stage="task_selection", name="tabu", params=TabuParams,
            doc="Tabu Search over the tasks to move: fitness, then cost (MASB §6)")
def tabu(capacity, used, tasks: Sequence[api.Candidate], prod_requested, rng: random.Random,
         params: TabuParams) -> api.Selection:
    return scs.tabu_select(capacity, used, tasks, rng, params.tabu(), prod_requested)


@api.policy(stage="task_selection", name="greedy", params=TabuParams,
            doc="baseline: move the largest tasks until the host is within max_util")
def greedy(capacity, used, tasks: Sequence[api.Candidate], prod_requested, rng: random.Random,
           params: TabuParams) -> api.Selection:
    return scs.greedy_by_size(capacity, used, tasks, params.tabu(), prod_requested)


@dataclasses.dataclass(frozen=True)
class CandidateParams:
    count: int = api.param(15, lo=1, hi=10_000, doc="recommendations per request (MASB: 15)")


@api.policy(stage="candidates", name="masb", params=CandidateParams,
            doc="score-weighted sampling without replacement of `count` hosts scoring above 0")
def candidates(scores: np.ndarray, capacity: np.ndarray, used: np.ndarray, task_used: np.ndarray,
               rng: np.random.Generator, params: CandidateParams) -> list[api.Pick]:
    return sample_by_score(scores, params.count, rng)


@api.policy(stage="forced", name="masb", params=CandidateParams,
            doc="`count` random hosts whose total capacity fits the task (a forced migration)")
def forced(capacity: np.ndarray, task_used: np.ndarray, rng: np.random.Generator,
           params: CandidateParams) -> list[api.Pick]:
    return sample_forced(capacity, task_used, params.count, rng)


@dataclasses.dataclass(frozen=True)
class SumFitParams:
    max_util: float = MAX_UTIL


@api.policy(stage="fit", name="sum", params=SumFitParams, needs=(),
            doc="the projected sum of use stays within max_util of capacity; production keeps the RUS rule")
def fit_sum(target: api.TargetState, task: api.TaskDemand, forced: bool, params: SumFitParams) -> api.Answer:
    return accept.evaluate(target, task, params.max_util, "sum", None, forced)


@dataclasses.dataclass(frozen=True)
class GpaFitParams:
    max_util: float = MAX_UTIL
    rho: float = api.param(0.01, lo=1e-6, hi=0.5, doc="the SLO violation probability (seed 003)")
    min_samples: int = api.param(100, lo=2, hi=1_000_000, doc="fewer 1-s CPU samples: the sum test")


@api.policy(stage="fit", name="gpa", params=GpaFitParams, needs=("cpu_stats",),
            doc="CPU by the Gaussian percentile approximation (seed 003), memory as a sum")
def fit_gpa(target: api.TargetState, task: api.TaskDemand, forced: bool, params: GpaFitParams) -> api.Answer:
    gpa = GpaParams(rho=params.rho, min_samples=params.min_samples, max_util=params.max_util)
    return accept.evaluate(target, task, params.max_util, "gpa", gpa, forced)


@api.policy(stage="target_order", name="masb",
            doc="score-weighted random order of the acceptors; forced ones last, in random order")
def target_order(acceptors: Sequence[api.Acceptor], scores: np.ndarray, rng: random.Random) -> list[int]:
    return weighted_order([a.forced for a in acceptors], scores, rng)
