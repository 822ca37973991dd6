"""What a run's agents loaded and how long their stages took (DESIGN §17), for its results
folder: ``policies`` in manifest.json (each stage's identity, with its reference-architecture
stage) and ``stages.csv``. A model run and its twin read their policy book; a real run asks every
agent (``cellbed.v1.Policies``) before its cell goes down."""
from __future__ import annotations

from typing import Iterable

import grpc

from cellbed.domain.errors import CellbedError
from cellbed.experiment.results.writer import ResultsWriter
from cellbed.policy.api import STAGES
from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.runtime.plugins.identity import Identity
from cellbed.runtime.plugins.stats import StageStats


class PolicyRunFailed(CellbedError):
    """A strict run ended because a plugin failed (exit 1: a failure on the way, not a bad request)."""

    code = grpc.StatusCode.ABORTED

    def __init__(self, err: PolicyFailed) -> None:
        super().__init__(f"run stopped: {err}")
        self.err = err


def manifest_policies(ids: Iterable[Identity], agents: dict[str, list[str]] | None = None) -> list[dict]:
    """One entry per distinct (key, identity), with its reference-architecture stage and, for a
    real cell, the agents that loaded it."""
    out: dict[tuple, dict] = {}
    for i in ids:
        d = i.to_dict()
        k = (i.key, i.sha256, i.ref, repr(sorted(i.params.items())))
        if k not in out:
            out[k] = {**d, "refarch": STAGES[i.stage].refarch}
    rows = sorted(out.values(), key=lambda d: (d["key"], d["ref"]))
    if agents:
        for d in rows:
            d["agents"] = sorted(agents.get(_k(d), []))
    return rows


def _k(d: dict) -> str:
    return f"{d['key']}\t{d['sha256']}\t{d['ref']}\t{sorted(d['params'].items())!r}"


def agent_key(i: Identity) -> str:
    return _k(i.to_dict())


def record(w: ResultsWriter, ids: Iterable[Identity], stats: StageStats, agents: dict[str, list[str]] | None = None,
           mode: str = "") -> None:
    """Write the run's policies into its manifest and its stage timing into stages.csv."""
    rows = manifest_policies(ids, agents)
    errors = sum(a.errors for a in stats.accs.values())
    w.update_manifest(policies=rows, policy_errors=errors, policy_mode=mode)
    w.stages(stats)
