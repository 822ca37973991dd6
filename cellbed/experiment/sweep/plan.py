"""Sweep specs and their plan (pure): what ``cellctl sweep SPEC.toml`` runs, and where.

A spec names scenarios, a grid of ``--set`` values and seeds::

    name = "t3"
    scenarios = ["../scenarios/masb-table3-masb.toml", "../scenarios/masb-table3-bestfit.toml"]
    seeds = [1, 2, 3]
    [grid]                       # every combination of these --set values
    "cell.nodes" = [500, 1000]
    [set]                        # fixed overrides for every run
    "run.duration_s" = 3600

Relative scenario paths are relative to the spec's folder (as a scenario's trace path is relative
to the scenario). Every run is one ``cellctl run SCENARIO --set ...`` (the ``[set]`` values, the
grid point's, then ``run.seed``), writing ``<out>/<scenario stem>/<grid point>/seed-<n>/``, where
the grid point is ``key=value,...`` with the keys sorted and the values percent-encoded
(``default`` without a grid).

:func:`plan_sweep` loads every run's scenario with its overrides before anything starts, so a bad
key or value is one line naming it. :func:`run_state` tells what a run's folder holds: a
completed run of the same resolved scenario (skipped on resume), an incomplete one (replaced), a
completed one of another scenario (refused unless ``--overwrite``), or something else (refused).
The resolved scenario is what manifest.json records (cellbed/experiment/results/writer.py
build_manifest): it holds the scenario file's content, every override and the seed, so its hash
is the run's identity.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellbed.domain.config import check_keys, load_toml
from cellbed.domain.errors import CellbedError, FailedPrecondition, InvalidArgument
from cellbed.experiment.results.folder import is_previous_run
from cellbed.experiment.results.files import EVENTS, MANIFEST, RUN_COMPLETED
from cellbed.experiment.results.reader import last_line
from cellbed.experiment.scenario.file import Scenario, load_scenario
from cellbed.experiment.scenario.policies import STAGE_KEYS
from cellbed.runtime.plugins.config import absolute_files
from cellbed.experiment.scenario.keys import field_at

__all__ = ["NO_GRID", "PlannedRun", "SweepPlan", "SweepSpec", "SWEEP_FILE", "load_spec", "manifest_hash",
           "plan_sweep", "run_state", "scenario_hash", "toml_value"]

SWEEP_FORMAT = "cellbed-sweep/1"
SWEEP_FILE = "sweep.json"          # the plan and the last invocation, in <out>/
LOCK_FILE = "sweep.lock"           # held (flock) while a sweep runs in <out>/
LOGS_DIR = "sweep-logs"            # each attempt's output: <out>/sweep-logs/<run key>[.retry].log
NO_GRID = "default"                # the grid point's folder when the spec has no grid
SPEC_KEYS = ("name", "scenarios", "seeds", "grid", "set")
MAX_SCENARIOS, MAX_SEEDS, MAX_VALUES, MAX_RUNS = 64, 1000, 1000, 10000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    scenarios: tuple[Path, ...]                      # absolute
    seeds: tuple[int, ...]
    grid: tuple[tuple[str, tuple[Any, ...]], ...]    # key → values, in the spec's order
    fixed: tuple[tuple[str, Any], ...]               # the [set] table


@dataclass(frozen=True)
class PlannedRun:
    scenario: Path
    stem: str
    point: str                                  # the grid point's folder name
    grid: tuple[tuple[str, Any], ...]           # this point's values, keys sorted
    seed: int
    overrides: tuple[str, ...]                  # the --set list of its `cellctl run`
    scenario_hash: str                          # of the resolved scenario (manifest.json's "scenario")
    nodes: int = 0                              # cell.nodes: what a run's memory scales with

    @property
    def key(self) -> str:
        return f"{self.stem}/{self.point}/seed-{self.seed}"

    def folder(self, out: str | Path) -> Path:
        return Path(out) / self.stem / self.point / f"seed-{self.seed}"

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "scenario": str(self.scenario), "stem": self.stem, "point": self.point,
                "grid": dict(self.grid), "seed": self.seed, "overrides": list(self.overrides),
                "scenario_hash": self.scenario_hash, "nodes": self.nodes}


@dataclass(frozen=True)
class SweepPlan:
    spec: SweepSpec
    runs: tuple[PlannedRun, ...]                # seed-major: every configuration's first seed first

    def configurations(self) -> list[tuple[str, str]]:
        """(scenario stem, grid point) in the spec's order."""
        seen: dict[tuple[str, str], None] = {}
        for stem in (p.stem for p in self.spec.scenarios):
            for r in self.runs:
                if r.stem == stem:
                    seen.setdefault((stem, r.point), None)
        return list(seen)

    def as_json(self) -> dict[str, Any]:
        s = self.spec
        return {"format": SWEEP_FORMAT, "name": s.name, "spec": str(s.path),
                "scenarios": [str(p) for p in s.scenarios], "seeds": list(s.seeds),
                "grid": {k: list(v) for k, v in s.grid}, "set": dict(s.fixed),
                "configurations": [list(c) for c in self.configurations()],
                "runs": [r.as_json() for r in self.runs]}


