"""Placement policy: allocation scores, ASR classes and fit tests.

Registries are plain dicts of names to functions, so a scenario or a node
agent picks a policy by name (DESIGN §10.4: "the policies per stage").

``SCORES`` — every entry has the same signature, over loads::

    score(load, capacity, task, params=None, *, mask=None) -> float | ndarray

``load`` is (R,) for one node or (N, R) for N nodes: summed *requests* on the
node for "sias"/"sias_gain", summed *usage* for "sras"/"sras_gain".
``mask`` is False where the task's constraints do not match (→ NaN).
``SCORE_PARAMS`` gives the params class of each, and ``GAIN_TIE_BREAK`` the
absolute score that breaks the zero-gain ties of a GAIN variant (see
``gain.rank_by_gain``). The percent-space functions (``sias(p)``,
``sras(p)``, ``sias_gain(p_before, p_after)``, …) are exported too.

``FIT_TESTS`` — same signature for both::

    fits(node: Demand, task: Demand, capacity, params=None) -> bool | ndarray

with ``FIT_PARAMS`` giving the params class of each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cellbed.policy.scores.asr import (
    DEFAULT_BANDS,
    AsrBands,
    AsrClass,
    AsrCounts,
    asr,
    asr_counts,
    classify,
    node_class,
    utilisation_pct,
)
from cellbed.policy.scores.fit import Demand, SumFitParams, sum_fit, sum_projection
from cellbed.policy.scores.gain import (
    gain,
    gain_from_load,
    gain_of,
    gain_sort_key,
    rank_by_gain,
    sias_gain,
    sias_gain_from_load,
    sras_gain,
    sras_gain_from_load,
)
from cellbed.policy.scores.gpa import GpaParams, gpa_fit, gpa_projection
from cellbed.policy.scores.sias import SiasParams, sias, sias_from_load
from cellbed.policy.scores.sras import SrasParams, sras, sras_from_load

SCORES: dict[str, Callable[..., Any]] = {
    "sias": sias_from_load,
    "sras": sras_from_load,
    "sias_gain": sias_gain_from_load,
    "sras_gain": sras_gain_from_load,
}

SCORE_PARAMS: dict[str, type] = {
    "sias": SiasParams,
    "sras": SrasParams,
    "sias_gain": SiasParams,
    "sras_gain": SrasParams,
}

GAIN_TIE_BREAK: dict[str, str] = {"sias_gain": "sias", "sras_gain": "sras"}

FIT_TESTS: dict[str, Callable[..., Any]] = {
    "sum": sum_fit,
    "gpa": gpa_fit,
}

FIT_PARAMS: dict[str, type] = {
    "sum": SumFitParams,
    "gpa": GpaParams,
}

__all__ = [
    "AsrBands",
    "AsrClass",
    "AsrCounts",
    "DEFAULT_BANDS",
    "Demand",
    "FIT_PARAMS",
    "FIT_TESTS",
    "GAIN_TIE_BREAK",
    "GpaParams",
    "SCORES",
    "SCORE_PARAMS",
    "SiasParams",
    "SrasParams",
    "SumFitParams",
    "asr",
    "asr_counts",
    "classify",
    "node_class",
    "gain",
    "gain_from_load",
    "gain_of",
    "gain_sort_key",
    "gpa_fit",
    "gpa_projection",
    "rank_by_gain",
    "sias",
    "sias_from_load",
    "sias_gain",
    "sias_gain_from_load",
    "sras",
    "sras_from_load",
    "sras_gain",
    "sras_gain_from_load",
    "sum_fit",
    "sum_projection",
    "utilisation_pct",
]
