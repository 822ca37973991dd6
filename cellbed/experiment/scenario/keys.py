"""Dotted keys over a typed schema: resolving one (for --set), parsing its value from text, plain data of a section, and the documentation of every key."""
from __future__ import annotations

import dataclasses
import enum
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from cellbed.domain.config import check_keys
from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.scenario.schema import field_hints, is_section, join_key, range_text, type_name


def plain(obj: Any, *, drop_none: bool) -> Any:
    """Dataclasses, enums, tuples → JSON-ready dicts, names and lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in fields(obj):
            v = getattr(obj, f.name)
            if v is None and drop_none:
                continue
            out[f.name] = plain(v, drop_none=drop_none)
        return out
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, Mapping):
        return {str(k.name if isinstance(k, enum.Enum) else k): plain(v, drop_none=drop_none)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v, drop_none=drop_none) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def field_at(root: type, dotted: str) -> tuple[Any, Mapping[str, Any] | None, list[str]]:
    """Resolve a dotted key against the schema → (field type, field metadata, path parts).

    Keys under ``workload.generator`` resolve to the GeneratorConfig field's type (``Any``:
    GeneratorConfig validates it).  A section key (e.g. ``policy.san``) resolves to the section's
    ``enabled`` switch when it has one.  Unknown keys raise InvalidArgument naming the allowed ones.
    """
    parts = dotted.split(".")
    if not dotted or any(not p for p in parts):
        raise InvalidArgument(f"--set {dotted!r}: the key must be a dotted path such as run.seed")
    cls: type = root
    prefix = ""
    for i, part in enumerate(parts):
        flds = {f.name: f for f in fields(cls)}
        check_keys([part], flds, prefix or "the scenario", dotted=prefix)
        f = flds[part]
        tp = field_hints(cls)[part]
        prefix = join_key(prefix, part)
        last = i == len(parts) - 1
        if is_section(f):
            if last:
                if "enabled" in {g.name for g in fields(tp)}:
                    ef = next(g for g in fields(tp) if g.name == "enabled")
                    return bool, ef.metadata, parts + ["enabled"]
                raise InvalidArgument(f"--set {dotted}: {dotted} is a table; set one of its keys "
                                      f"({', '.join(g.name for g in fields(tp))})")
            cls = tp
            continue
        if prefix == "policy.params":
            if len(parts) != i + 3:
                raise InvalidArgument(f"--set {dotted}: stage parameters are policy.params.STAGE.NAME")
            return Any, None, parts
        if prefix == "workload.generator":
            if last:
                raise InvalidArgument("--set workload.generator: set one generator key, e.g. "
                                      "workload.generator.target_used_cpu=0.45")
            if len(parts) != i + 2:
                raise InvalidArgument(f"--set {dotted}: generator keys are one level deep")
            return Any, None, parts
        if not last:
            raise InvalidArgument(f"--set {dotted}: {prefix} is not a table")
        return tp, f.metadata, parts
    raise AssertionError("unreachable")


def parse_value(key: str, text: str, tp: Any) -> Any:
    """Parse the value of ``--set key=value`` as a TOML value; a bare word is a string for string keys."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        if tp is str or tp is Any:
            return text
        raise InvalidArgument(f"--set {key}={text}: cannot read {text!r} as a TOML value "
                              f"({key} must be {type_name(tp)})") from None
    if tp is str and not isinstance(value, str):
        return text  # `--set run.name=2024` means the string "2024"
    return value


@dataclass(frozen=True)
class KeyDoc:
    """One scenario key: its type, default, allowed values and documentation."""

    key: str
    type: str
    default: Any
    allowed: str
    doc: str


def schema_docs_of(root: type) -> dict[str, KeyDoc]:
    """Every key (dotted) of the schema *root* → KeyDoc, in schema order."""
    out: dict[str, KeyDoc] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = field_hints(cls)
        inst = cls()
        for f in fields(cls):
            key = join_key(prefix, f.name)
            if is_section(f):
                walk(hints[f.name], key)
                continue
            m = f.metadata
            if m.get("choices"):
                allowed = " | ".join(m["choices"])
            elif m.get("lo") is not None or m.get("hi") is not None:
                allowed = range_text(m)
            else:
                allowed = ""
            out[key] = KeyDoc(key, type_name(hints[f.name]), plain(getattr(inst, f.name), drop_none=False),
                              allowed, m.get("doc", ""))

    walk(root, "")
    return out