# ---------------------------------------------------------------------------
# values as --set text and as folder names
# ---------------------------------------------------------------------------

def toml_value(v: Any) -> str:
    """*v* as the TOML text of ``--set key=TEXT`` (cellbed/experiment/scenario/keys.py parse_value)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        if "e" in text:                              # 1e-07 → 1e-7: TOML exponents have no leading zero
            mant, exp = text.split("e")
            text = f"{mant}e{int(exp)}"
        return text
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise InvalidArgument(f"{v!r}: a sweep value must be a string, a number, a boolean or an array of them")


def _display(v: Any) -> str:
    return v if isinstance(v, str) else toml_value(v)


def point_name(values: Mapping[str, Any]) -> str:
    """``key=value,...`` (keys sorted, values percent-encoded, so the name is one folder and two
    different points never share it), or :data:`NO_GRID`."""
    if not values:
        return NO_GRID
    return ",".join(f"{k}={urllib.parse.quote(_display(values[k]), safe='+-._')}" for k in sorted(values))


# ---------------------------------------------------------------------------
# the spec
# ---------------------------------------------------------------------------

def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"cell": {"nodes": [..]}}`` (TOML's unquoted dotted keys) → ``{"cell.nodes": [..]}``."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _check_key(where: str, key: str) -> None:
    if key == "run.seed":
        raise InvalidArgument(f"{where} run.seed: give the seeds as `seeds = [...]`")
    try:
        field_at(Scenario, key)
    except InvalidArgument as e:
        raise InvalidArgument(f"{where} {str(e).removeprefix('--set ')}") from None


def _list(path: Path, key: str, v: Any, lo: int, hi: int) -> list:
    if not isinstance(v, list) or not lo <= len(v) <= hi:
        raise InvalidArgument(f"{path}: {key} must be an array of {lo}..{hi} values, got {v!r}"[:300])
    return v


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check the spec's shape (the values are checked by :func:`plan_sweep`)."""
    p = Path(path)
    data = load_toml(str(p))
    check_keys(data, SPEC_KEYS, f"sweep {p}", dotted="")
    name = data.get("name", p.stem)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgument(f"{p}: name={name!r}: allowed [A-Za-z0-9][A-Za-z0-9._-]{{0,63}}")
    if "scenarios" not in data or "seeds" not in data:
        raise InvalidArgument(f"{p}: give scenarios = [...] and seeds = [...]")
    scen = _list(p, "scenarios", data["scenarios"], 1, MAX_SCENARIOS)
    files: list[Path] = []
    for s in scen:
        if not isinstance(s, str) or not s:
            raise InvalidArgument(f"{p}: scenarios: {s!r} is not a path")
        f = Path(s) if Path(s).is_absolute() else (p.parent / s)
        files.append(f.resolve())
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise InvalidArgument(f"{p}: scenarios: {stems[f.stem]} and {f} have the same stem {f.stem!r}, "
                                  "which names their results folder")
        if f.stem == LOGS_DIR:
            raise InvalidArgument(f"{p}: scenarios: the stem {f.stem!r} is the sweep's own folder; rename {f}")
        stems[f.stem] = f
    seeds = _list(p, "seeds", data["seeds"], 1, MAX_SEEDS)
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int):
            raise InvalidArgument(f"{p}: seeds: {s!r} is not an integer")
    if len(set(seeds)) != len(seeds):
        raise InvalidArgument(f"{p}: seeds: {sorted(x for x in seeds if seeds.count(x) > 1)[0]} is given twice")
    for section in ("grid", "set"):
        if not isinstance(data.get(section, {}), Mapping):
            raise InvalidArgument(f"{p}: [{section}] must be a table of \"dotted.key\" = value")
    grid = _flatten(data.get("grid", {}))
    fixed = _flatten(data.get("set", {}))
    for key, values in grid.items():
        _check_key(f"{p}: [grid]", key)
        _list(p, f"[grid] {key}", values, 1, MAX_VALUES)
        texts = [toml_value(v) for v in values]
        if len(set(texts)) != len(texts):
            raise InvalidArgument(f"{p}: [grid] {key}: the value {next(t for t in texts if texts.count(t) > 1)} "
                                  "is given twice")
        folders: dict[str, Any] = {}
        for v in values:
            other = folders.setdefault(point_name({key: v}), v)
            if other is not v:
                raise InvalidArgument(f"{p}: [grid] {key}: {other!r} and {v!r} would share the folder "
                                      f"{point_name({key: v})}; keep one")
    for key, value in fixed.items():
        _check_key(f"{p}: [set]", key)
        toml_value(value)
        if key in grid:
            raise InvalidArgument(f"{p}: {key} is in both [grid] and [set]; keep it in one")
    n = len(files) * len(seeds) * math.prod(len(v) for v in grid.values())
    if n > MAX_RUNS:
        raise InvalidArgument(f"{p}: {n} runs; a sweep holds at most {MAX_RUNS}")
    return SweepSpec(name=name, path=p.resolve(), scenarios=tuple(files), seeds=tuple(seeds),
                     grid=tuple((k, tuple(v)) for k, v in grid.items()), fixed=tuple(fixed.items()))


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------

