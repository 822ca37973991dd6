"""Policy references: what a user writes to name a policy, and loading it.

Three forms, the same everywhere (scenario TOML, agent configs, ``cell up --policy``, sweeps,
Ansible variables):

* ``NAME``: an entry point of the stage's group ``cellbed.policy.<stage>``. Cellbed's own
  built-ins are registered that way too, in its ``pyproject.toml``;
* ``package.module:attr``: an importable module;
* ``path/to/file.py:attr``: a Python file (a relative path is taken from the configuration
  file that names it, or the working directory).
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import os
import re
import sys
from typing import Any

from cellbed.domain.errors import InvalidArgument
from cellbed.policy.api import STAGES

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
ATTR_RE = MODULE_RE


@dataclasses.dataclass(frozen=True)
class Ref:
    text: str               # as written
    kind: str               # "entry-point" | "module" | "file"
    target: str             # the entry point's name, the module, or the file's absolute path
    attr: str               # '' for an entry point

    @property
    def canonical(self) -> str:
        return self.target if self.kind == "entry-point" else f"{self.target}:{self.attr}"


@dataclasses.dataclass(frozen=True)
class Loaded:
    ref: Ref
    obj: Any
    attr: str               # the attribute's own name (for a default policy name)
    source: str             # the file it came from ('' if none: a C extension, a lambda in a REPL)
    dist: str               # the distribution that ships it ('' for a file)
    dist_version: str
    group: str              # the entry-point group, for an entry point


def parse(stage: str, text: str, base_dir: str = "") -> Ref:
    """Raise InvalidArgument (one line naming the stage's key) unless *text* is a reference."""
    key = STAGES[stage].keys[0]
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"{key}: a policy reference is a name, module:attr or file.py:attr, got {text!r}")
    text = text.strip()
    if ":" not in text:
        if not NAME_RE.match(text):
            raise InvalidArgument(f"{key}: {text!r} is not a policy name (letters, digits, '_', '-', '.')")
        return Ref(text, "entry-point", text, "")
    target, attr = text.rsplit(":", 1)
    if not ATTR_RE.match(attr):
        raise InvalidArgument(f"{key}: {text!r}: {attr!r} after ':' is not an attribute name")
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = target if os.path.isabs(target) else os.path.join(base_dir or os.getcwd(), target)
        return Ref(text, "file", os.path.normpath(path), attr)
    if not MODULE_RE.match(target):
        raise InvalidArgument(f"{key}: {text!r}: {target!r} is not a module name")
    return Ref(text, "module", target, attr)


def entry_points(stage: str) -> list[md.EntryPoint]:
    """The installed policies of a stage (built-ins included), by name."""
    return sorted(md.entry_points(group=STAGES[stage].group), key=lambda e: e.name)


def load(stage: str, ref: Ref) -> Loaded:
    """Load the object *ref* names. Raises InvalidArgument with one line on any failure: an
    unknown name (listing the available ones), a missing module, file or attribute, or an
    import that raises (the plugin's own error, shortened)."""
    key = STAGES[stage].keys[0]
    if ref.kind == "entry-point":
        eps = [e for e in entry_points(stage) if e.name == ref.target]
        if not eps:
            names = ", ".join(e.name for e in entry_points(stage)) or "none"
            raise InvalidArgument(f"{key}: unknown policy {ref.target!r}; available: {names}")
        ep = eps[0]
        obj = _guarded(key, ref, ep.load)
        mod, _, attr = ep.value.partition(":")
        dist = ep.dist.name if ep.dist is not None else ""
        ver = ep.dist.version if ep.dist is not None else ""
        return Loaded(ref, obj, attr.split(".")[-1] or ep.name, _source_of(obj, mod), dist, ver, ep.group)
    if ref.kind == "file":
        if not os.path.isfile(ref.target):
            raise InvalidArgument(f"{key}: {ref.text!r}: no such file {ref.target}")
        module = _guarded(key, ref, lambda: _load_file(ref.target))
        obj = _attr(key, ref, module)
        return Loaded(ref, obj, ref.attr.split(".")[-1], ref.target, "", "", "")
    module = _guarded(key, ref, lambda: importlib.import_module(ref.target))
    obj = _attr(key, ref, module)
    dist, ver = _dist_of(ref.target)
    return Loaded(ref, obj, ref.attr.split(".")[-1], _source_of(obj, ref.target), dist, ver, "")


def _guarded(key: str, ref: Ref, fn):
    try:
        return fn()
    except InvalidArgument:
        raise
    except ModuleNotFoundError as e:
        raise InvalidArgument(f"{key}: {ref.text!r}: no module named {e.name!r}") from None
    except (Exception, SystemExit) as e:     # a plugin's import is user code: any error is its own
        raise InvalidArgument(f"{key}: {ref.text!r} failed to load: {type(e).__name__}: {_one_line(e)}") from None


def _attr(key: str, ref: Ref, module) -> Any:
    obj = module
    for part in ref.attr.split("."):
        if not hasattr(obj, part):
            raise InvalidArgument(f"{key}: {ref.text!r}: {getattr(module, '__name__', 'the module')} has no "
                                  f"attribute {ref.attr!r}")
        obj = getattr(obj, part)
    return obj


def _load_file(path: str):
    """Import a file as a module of its own, named after its path's hash, so that two files of
    the same name do not collide and a reload of an unchanged file is the same module."""
    name = "cellbed_plugin_" + hashlib.sha256(path.encode()).hexdigest()[:12] + "_" + \
        re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InvalidArgument(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _source_of(obj: Any, module: str) -> str:
    mod = sys.modules.get(getattr(obj, "__module__", "") or module) or sys.modules.get(module)
    path = getattr(mod, "__file__", "") or ""
    return path if path.endswith(".py") else ""


def _dist_of(module: str) -> tuple[str, str]:
    top = module.split(".")[0]
    names = md.packages_distributions().get(top, [])
    if not names:
        return "", ""
    try:
        return names[0], md.version(names[0])
    except md.PackageNotFoundError:
        return names[0], ""


def _one_line(e: BaseException, n: int = 200) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= n else s[: n - 3] + "..."
