"""The built-in scores (MASB §5): SIAS and SRAS and their GAIN variants. A score stage gets the
hosts' loads (requests for SIAS, usage for SRAS: the caller chooses which it passes, by the
slot: ``policy.initial_score`` scores requests, ``policy.realloc_score`` usage)."""
from __future__ import annotations

import numpy as np

from cellbed.policy import api
from cellbed.policy.scores import SCORES, SiasParams, SrasParams


@api.policy(stage="score", name="sias", params=SiasParams,
            doc="Service Initial Allocation Score: highest on an empty host (MASB §5)")
def sias(load: np.ndarray, capacity: np.ndarray, task: np.ndarray, params: SiasParams) -> np.ndarray:
    return SCORES["sias"](load, capacity, task, params)


@api.policy(stage="score", name="sras", params=SrasParams,
            doc="Service Reallocation Score: highest near max_util (MASB §5)")
def sras(load: np.ndarray, capacity: np.ndarray, task: np.ndarray, params: SrasParams) -> np.ndarray:
    return SCORES["sras"](load, capacity, task, params)


@api.policy(stage="score", name="sias_gain", params=SiasParams,
            doc="the gain in SIAS from placing the task")
def sias_gain(load: np.ndarray, capacity: np.ndarray, task: np.ndarray, params: SiasParams) -> np.ndarray:
    return SCORES["sias_gain"](load, capacity, task, params)


@api.policy(stage="score", name="sras_gain", params=SrasParams,
            doc="the gain in SRAS from placing the task")
def sras_gain(load: np.ndarray, capacity: np.ndarray, task: np.ndarray, params: SrasParams) -> np.ndarray:
    return SCORES["sras_gain"](load, capacity, task, params)
