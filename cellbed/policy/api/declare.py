"""How a policy declares itself: a name, a version, its parameters (a dataclass whose fields
carry their allowed ranges) and what inputs it needs. Public (``cellbed.policy.api``).

A plugin is any callable with its stage's signature (``cellbed.policy.api.STAGES``). The
decorator is optional; without it, a policy is named after its attribute and has no parameters::

    from cellbed.policy import api

    @dataclasses.dataclass(frozen=True)
    class Params:
        threshold: float = api.param(0.8, lo=0.0, hi=1.0, doc="used share that counts as overload")

    @api.policy(stage="overload", name="cpu-only", version="1.0", params=Params)
    def cpu_only(load: api.HostLoad, params: Params) -> api.Verdict:
        ...
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Callable, Mapping

INFO_ATTR = "__cellbed_policy__"


@dataclasses.dataclass(frozen=True)
class PolicyInfo:
    """What a policy says of itself (set by :func:`policy`, read by the loader)."""
    stage: str = ""                   # the stage it is written for ('' = not said; the reference's stage is used)
    name: str = ""                    # '' = the attribute's name
    version: str = ""                 # '' = the distribution's version, if any
    params: type | None = None        # a dataclass, or None: the policy takes no parameters
    needs: frozenset[str] = frozenset({"*"})   # optional inputs the mechanism must compute ('*' = all)
    doc: str = ""                     # one line


def policy(*, stage: str = "", name: str = "", version: str = "", params: type | None = None,
           needs: tuple[str, ...] | frozenset[str] | None = None, doc: str = "") -> Callable:
    """Declare a policy (see the module's docstring). *needs* names the optional inputs the
    policy reads (e.g. ``{"cpu_stats"}`` for the fit stage's GPA statistics); undeclared means all."""
    if params is not None and not dataclasses.is_dataclass(params):
        raise TypeError(f"params must be a dataclass, got {params!r}")

    def mark(fn: Callable) -> Callable:
        info = PolicyInfo(stage, name or getattr(fn, "__name__", ""), version, params,
                          frozenset({"*"}) if needs is None else frozenset(needs),
                          doc or _first_line(getattr(fn, "__doc__", "") or ""))
        try:
            setattr(fn, INFO_ATTR, info)
        except (AttributeError, TypeError):
            raise TypeError(f"cannot mark {fn!r} as a policy (it takes no attributes)") from None
        return fn
    return mark


def info_of(obj: Any, attr: str = "") -> PolicyInfo:
    info = getattr(obj, INFO_ATTR, None)
    if isinstance(info, PolicyInfo):
        return info if info.name else dataclasses.replace(info, name=attr)
    return PolicyInfo(name=attr or getattr(obj, "__name__", ""), doc=_first_line(getattr(obj, "__doc__", "") or ""))


def param(default: Any, *, lo: float | None = None, hi: float | None = None, choices: tuple | None = None,
          doc: str = "") -> Any:
    """A dataclass field with its allowed range (checked before anything runs)."""
    meta = {"lo": lo, "hi": hi, "choices": tuple(choices) if choices is not None else None, "doc": doc}
    return dataclasses.field(default=default, metadata={"cellbed": meta})


class ParamError(ValueError):
    """A parameter that is unknown, of the wrong type or out of range: one line naming it."""


def build_params(cls: type | None, given: Mapping[str, Any], where: str) -> Any:
    """An instance of *cls* from *given* (TOML values), every field checked against its type
    and range. *where* prefixes messages, e.g. 'policy.params.overload'."""
    if cls is None:
        if given:
            raise ParamError(f"{where}: this policy takes no parameters, got {sorted(given)}")
        return None
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ParamError(f"{where}.{unknown[0]}: unknown parameter; allowed: {', '.join(sorted(fields)) or 'none'}")
    hints = typing.get_type_hints(cls)
    vals = {}
    for name, f in fields.items():
        if name not in given:
            continue
        vals[name] = _coerce(f"{where}.{name}", given[name], hints.get(name, Any), f.metadata.get("cellbed", {}))
    try:
        out = cls(**vals)
    except (TypeError, ValueError) as e:
        raise ParamError(f"{where}: {e}") from None
    for name, f in fields.items():       # defaults are checked too: a plugin's own default may be out of range
        if name not in given:
            _coerce(f"{where}.{name}", getattr(out, name), hints.get(name, Any), f.metadata.get("cellbed", {}))
    return out


def _coerce(key: str, v: Any, hint: Any, meta: Mapping[str, Any]) -> Any:
    if hint is bool:
        if not isinstance(v, bool):
            raise ParamError(f"{key}: allowed true or false, got {v!r}")
    elif hint is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ParamError(f"{key}: allowed an integer{_range(meta)}, got {v!r}")
    elif hint is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ParamError(f"{key}: allowed a finite number{_range(meta)}, got {v!r}")
        v = float(v)
    elif hint is str:
        if not isinstance(v, str):
            raise ParamError(f"{key}: allowed a string, got {v!r}")
    if meta.get("choices") is not None and v not in meta["choices"]:
        raise ParamError(f"{key}: allowed {', '.join(map(repr, meta['choices']))}, got {v!r}")
    lo, hi = meta.get("lo"), meta.get("hi")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ParamError(f"{key}: allowed {_range(meta).strip(' ()')}, got {v!r}")
    return v


def _range(meta: Mapping[str, Any]) -> str:
    lo, hi = meta.get("lo"), meta.get("hi")
    if lo is None and hi is None:
        return ""
    return f" ({'' if lo is None else lo}..{'' if hi is None else hi})"


def params_dict(p: Any) -> dict:
    """The resolved parameters, as plain values (for the manifest)."""
    return {} if p is None else {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}


def _first_line(s: str) -> str:
    return s.strip().split("\n", 1)[0].strip()
