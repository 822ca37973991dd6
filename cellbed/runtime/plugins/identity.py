"""A loaded policy's identity, for reproducibility: the reference as written, where it came
from (built-in, entry point, module or file), its distribution and version, the API version,
the SHA-256 of its source and its resolved parameters. Recorded in every run's manifest."""
from __future__ import annotations

import dataclasses
import hashlib
import json

from cellbed.policy.api import API_VERSION, STAGES
from cellbed.runtime.plugins.refs import Loaded

BUILTIN_DIST = "cellbed"


@dataclasses.dataclass(frozen=True)
class Identity:
    stage: str
    key: str                  # the configuration key that selected it
    ref: str                  # as written
    name: str                 # the policy's own name
    origin: str               # builtin | entry-point | module | file
    target: str               # module:attr or the file's path:attr, as loaded
    dist: str
    dist_version: str
    version: str              # the policy's declared version ('' = its distribution's)
    api_version: str
    sha256: str               # of its source file ('' when it has none)
    params: dict

    @property
    def label(self) -> str:
        """Short and unique enough for a metric label or a table: the name, and where from if not built in."""
        return self.name if self.origin == "builtin" else f"{self.name} ({self.ref})"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Identity":
        return cls(**{f.name: d.get(f.name, {} if f.name == "params" else "") for f in dataclasses.fields(cls)})

    def same_code(self, other: "Identity") -> bool:
        return (self.sha256, self.dist_version, self.version) == (other.sha256, other.dist_version, other.version)


def sha256_file(path: str) -> str:
    if not path:
        return ""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def identity(stage: str, key: str, loaded: Loaded, name: str, version: str, params: dict) -> Identity:
    ref = loaded.ref
    if ref.kind == "entry-point":
        origin = "builtin" if loaded.dist == BUILTIN_DIST else "entry-point"
        target = f"{getattr(loaded.obj, '__module__', '')}:{loaded.attr}"
    else:
        origin, target = ref.kind, ref.canonical
    return Identity(stage, key or STAGES[stage].keys[0], ref.text, name, origin, target, loaded.dist,
                    loaded.dist_version, version or loaded.dist_version, API_VERSION, sha256_file(loaded.source),
                    json.loads(json.dumps(params, default=str)))