def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def manifest_hash(scenario_section: Mapping[str, Any]) -> str:
    """The hash of a manifest's ``scenario`` section (sha256 of its canonical JSON)."""
    return hashlib.sha256(_canon(scenario_section).encode()).hexdigest()


def resolved(sc: Scenario) -> dict[str, Any]:
    """What build_manifest records as ``scenario`` for *sc* (its stages go to a section of their own)."""
    m = sc.as_manifest()
    m.pop("stages", None)
    return json.loads(_canon(m))


def scenario_hash(sc: Scenario) -> str:
    return manifest_hash(resolved(sc))


def _from_spec(key: str, value: Any, base: Path) -> Any:
    """A policy's file reference in a spec is taken from the spec's folder (as its scenarios are)."""
    slot = key.removeprefix("policy.")
    if key.startswith("policy.") and slot in STAGE_KEYS and isinstance(value, str):
        return absolute_files({slot: value}, str(base))[slot]
    return value


def plan_sweep(spec: SweepSpec, check: Callable[[Scenario], None] | None = None) -> SweepPlan:
    """Every run of *spec*, each scenario loaded with its overrides (a bad value is refused here,
    naming the spec, the scenario and the --set). *check* sees one scenario per configuration
    (what a run would refuse before writing anything: the driver, the trace files)."""
    keys = [k for k, _ in spec.grid]
    points = [dict(sorted(zip(keys, combo))) for combo in itertools.product(*(v for _, v in spec.grid))]
    base = spec.path.parent
    fixed = [f"{k}={toml_value(_from_spec(k, v, base))}" for k, v in spec.fixed]
    runs: list[PlannedRun] = []
    for seed in spec.seeds:
        for f in spec.scenarios:
            for pt in points:
                ov = (*fixed, *(f"{k}={toml_value(_from_spec(k, pt[k], base))}" for k in keys), f"run.seed={seed}")
                try:
                    sc = load_scenario(f, ov)
                    if sc.cell.kind != "model":
                        raise FailedPrecondition(
                            f"cell.kind={sc.cell.kind!r}: a sweep runs model cells only (a real cell owns the box's "
                            "namespaces and subnet); run it with cellctl run")
                    if check is not None and seed == spec.seeds[0]:
                        check(sc)
                except CellbedError as e:
                    raise type(e)(f"{spec.path}: {f}: {e}") from None
                name = point_name(pt)
                if len(name.encode()) > 255:
                    raise InvalidArgument(f"{spec.path}: [grid] the point {name[:60]}... is longer than a folder "
                                          "name (255 bytes); use shorter values")
                runs.append(PlannedRun(scenario=f, stem=f.stem, point=name, grid=tuple(pt.items()), seed=seed,
                                       overrides=ov, scenario_hash=scenario_hash(sc),
                                       nodes=sc.cell.nodes))
    return SweepPlan(spec, tuple(runs))


# ---------------------------------------------------------------------------
# what a run's folder holds
# ---------------------------------------------------------------------------

def _first_difference(a: Any, b: Any, prefix: str = "") -> str:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))
        return prefix
    return f"{prefix or 'scenario'}: {_canon(a)[:60]} here, {_canon(b)[:60]} planned"


def run_state(folder: Path, expected: str, expected_scenario: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(state, detail) of a run's folder for the plan's scenario hash *expected*:

    - ``new``: no folder, or an empty one;
    - ``done``: a completed run (events.jsonl ends with run_completed) of the same resolved scenario;
    - ``incomplete``: a run that failed, was stopped or is still running: replaced;
    - ``stale``: a completed run of another scenario (other content, overrides or seed): the detail
      names the first difference when *expected_scenario* is given;
    - ``foreign``: anything else (a file, or a folder that is not a Cellbed run)."""
    if not folder.exists():
        return "new", ""
    if not folder.is_dir():
        return "foreign", f"{folder} is a file"
    if not any(folder.iterdir()):
        return "new", ""
    if not is_previous_run(folder):
        return "foreign", f"{folder} holds files that are not a Cellbed run"
    try:
        last = json.loads(last_line(folder / EVENTS))
    except (OSError, ValueError):
        last = None
    if not isinstance(last, dict) or last.get("kind") != RUN_COMPLETED:
        return "incomplete", f"{folder}: events.jsonl does not end with {RUN_COMPLETED}"
    try:
        got = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("scenario", {})
    except (OSError, ValueError, AttributeError):
        return "incomplete", f"{folder}: {MANIFEST} cannot be read"
    if manifest_hash(got) == expected:
        return "done", ""
    why = _first_difference(got, expected_scenario) if expected_scenario is not None else "its scenario differs"
    return "stale", f"{folder}: a completed run of another scenario ({why})"
