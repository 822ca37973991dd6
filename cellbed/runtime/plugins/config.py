"""The ``[policy]`` table of an agent's configuration (node.toml, broker.toml, the controller's
TOML), the same keys a scenario's ``[policy]`` table uses for stages::

    [policy]
    overload = "mypkg.rules:cpu_only"        # a slot = a reference
    errors = "isolate"                       # strict | isolate (a real agent's default)
    budget_ms = 1000                         # a plugin's time budget per call
    [policy.params.overload]
    threshold = 0.8

A relative file reference is taken from the configuration file's folder.
"""
from __future__ import annotations

import logging
import tomllib
from typing import Any, Mapping

from cellbed.domain.config import check_keys
from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.plugins.guard import DEFAULT_BUDGET_MS, MODES, PolicyEnv, PolicyFailed
from cellbed.runtime.plugins.refs import parse
from cellbed.runtime.plugins.resolve import SLOTS, choices_from_table

log = logging.getLogger("cellbed.policy")
EXTRA = ("params", "errors", "budget_ms")


def env_from(table: Mapping[str, Any], default_mode: str, where: str = "policy") -> PolicyEnv:
    mode = table.get("errors", default_mode)
    if mode not in MODES:
        raise InvalidArgument(f"{where}.errors: allowed {', '.join(MODES)}, got {mode!r}")
    budget = table.get("budget_ms", DEFAULT_BUDGET_MS)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise InvalidArgument(f"{where}.budget_ms: allowed a number of ms (0.1..600000), got {budget!r}")
    check_range(f"{where}.budget_ms", float(budget), 0.1, 600_000.0, "ms")
    return PolicyEnv(mode=mode, budget_ms=float(budget))


def book_from_table(table: Mapping[str, Any] | None, base_dir: str = "", default_mode: str = "isolate",
                    where: str = "policy") -> PolicyBook:
    """A book from an agent's ``[policy]`` table; every key checked, and every chosen plugin
    loaded and checked (reference, signature, parameters) now, before the agent serves."""
    table = dict(table or {})
    check_keys(table, [*sorted(SLOTS), *EXTRA], where)
    book = PolicyBook(env_from(table, default_mode, where), choices_from_table(table, base_dir, where))
    book.check()
    return book


def table_from_items(items: list[str], where: str = "--policy") -> dict:
    """``STAGE=REF``, ``STAGE.PARAM=VALUE``, ``errors=MODE`` and ``budget_ms=MS`` (as ``cell up
    --policy`` and sweeps take them) as a ``[policy]`` table. Values are TOML values, or strings."""
    table: dict[str, Any] = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        k = k.strip()
        if not sep or not k:
            raise InvalidArgument(f"{where} {it!r}: allowed STAGE=REF or STAGE.PARAM=VALUE")
        slot, dot, param = k.partition(".")
        if slot not in SLOTS and slot not in ("errors", "budget_ms"):
            raise InvalidArgument(f"{where} {it!r}: unknown stage {slot!r}; allowed: {', '.join(sorted(SLOTS))}, "
                                  "errors, budget_ms")
        value = toml_scalar(v)
        if dot:
            table.setdefault("params", {}).setdefault(slot, {})[param] = value
        else:
            table[slot] = v if slot in SLOTS else value
    return table


def toml_scalar(v: str) -> Any:
    try:
        return tomllib.loads(f"v = {v}")["v"]
    except tomllib.TOMLDecodeError:
        return v


def absolute_files(table: Mapping[str, Any], base_dir: str) -> dict:
    """The table with every relative ``file.py:attr`` reference made absolute (from *base_dir*),
    for agents that run in another folder."""
    out = dict(table)
    for slot in SLOTS:
        ref = out.get(slot)
        if isinstance(ref, str) and ":" in ref:
            r = parse(SLOTS[slot], ref, base_dir)
            if r.kind == "file":
                out[slot] = f"{r.target}:{r.attr}"
    return out


class ErrorLog:
    """A real agent's ``on_error``: log a failing policy's first error, then every 100th."""

    def __init__(self, agent: str, every: int = 100) -> None:
        self.agent = agent
        self.every = every
        self.seen: dict[str, int] = {}

    def __call__(self, err: PolicyFailed) -> None:
        k = f"{err.ident.stage}:{err.ident.ref}"
        n = self.seen[k] = self.seen.get(k, 0) + 1
        if n == 1 or n % self.every == 0:
            log.warning("%s: %s (%d so far; the decision was refused, the agent keeps serving)", self.agent, err, n)
