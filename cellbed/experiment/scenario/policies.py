"""A scenario's policies (DESIGN §17): which stage slots its front-end runs, the policy
reference of each (the scenario's, else the front-end's built-in), and the policy book a model
cell, a real cell and its twin load them from. One table for all three, so that they resolve
the same policy for every stage (tests/component/test_policy_seams.py)."""
from __future__ import annotations

from typing import Any

from cellbed.domain.errors import InvalidArgument
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.plugins.config import absolute_files, book_from_table
from cellbed.runtime.plugins.identity import BUILTIN_DIST, sha256_file
from cellbed.runtime.plugins.refs import entry_points, load, parse
from cellbed.runtime.plugins.resolve import SLOTS, check_slot

SAN_SLOTS = ("overload", "task_selection", "realloc_score", "target_order", "fit")
BROKER_SLOTS = ("realloc_score", "initial_score", "candidates", "forced")
MEGHA_SLOTS = ("allocation", "validation", "task_order", "preemption")
STAGE_KEYS = ("fit", "initial_score", "realloc_score", "overload", "task_selection", "candidates", "forced",
              "target_order", "admission", "allocation", "validation", "task_order", "preemption", "probe")
"""The [policy] keys that select a stage's policy (the slots of cellbed.runtime.plugins.resolve)."""

assert set(STAGE_KEYS) == set(SLOTS), "every slot has its scenario key"


def slots_of(frontend: str, san: bool) -> tuple[str, ...]:
    """The slots a front-end's agents call."""
    if frontend == "masb":
        out = (*SAN_SLOTS, *BROKER_SLOTS) if san else BROKER_SLOTS
    elif frontend == "bestfit":
        out = ("allocation", *(SAN_SLOTS + BROKER_SLOTS if san else ()))
    elif frontend in ("megha", "central"):
        out = MEGHA_SLOTS
    else:                                       # sampling
        out = ("probe",)
    return tuple(dict.fromkeys((*out, "admission")))


def default_ref(frontend: str, slot: str) -> str:
    """The built-in a front-end uses when the scenario names none."""
    if slot == "admission":
        return "used" if frontend in ("masb", "bestfit") else "requested"
    if slot == "allocation" and frontend == "bestfit":
        return "best_fit"
    from_stage = {"overload": "masb", "task_selection": "tabu", "candidates": "masb", "forced": "masb",
                  "target_order": "masb", "allocation": "first_fit", "validation": "megha", "task_order": "fifo",
                  "preemption": "megha", "probe": "uniform"}
    return from_stage[slot]


def check_policy_keys(policy: Any, base_dir: str | None) -> dict:
    """The [policy] stage keys' forms checked (the plugins themselves are loaded by the runner),
    relative file references made absolute from *base_dir*."""
    for slot in STAGE_KEYS:
        ref = getattr(policy, slot)
        if ref and parse(SLOTS[slot], ref, base_dir or "").kind == "entry-point":
            names = [e.name for e in entry_points(SLOTS[slot])]     # a name is checked at once; code when loaded
            if ref not in names:
                raise InvalidArgument(f"policy.{slot}={ref!r} is not allowed: choose one of {', '.join(names)}, "
                                      "or give package.module:attr or file.py:attr")
    for slot, params in policy.params.items():
        check_slot(slot, "policy.params")
        if not isinstance(params, dict):
            raise InvalidArgument(f"policy.params.{slot}: a table of parameters, got {params!r}")
    refs = {slot: getattr(policy, slot) for slot in STAGE_KEYS if getattr(policy, slot)}
    return absolute_files(refs, base_dir or "")


def policy_table(policy: Any) -> dict:
    """The [policy] table of a scenario's agents: every slot its front-end runs, with its reference
    and parameters, the error mode and the budget."""
    table: dict[str, Any] = {}
    for slot in slots_of(policy.frontend, policy.san.enabled):
        table[slot] = getattr(policy, slot) or default_ref(policy.frontend, slot)
    params = {slot: dict(p) for slot, p in policy.params.items() if slot in table}
    if params:
        table["params"] = params
    table["errors"] = policy.errors
    table["budget_ms"] = policy.budget_ms
    return table


def plugin_sources(policy: Any) -> dict:
    """The chosen plugins (anything but Cellbed's built-ins) with the SHA-256 of their source and
    their version: part of the resolved scenario, so that a sweep resumed after a plugin's source
    changed refuses to mix its old runs with new ones, naming the plugin."""
    out = {}
    for slot, ref in policy_table(policy).items():
        if slot not in SLOTS:
            continue
        r = parse(SLOTS[slot], ref)
        loaded = load(SLOTS[slot], r)
        if loaded.dist == BUILTIN_DIST and r.kind == "entry-point":
            continue
        out[slot] = {"ref": ref, "sha256": sha256_file(loaded.source), "version": loaded.dist_version}
    return out


def broker_params(sc: Any) -> dict:
    """The broker's parameters a scenario sets (the same on a model cell, a real one and its twin)."""
    p, s = sc.policy, sc.policy.san
    return {"candidate_count": s.candidate_count, "realloc_scan_limit": s.realloc_scan_limit,
            "initial_scan_limit": s.initial_scan_limit, "node_expiry_s": s.node_expiry_s,
            "realloc_score": p.realloc_score, "initial_score": p.initial_score, "max_util": s.max_util,
            "pool_sampling": s.pool_sampling}


def policy_book(policy: Any, mode: str = "") -> PolicyBook:
    """The book a run's agents load from (every chosen plugin loaded and checked now: a bad
    reference, signature or parameter is refused, exit 2, before anything runs)."""
    return book_from_table(policy_table(policy), "", mode or policy.errors)
