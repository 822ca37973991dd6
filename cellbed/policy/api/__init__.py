"""Cellbed's public policy API (DESIGN §17). A plugin imports this module and nothing else of
Cellbed. It holds the stages and their contracts (:data:`STAGES`), the records they take and
give, :func:`policy` and :func:`param` to declare a policy, and :data:`API_VERSION`.

``API_VERSION`` follows semantic versioning: a plugin written for 1.x runs on any 1.y >= x.
"""
from __future__ import annotations

from cellbed.policy.api import contracts
from cellbed.policy.api.declare import ParamError, PolicyInfo, build_params, info_of, param, params_dict, policy
from cellbed.policy.api.records import (
    Acceptor, Answer, Candidate, Constraint, HostLoad, Hosts, NodeUse, Pick, QueuedTask, Selection, TargetState,
    TaskDemand, Verdict, VmDemand)
from cellbed.policy.api.stages import STAGES, Stage

API_VERSION = "1.0"

__all__ = ["API_VERSION", "Acceptor", "Answer", "Candidate", "Constraint", "HostLoad", "Hosts", "NodeUse",
           "ParamError", "Pick", "PolicyInfo", "QueuedTask", "STAGES", "Selection", "Stage", "TargetState",
           "TaskDemand", "Verdict", "VmDemand", "build_params", "contracts", "info_of", "param", "params_dict",
           "policy"]
