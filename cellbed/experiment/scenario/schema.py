"""The typed-dataclass machinery of scenario files: knobs with their documentation, choices and ranges; coercion of TOML values with one-line errors naming the dotted key; building nested sections, refusing unknown keys."""
from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import field, fields
from typing import Any
from cellbed.domain.config import check_keys
from cellbed.domain.errors import InvalidArgument


def knob(default: Any = dataclasses.MISSING, doc: str = "", *, choices: Sequence[str] | None = None,
         lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False,
         unit: str = "", factory: Any = None) -> Any:
    """A scenario field: default, documentation and range/choice checks (applied by the loader)."""
    meta = {"doc": doc, "choices": tuple(choices) if choices else None, "lo": lo, "hi": hi,
            "lo_open": lo_open, "hi_open": hi_open, "unit": unit}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type, doc: str) -> Any:
    """A nested table field."""
    return field(default_factory=cls, metadata={"doc": doc, "section": True})


def range_text(m: Mapping[str, Any]) -> str:
    lo, hi = m["lo"], m["hi"]
    u = f" {m['unit']}" if m["unit"] else ""
    if lo is not None and hi is not None:
        return f"{'(' if m['lo_open'] else '['}{lo}, {hi}{')' if m['hi_open'] else ']'}{u}"
    if lo is not None:
        return f"{'>' if m['lo_open'] else '>='} {lo}{u}"
    return f"{'<' if m['hi_open'] else '<='} {hi}{u}"


def type_name(tp: Any) -> str:
    if tp is bool:
        return "a boolean"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    origin = typing.get_origin(tp)
    if origin is tuple:
        return f"an array of {type_name(typing.get_args(tp)[0])[2:]}s"
    if origin in (dict, Mapping):
        return "a table"
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return f"{type_name(inner[0])} (or omitted)"
    return str(tp)


def coerce(key: str, value: Any, tp: Any, meta: Mapping[str, Any]) -> Any:
    """Type-check *value* against the field type *tp* and its range/choices; return the clean value."""
    def bad_type() -> InvalidArgument:
        return InvalidArgument(f"{key}={value!r}: must be {type_name(tp)}")

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):  # Optional[X]
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return coerce(key, value, inner, meta)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise bad_type()
        elem = typing.get_args(tp)[0]
        return tuple(coerce(f"{key}[{i}]", v, elem, meta) for i, v in enumerate(value))
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise bad_type()
        return copy.deepcopy(dict(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise bad_type()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_type()
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad_type()
        value = float(value)
        if not math.isfinite(value):
            raise InvalidArgument(f"{key}={value!r}: must be a finite number")
    elif tp is str:
        if not isinstance(value, str):
            raise bad_type()
        if meta.get("choices") and value not in meta["choices"]:
            raise InvalidArgument(f"{key}={value!r} is not allowed: choose one of {', '.join(meta['choices'])}")
        return value
    else:  # pragma: no cover - schema bug
        raise TypeError(f"unsupported scenario field type {tp!r} for {key}")
    lo, hi = meta.get("lo"), meta.get("hi")
    if lo is not None and (value < lo or (meta["lo_open"] and value == lo)):
        raise InvalidArgument(f"{key}={value!r} is out of range: allowed {range_text(meta)}")
    if hi is not None and (value > hi or (meta["hi_open"] and value == hi)):
        raise InvalidArgument(f"{key}={value!r} is out of range: allowed {range_text(meta)}")
    return value


def field_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def is_section(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("section"))


def build_section(cls: type, raw: Any, prefix: str) -> Any:
    """Build section *cls* from the TOML table *raw*; *prefix* is its dotted key ("" at the top)."""
    where = prefix or "the scenario"
    if isinstance(raw, bool) and "enabled" in {f.name for f in fields(cls)}:
        raw = {"enabled": raw}  # `san = false` shorthand for `[policy.san] enabled = false`
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{prefix}={raw!r}: must be a table")
    flds = {f.name: f for f in fields(cls)}
    check_keys(raw, flds, where, dotted=prefix)
    hints = field_hints(cls)
    kw = {}
    for name, f in flds.items():
        if name not in raw:
            continue
        key = join_key(prefix, name)
        if is_section(f):
            kw[name] = build_section(hints[name], raw[name], key)
        else:
            kw[name] = coerce(key, raw[name], hints[name], f.metadata)
    return cls(**kw)


def join_key(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
