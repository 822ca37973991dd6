"""What ``cellctl policy list`` shows: every stage, the keys that select its policy, its
reference-architecture stage, its contract, and the policies installed for it (Cellbed's
built-ins and any distribution's entry points), with origin, version and parameters."""
from __future__ import annotations

import dataclasses
import typing

from cellbed.policy.api import STAGES, info_of
from cellbed.runtime.plugins import refs


def _params(cls) -> dict:
    if cls is None:
        return {}
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("cellbed", {})
        default = f.default if f.default is not dataclasses.MISSING else None
        t = hints.get(f.name)
        out[f.name] = {"type": getattr(t, "__name__", str(t)), "default": default,
                       **{k: v for k, v in meta.items() if v not in (None, "")}}
    return out


def policies_of(stage: str) -> list[dict]:
    out = []
    for ep in refs.entry_points(stage):
        dist = ep.dist.name if ep.dist is not None else ""
        row = {"name": ep.name, "origin": "builtin" if dist == "cellbed" else "entry-point", "dist": dist,
               "version": ep.dist.version if ep.dist is not None else "", "target": ep.value, "doc": "",
               "params": {}, "error": ""}
        try:
            info = info_of(ep.load(), ep.value.rsplit(":", 1)[-1])
            row.update(doc=info.doc, params=_params(info.params), version=info.version or row["version"])
        except (Exception, SystemExit) as e:          # an installed plugin that fails to import is listed, with why
            row["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        out.append(row)
    return out


def catalogue() -> list[dict]:
    return [{"stage": s.name, "key": s.keys[0], "keys": list(s.keys), "refarch": s.refarch, "contract": s.contract,
             "where": s.where, "inputs": list(s.inputs), "default": s.default, "group": s.group,
             "policies": policies_of(s.name)} for s in STAGES.values()]
