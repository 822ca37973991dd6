"""From what a configuration says to the guarded policies an agent calls.

A *slot* is what a configuration key selects: ``policy.overload`` selects the ``overload``
slot, whose stage is ``overload``; ``policy.realloc_score`` and ``policy.initial_score`` are two
slots of the ``score`` stage. A :class:`Choice` is a slot's reference and parameters, as written;
:func:`resolve` loads and checks it (reference, signature, parameters) and returns the
:class:`StagePolicy` the agent calls. Every problem is an InvalidArgument of one line, raised
before anything runs.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Iterable, Mapping

from cellbed.domain.errors import InvalidArgument
from cellbed.policy.api import STAGES, ParamError, build_params, info_of, params_dict
from cellbed.runtime.plugins import refs
from cellbed.runtime.plugins.guard import PolicyEnv, StagePolicy
from cellbed.runtime.plugins.identity import Identity, identity

SLOTS: dict[str, str] = {k.split(".", 1)[1]: s.name for s in STAGES.values() for k in s.keys}
"""slot -> stage."""


@dataclasses.dataclass(frozen=True)
class Choice:
    ref: str                        # '' = the agent's default policy for the slot, with these parameters
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    base_dir: str = ""              # where a relative file reference is taken from

    def plain(self) -> dict:
        return {"ref": self.ref, "params": dict(self.params)}


def check_slot(slot: str, where: str = "policy") -> str:
    if slot not in SLOTS:
        raise InvalidArgument(f"{where}.{slot}: unknown policy stage; allowed: {', '.join(sorted(SLOTS))}")
    return SLOTS[slot]


def choices_from_table(table: Mapping[str, Any], base_dir: str = "", where: str = "policy") -> dict[str, Choice]:
    """The choices of a ``[policy]`` table: ``SLOT = "REF"`` and ``[policy.params.SLOT]``.
    Other keys of the table are the caller's; a params table for an unknown slot is refused."""
    params = table.get("params", {}) or {}
    if not isinstance(params, Mapping):
        raise InvalidArgument(f"{where}.params: a table of tables, one per stage, got {params!r}")
    out: dict[str, Choice] = {}
    for slot, p in params.items():
        check_slot(slot, f"{where}.params")
        if not isinstance(p, Mapping):
            raise InvalidArgument(f"{where}.params.{slot}: a table of parameters, got {p!r}")
    for slot, ref in table.items():
        if slot in SLOTS and ref is not None:
            if not isinstance(ref, str):
                raise InvalidArgument(f"{where}.{slot}: a policy reference (a string), got {ref!r}")
            out[slot] = Choice(ref, dict(params.get(slot, {})), base_dir)
    for slot in params:           # parameters alone: for the policy the agent uses by default
        if slot not in out:
            out[slot] = Choice("", dict(params[slot]), base_dir)
    return out


def resolve(slot: str, choice: Choice, env: PolicyEnv, defaults: Mapping[str, Any] | None = None) -> StagePolicy:
    """Load, check and guard the policy *choice* names for *slot*. *defaults* are parameters
    the agent's own configuration gives a built-in (e.g. ``max_util``); a choice's explicit
    parameters win, and a plugin gets only its explicit ones."""
    stage_name = check_slot(slot)
    stage = STAGES[stage_name]
    key = f"policy.{slot}"
    ref = refs.parse(stage_name, choice.ref, choice.base_dir)
    loaded = refs.load(stage_name, ref)
    obj = loaded.obj
    info = info_of(obj, loaded.attr)
    if info.stage and info.stage != stage_name:
        raise InvalidArgument(f"{key}: {choice.ref!r} is a {info.stage} policy, not a {stage_name} policy")
    if not callable(obj):
        raise InvalidArgument(f"{key}: {choice.ref!r} is {type(obj).__name__}, not a callable")
    _check_signature(key, choice.ref, obj, stage.inputs, info.params is not None)
    builtin = loaded.dist == "cellbed" and ref.kind == "entry-point"
    given = {**(dict(defaults or {}) if builtin else {}), **dict(choice.params)}
    if builtin and info.params is not None:       # only the parameters the built-in has
        names = {f.name for f in dataclasses.fields(info.params)}
        given = {k: v for k, v in given.items() if k in names or k in choice.params}
    try:
        params = build_params(info.params, given, f"policy.params.{slot}")
    except ParamError as e:
        raise InvalidArgument(str(e)) from None
    ident = identity(stage_name, key, loaded, info.name, info.version, params_dict(params))
    return StagePolicy(ident, obj, params, builtin, env, info.needs)


def _check_signature(key: str, text: str, obj: Any, inputs: tuple[str, ...], with_params: bool) -> None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return                    # a builtin or C callable: no signature to check; the call will tell
    want = f"({', '.join(inputs)}{', *, params' if with_params else ''})"
    try:
        sig.bind(*inputs, **({"params": None} if with_params else {}))
    except TypeError as e:
        raise InvalidArgument(f"{key}: {text!r} has the wrong signature {sig}: a {key.split('.')[-1]} policy is "
                              f"called as f{want} ({e})") from None


class PolicySet:
    """The resolved policies of one agent (or one model cell), by slot."""

    def __init__(self, env: PolicyEnv, policies: Mapping[str, StagePolicy]) -> None:
        self.env = env
        self.by_slot: dict[str, StagePolicy] = dict(policies)

    def __getitem__(self, slot: str) -> StagePolicy:
        return self.by_slot[slot]

    def __contains__(self, slot: str) -> bool:
        return slot in self.by_slot

    def identities(self) -> list[Identity]:
        return [p.ident for _, p in sorted(self.by_slot.items())]

    @classmethod
    def build(cls, env: PolicyEnv, slots: Iterable[str], choices: Mapping[str, Choice],
              defaults: Mapping[str, Mapping[str, Any]] | None = None,
              default_refs: Mapping[str, str] | None = None) -> "PolicySet":
        """Resolve *slots*: each from *choices*, else *default_refs* (the agent's configured
        built-in), else its stage's default built-in."""
        out = {}
        for slot in slots:
            stage = check_slot(slot)
            choice = choices.get(slot) or Choice((default_refs or {}).get(slot) or STAGES[stage].default)
            out[slot] = resolve(slot, choice, env, (defaults or {}).get(slot))
        return cls(env, out)
