"""The policies of one process or one model cell: what was chosen (by slot), the shared
:class:`PolicyEnv` (timing table, error mode, budget), and every policy handed to an agent.

Agents never resolve a reference themselves: the assembly asks the book for a slot's policy,
and the book resolves each distinct (slot, choice, defaults) once, so that a model cell of
12,500 nodes loads a plugin once and its nodes share one guarded policy. What the book handed
out is what the agents run: :meth:`PolicyBook.identities` is the manifest's source.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from cellbed.runtime.plugins.guard import PolicyEnv, StagePolicy
from cellbed.runtime.plugins.identity import Identity
from cellbed.runtime.plugins.resolve import SLOTS, Choice, check_slot, resolve
from cellbed.policy.api import STAGES


class PolicyBook:
    def __init__(self, env: PolicyEnv | None = None, choices: Mapping[str, Choice] | None = None) -> None:
        self.env = env or PolicyEnv()
        self.choices: dict[str, Choice] = dict(choices or {})
        for slot in self.choices:
            check_slot(slot)
        self._cache: dict[str, StagePolicy] = {}
        self._handed: dict[tuple[str, str], StagePolicy] = {}     # (slot, identity json) -> policy

    def get(self, slot: str, default_ref: str = "", defaults: Mapping[str, Any] | None = None) -> StagePolicy:
        """The guarded policy for *slot*: the chosen one, else *default_ref* (the agent's
        configured built-in), else the stage's default; *defaults* are the agent's parameters
        for a built-in."""
        stage = check_slot(slot)
        choice = self.choices.get(slot) or Choice("")
        if not choice.ref:
            choice = Choice(default_ref or STAGES[stage].default, choice.params, choice.base_dir)
        key = json.dumps([slot, choice.ref, dict(choice.params), choice.base_dir, dict(defaults or {})],
                         sort_keys=True, default=str)
        sp = self._cache.get(key)
        if sp is None:
            sp = self._cache[key] = resolve(slot, choice, self.env, defaults)
            self._handed[(slot, json.dumps(sp.ident.to_dict(), sort_keys=True, default=str))] = sp
        return sp

    def check(self) -> None:
        """Resolve every chosen slot now (before anything runs), so that a bad reference, signature
        or parameter is refused up front. Nothing is handed out: an agent's identities list only
        the slots it uses."""
        scratch = PolicyEnv(self.env.mode, self.env.budget_ms)      # no timing rows for policies not handed out
        for slot, choice in self.choices.items():
            if choice.ref:           # parameters alone are checked by the agent, against its default
                resolve(slot, choice, scratch)

    def identities(self) -> list[Identity]:
        """Every policy handed out, by slot (a slot twice if agents got different parameters)."""
        return [sp.ident for (_, _), sp in sorted(self._handed.items())]

    def chosen_plugins(self) -> list[Identity]:
        return [i for i in self.identities() if i.origin != "builtin"]

    @staticmethod
    def slots() -> list[str]:
        return sorted(SLOTS)
