"""The stages: every decision point of Cellbed's agents, each with a typed contract. Public
(``cellbed.policy.api``). A stage's policy is called with its inputs, positionally, in the order
of ``Stage.inputs``, and with ``params=`` when the policy declares parameters. A policy is pure:
no I/O, no clock, no global RNG (the stages that draw get an rng; a ``random.Random`` unless the
stage says numpy). It must not change its inputs.

The reference architecture's stage ids (seed 002: T2 task sorting, R4 filter on dynamic
information, R5 select and allocate, T10 preemption, T12 migration, ...) are given where one fits.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from cellbed.policy.api import contracts as c
from cellbed.policy.api.records import (
    Acceptor, Answer, Candidate, HostLoad, Hosts, NodeUse, Pick, QueuedTask, Selection, TargetState, TaskDemand,
    Verdict, VmDemand)

Vec = tuple[float, float]


class Overload(Protocol):
    def __call__(self, load: HostLoad, /) -> Verdict: ...


class TaskSelection(Protocol):
    def __call__(self, capacity: Vec, used: Vec, tasks: Sequence[Candidate], prod_requested: Vec,
                 rng: random.Random, /) -> Selection: ...


class Score(Protocol):
    def __call__(self, load: np.ndarray, capacity: np.ndarray, task: np.ndarray, /) -> np.ndarray: ...


class Candidates(Protocol):
    def __call__(self, scores: np.ndarray, capacity: np.ndarray, used: np.ndarray, task_used: np.ndarray,
                 rng: np.random.Generator, /) -> Sequence[Pick]: ...


class Forced(Protocol):
    def __call__(self, capacity: np.ndarray, task_used: np.ndarray, rng: np.random.Generator, /) -> Sequence[Pick]: ...


class Fit(Protocol):
    def __call__(self, target: TargetState, task: TaskDemand, forced: bool, /) -> Answer: ...


class TargetOrder(Protocol):
    def __call__(self, acceptors: Sequence[Acceptor], scores: np.ndarray, rng: random.Random, /) -> Sequence[int]: ...


class Admission(Protocol):
    def __call__(self, node: NodeUse, vm: VmDemand, forced: bool, /) -> Answer: ...


class Allocation(Protocol):
    def __call__(self, hosts: Hosts, demand: np.ndarray, rng: random.Random, /) -> int: ...


class Validation(Protocol):
    def __call__(self, host: str, free: Vec, capacity: Vec, demand: Vec, /) -> Answer: ...


class TaskOrder(Protocol):
    def __call__(self, task: QueuedTask, rng: random.Random, /) -> float: ...


class Preemption(Protocol):
    def __call__(self, requester: str, shares: Mapping[str, float], consumed: Mapping[str, float], /) -> Sequence[str]: ...


class Probe(Protocol):
    def __call__(self, n: int, probes: int, rng: np.random.Generator, /) -> Sequence[int]: ...


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    keys: tuple[str, ...]           # the configuration keys that select its policy
    refarch: str                    # the reference architecture's stage(s)
    contract: str                   # one line
    where: str                      # who calls it
    protocol: type
    inputs: tuple[str, ...]         # positional argument names
    default: str                    # the built-in used when nothing is selected
    check: Callable[[tuple, Any], str]
    examined: Callable[[tuple], int]

    @property
    def group(self) -> str:
        """The entry-point group of its policies."""
        return f"cellbed.policy.{self.name}"


def _one(_args: tuple) -> int:
    return 1


def _n(i: int) -> Callable[[tuple], int]:
    return lambda args: len(args[i])


STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage("overload", ("policy.overload",), "T6, T12",
          "is this host overloaded? a Verdict with its reasons and the excess per resource (finite, >= 0)",
          "node (SAN step 1, every sample; the target's step-3 refusal of an overloaded host)",
          Overload, ("load",), "masb", lambda a, o: c.verdict(o), _one),
    Stage("task_selection", ("policy.task_selection",), "T12",
          "which tasks leave an overloaded host: a Selection naming only offered tasks, each once",
          "node (SAN step 1, SCS)", TaskSelection, ("capacity", "used", "tasks", "prod_requested", "rng"),
          "tabu", lambda a, o: c.selection(o, a[2]), _n(2)),
    Stage("score", ("policy.realloc_score", "policy.initial_score"), "R5",
          "how good each host is for the task: one finite score per host row, higher is better",
          "broker (SAN step 2, initial placement), node (SAN step 4 re-scoring)", Score,
          ("load", "capacity", "task"), "sras", lambda a, o: c.scores(o, len(a[0])), _n(0)),
    Stage("candidates", ("policy.candidates",), "R4, R5",
          "which scored hosts the broker recommends: Picks of offered rows, each once",
          "broker (SAN step 2)", Candidates, ("scores", "capacity", "used", "task_used", "rng"),
          "masb", lambda a, o: c.picks(o, len(a[0])), _n(0)),
    Stage("forced", ("policy.forced",), "T12, R4",
          "when no host has room: hosts to force the migration onto (Picks of offered rows; [] for none)",
          "broker (SAN step 2)", Forced, ("capacity", "task_used", "rng"), "masb",
          lambda a, o: c.picks(o, len(a[0])), _n(0)),
    Stage("fit", ("policy.fit",), "R4, R5",
          "does the task fit on this target: an Answer (a refusal says why, with its numbers)",
          "node (SAN steps 3 and 5, the target)", Fit, ("target", "task", "forced"), "sum",
          lambda a, o: c.answer(o), _one),
    Stage("target_order", ("policy.target_order",), "R5",
          "the order in which to try the accepting targets: a permutation of their positions",
          "node (SAN step 4, the source)", TargetOrder, ("acceptors", "scores", "rng"), "masb",
          lambda a, o: c.permutation(o, len(a[0])), _n(0)),
    Stage("admission", ("policy.admission",), "R4",
          "may this VM start or arrive on this host: an Answer (a refusal says why, with its numbers)",
          "node (StartVm, PrepareIncoming)", Admission, ("node", "vm", "forced"), "requested",
          lambda a, o: c.answer(o), _one),
    Stage("allocation", ("policy.allocation",), "R5",
          "which offered host gets the task: its position, or -1 for none",
          "Megha GM (match), central, best fit (model, real runner, twin)", Allocation, ("hosts", "demand", "rng"),
          "first_fit", lambda a, o: c.allocation(o, a[0]), _n(0)),
    Stage("validation", ("policy.validation",), "R4",
          "does the placement hold on the LM's true state: an Answer",
          "Megha LM", Validation, ("host", "free", "capacity", "demand"), "megha",
          lambda a, o: c.answer(o), _one),
    Stage("task_order", ("policy.task_order",), "T2",
          "a task's sort key in its queue (lower first, ties by queue entry): a finite number",
          "Megha GM and central queues", TaskOrder, ("task", "rng"), "fifo", lambda a, o: c.key(o), _one),
    Stage("preemption", ("policy.preemption",), "T10",
          "whose tasks to preempt for the requester: users with a share, not the requester, each once",
          "Megha GM (fair share)", Preemption, ("requester", "shares", "consumed"), "megha",
          lambda a, o: c.users(o, list(a[1]), a[0]), _n(1)),
    Stage("probe", ("policy.probe",), "M5, R5",
          "which nodes a sampling scheduler probes: at most `probes` distinct positions of 0..n-1",
          "sampling scheduler", Probe, ("n", "probes", "rng"), "uniform",
          lambda a, o: c.positions(o, a[0], a[1]), lambda a: int(a[0])),
)}
