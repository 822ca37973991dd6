"""Scenario files: the TOML that names one experiment (DESIGN §10.4, §13).

A scenario has five tables::

    [cell]        model cell of N nodes, or a real cell of H hosts
    [workload]    generator (params → GeneratorConfig) or GCD trace (+ TraceOptions),
                  multiplier, compaction, time compression, real-cell scale-down
    [policy]      the policy at every stage: front-end, fit test, scores, SAN and its
                  constants, Megha's GMs/LMs/shares, sampling probes
    [run]         duration, tick, seed, name
    [migration]   the migration cost model's calibration file (model cells)

Every key has a default (the papers' value where there is one; ``[RECON]`` where
there is none), a unit in its name or doc, and a validator.  Bad values and
unknown keys raise :class:`cellbed.domain.errors.InvalidArgument` naming the dotted key
and what is allowed.  ``--set key=value`` overrides go through the same checks.

Public API::

    load_scenario(path, overrides=()) -> Scenario
    parse_scenario(data, overrides=(), *, base_dir=None, default_name="") -> Scenario
    apply_overrides(raw, overrides) -> dict
    schema_docs() -> dict[str, KeyDoc]
    Scenario.as_dict() / .as_manifest() / .generator_config() / .trace_options()
    Scenario.stage_policies()

Notes on the shape:

* ``policy.san`` is a table (``[policy.san] enabled = true, max_util = 0.9, ...``).
  TOML cannot hold both ``san = true`` and a ``[policy.san]`` table, so the switch
  is ``policy.san.enabled``; ``san = false`` (a bare bool) is accepted as shorthand,
  and so is ``--set policy.san=false``.
* ``[workload.generator]`` is passed to :meth:`GeneratorConfig.from_mapping`, except
  the five keys a scenario owns elsewhere: ``nodes`` (``cell.nodes``/``cell.hosts``),
  ``duration_s`` (``run.duration_s``), ``seed`` (``run.seed``),
  ``workload_multiplier`` (``workload.multiplier``) and ``compaction``
  (``workload.compaction``).  Setting them there is an error naming the right key.
"""
from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from cellbed.domain.config import check_keys
from cellbed.domain.errors import InvalidArgument, NotFound
from cellbed.policy.scores import DEFAULT_BANDS, SiasParams, SrasParams
from cellbed.workload import GeneratorConfig, TraceOptions
from cellbed.experiment.scenario.schema import build_section, coerce, section
from cellbed.experiment.scenario.sections import (
    CellSection,
    FIT_NAMES,
    FRONTENDS,
    MeghaSection,
    MigrationSection,
    PolicySection,
    RealScaleSection,
    RunSection,
    SamplingSection,
    SanSection,
    TraceSection,
    WorkloadSection,
)
from cellbed.experiment.scenario.keys import KeyDoc, field_at, parse_value, plain, schema_docs_of
from cellbed.experiment.scenario.policies import STAGE_KEYS, check_policy_keys, plugin_sources
from cellbed.experiment.scenario.stages import stage_policies
from cellbed.runtime.plugins.config import absolute_files

__all__ = [
    "CellSection",
    "FRONTENDS",
    "FIT_NAMES",
    "KeyDoc",
    "MeghaSection",
    "MigrationSection",
    "PolicySection",
    "RealScaleSection",
    "RunSection",
    "SamplingSection",
    "SanSection",
    "Scenario",
    "TraceSection",
    "WorkloadSection",
    "apply_overrides",
    "load_scenario",
    "parse_scenario",
    "schema_docs",
]

"""Initial-placement front-ends: MASB random-BA + SIAS; Megha GMs/LMs; ``central`` = Megha with
1 GM × 1 LM; ``sampling`` = Sparrow-style d random probes with late binding; ``bestfit`` =
Borg-like central best-fit over all nodes, no migration of its own (MASB Table 3 baseline)."""
# GeneratorConfig fields a scenario sets from elsewhere: field → the dotted key that owns it.
GENERATOR_OWNED = {
    "nodes": "cell.nodes (model cell) or cell.hosts (real cell)",
    "duration_s": "run.duration_s",
    "seed": "run.seed",
    "workload_multiplier": "workload.multiplier",
    "compaction": "workload.compaction",
}


# ---------------------------------------------------------------------------
# the knob helper: a dataclass field with its doc and validator attached
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# the schema
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """A whole validated scenario. Build it with :func:`load_scenario` or :func:`parse_scenario`."""

    cell: CellSection = section(CellSection, "the cell")
    workload: WorkloadSection = section(WorkloadSection, "the workload")
    policy: PolicySection = section(PolicySection, "the policy at every stage")
    run: RunSection = section(RunSection, "run length, tick, seed, name")
    migration: MigrationSection = section(MigrationSection, "the migration cost model's calibration")

    def __post_init__(self) -> None:
        w, c, p = self.workload, self.cell, self.policy
        check_policy_keys(p, None)
        if w.source == "trace" and not w.trace.path:
            raise InvalidArgument("workload.trace.path is required when workload.source = 'trace'")
        if w.source == "generator" and w.trace.path:
            raise InvalidArgument(f"workload.trace.path={w.trace.path!r} is set but workload.source = 'generator':"
                                  " set workload.source = 'trace' or remove the path")
        if c.kind == "model" and w.time_compression != 1.0:
            raise InvalidArgument(f"workload.time_compression={w.time_compression:g} applies to real cells only: "
                                  "a model cell runs in virtual time (set 1.0, or cell.kind = 'real')")
        if p.frontend == "central" and (p.megha.gms, p.megha.lms) != (1, 1):
            raise InvalidArgument(f"policy.frontend='central' is Megha with 1 GM × 1 LM: set policy.megha.gms = 1 "
                                  f"and policy.megha.lms = 1 (got {p.megha.gms} × {p.megha.lms})")
        if (c.kind == "model" and p.frontend in ("megha", "sampling") and w.source != "trace"
                and p.megha.lms > c.nodes):      # a trace brings its own machines: checked at build
            raise InvalidArgument(f"policy.megha.lms={p.megha.lms} is out of range: allowed 1..{c.nodes} "
                                  f"(each LM needs one of the cell.nodes = {c.nodes} nodes at least)")
        if w.source == "generator":
            self.generator_config()  # validates [workload.generator] against the rest
        if w.source == "jobs":
            self._check_jobs()
            if w.jobs.arrivals_s >= self.run.duration_s:
                raise InvalidArgument(f"workload.jobs.arrivals_s={w.jobs.arrivals_s:g} must be < run.duration_s="
                                      f"{self.run.duration_s:g} (the rest of the run is the drain)")

    def _check_jobs(self) -> None:
        w, c, p = self.workload, self.cell, self.policy
        model = c.kind == "model"
        if not (model and p.frontend in ("megha", "central", "sampling")) and not (not model and p.frontend == "central"):
            raise InvalidArgument(f"workload.source='jobs' runs on a model cell with a Megha front-end (megha, "
                                  f"central, sampling), or on a real cell (and its twin) with policy.frontend = "
                                  f"'central': got cell.kind={c.kind!r}, policy.frontend={p.frontend!r}")
        n = sum(int(k) for k, _, _ in w.jobs.node_classes)
        want, key = (c.nodes, "cell.nodes") if model else (c.hosts, "cell.hosts")
        if w.jobs.node_classes and n != want:
            raise InvalidArgument(f"workload.jobs.node_classes hold {n} nodes: {key} must be {n} (got {want})")
        if not model and w.jobs.fill != 0.0:
            raise InvalidArgument(f"workload.jobs.fill={w.jobs.fill:g}: a real cell starts empty (background tasks "
                                  "are a model cell's warm start); set 0")

    # ------------------------------------------------------------------
    def generator_config(self) -> GeneratorConfig:
        """The GeneratorConfig this scenario runs: [workload.generator] plus the keys the scenario owns.

        Raises InvalidArgument naming the dotted key on any bad value.
        """
        g = self.workload.generator
        known = [f.name for f in fields(GeneratorConfig)]
        for k in g:
            if k in GENERATOR_OWNED:
                raise InvalidArgument(f"workload.generator.{k} is set by {GENERATOR_OWNED[k]}: remove it from "
                                      "[workload.generator]")
        check_keys(g, [n for n in known if n not in GENERATOR_OWNED], "workload.generator", dotted="workload.generator")
        data = dict(g)
        data.update(nodes=self.cell.nodes if self.cell.kind == "model" else self.cell.hosts,
                    duration_s=self.run.duration_s, seed=self.run.seed,
                    workload_multiplier=self.workload.multiplier, compaction=self.workload.compaction)
        try:
            return GeneratorConfig.from_mapping(data)
        except (ValueError, TypeError) as e:
            raise InvalidArgument(_generator_message(str(e))) from None

    def trace_options(self) -> TraceOptions:
        """The TraceOptions for [workload.trace] (path excluded)."""
        t = self.workload.trace
        try:
            return TraceOptions(window_start_us=t.window_start_us, window_end_us=t.window_end_us,
                                node_fraction=t.node_fraction, node_seed=t.node_seed,
                                removed_task_grace_us=t.removed_task_grace_us, reorder_window_us=t.reorder_window_us)
        except ValueError as e:
            raise InvalidArgument(str(e).replace("TraceOptions.", "workload.trace.")) from None

    def as_dict(self) -> dict[str, Any]:
        """The scenario's own keys, every one resolved; valid input for :func:`parse_scenario`
        (``None`` values, which TOML cannot hold, are left out)."""
        return plain(self, drop_none=True)

    def as_manifest(self) -> dict[str, Any]:
        """Everything needed to re-run and to read the run (JSON-ready).

        The scenario keys (as :meth:`as_dict`), plus: the full GeneratorConfig (every field), or
        the trace options; the score parameters and ASR bands in force; and the policy at each stage
        of the reference architecture (seed 002's warning: write every stage's policy down).
        """
        m = plain(self, drop_none=False)
        defaults = {"params": {}, "errors": "strict", "budget_ms": 1000.0, **{k: "" for k in STAGE_KEYS}}
        for k, v in defaults.items():      # the default: manifests (and sweeps' scenario hashes) stay as before
            if m["policy"].get(k, v) == v and k not in ("fit", "initial_score", "realloc_score"):
                m["policy"].pop(k, None)
        if self.run.explain == 0.01:
            del m["run"]["explain"]      # the default: manifests (and sweeps' scenario hashes) stay as before the key
        plugins = plugin_sources(self.policy)
        if plugins:
            m["policy"]["plugins"] = plugins
        if not self.migration.calibration:
            del m["migration"]      # the default: manifests (and sweeps' scenario hashes) stay as before the key
        if self.workload.source != "jobs":
            del m["workload"]["jobs"]   # likewise: only a jobs workload reads [workload.jobs]
        if self.workload.source == "generator":
            m["workload"]["generator_resolved"] = plain(self.generator_config(), drop_none=False)
        elif self.workload.source == "trace":
            m["workload"]["trace_options"] = plain(self.trace_options(), drop_none=False)
        m["policy"]["score_params"] = {
            "sias": plain(SiasParams(), drop_none=False), "sras": plain(SrasParams(), drop_none=False)}
        m["policy"]["asr_bands"] = plain(DEFAULT_BANDS, drop_none=False)
        m["stages"] = self.stage_policies()
        return m

    def stage_policies(self) -> dict[str, str]:
        """The policy at each stage of seed 002's reference architecture (scenario/stages.py)."""
        return stage_policies(self)


def _generator_message(msg: str) -> str:
    """Rename GeneratorConfig.<field> in *msg* to the scenario's dotted key."""
    owned = {"nodes": "cell.nodes", "duration_s": "run.duration_s", "seed": "run.seed",
             "workload_multiplier": "workload.multiplier", "compaction": "workload.compaction"}
    prefix = "GeneratorConfig."
    if msg.startswith(prefix):
        name = msg[len(prefix):].split(" ", 1)[0]
        return owned.get(name, f"workload.generator.{name}") + msg[len(prefix) + len(name):]
    return f"workload.generator: {msg}"


# ---------------------------------------------------------------------------
# loading and overrides
# ---------------------------------------------------------------------------

def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Return a copy of the scenario table *raw* with each ``key=value`` of *overrides* applied.

    Each key is checked against the schema and each value against its field's type and range
    before it is applied (errors name the ``--set`` that caused them).
    """
    out = copy.deepcopy(dict(raw))
    for ov in overrides:
        if "=" not in ov:
            raise InvalidArgument(f"--set {ov!r}: expected key=value, e.g. run.seed=7")
        key, text = (s.strip() for s in ov.split("=", 1))
        tp, meta, parts = field_at(Scenario, key)
        value = parse_value(key, text, tp)
        if meta is not None:
            try:
                coerce(key, value, tp, meta)
            except InvalidArgument as e:
                raise InvalidArgument(f"--set {ov}: {e}") from None
        node = out
        for j, p in enumerate(parts[:-1]):
            nxt = node.get(p)
            if isinstance(nxt, bool) and j + 1 < len(parts):  # `san = false` shorthand already there
                nxt = {"enabled": nxt}
            if not isinstance(nxt, Mapping):
                nxt = {}
            node[p] = nxt = dict(nxt)
            node = nxt
        node[parts[-1]] = value
    return out


def parse_scenario(data: Mapping[str, Any] | str, overrides: Sequence[str] = (), *,
                   base_dir: str | Path | None = None, default_name: str = "") -> Scenario:
    """Build a Scenario from TOML text or an already-parsed table, applying ``--set`` overrides.

    *base_dir* resolves a relative ``workload.trace.path``; *default_name* fills an empty
    ``run.name``.  Raises InvalidArgument naming the key on any problem.
    """
    if isinstance(data, str):
        try:
            data = tomllib.loads(data)
        except tomllib.TOMLDecodeError as e:
            raise InvalidArgument(f"scenario is not valid TOML: {e}") from None
    raw = apply_overrides(data, overrides)
    if base_dir is not None:
        tr = raw.get("workload", {}).get("trace", {}) if isinstance(raw.get("workload"), Mapping) else {}
        if isinstance(tr, Mapping) and isinstance(tr.get("path"), str) and tr["path"]:
            p = Path(tr["path"])
            if not p.is_absolute():
                raw["workload"] = dict(raw["workload"])
                raw["workload"]["trace"] = dict(tr, path=str((Path(base_dir) / p).resolve()))
        pol = raw.get("policy")
        if isinstance(pol, Mapping):
            refs = {k: v for k, v in pol.items() if k in STAGE_KEYS and isinstance(v, str) and v}
            if refs:
                raw["policy"] = {**pol, **absolute_files(refs, str(base_dir))}
        mig = raw.get("migration")
        if isinstance(mig, Mapping) and isinstance(mig.get("calibration"), str) and mig["calibration"]:
            if not Path(mig["calibration"]).is_absolute():
                raw["migration"] = dict(mig, calibration=str((Path(base_dir) / mig["calibration"]).resolve()))
    if default_name:
        run = raw.get("run", {})
        if isinstance(run, Mapping) and not run.get("name"):
            raw["run"] = dict(run, name=default_name)
    return build_section(Scenario, raw, "")


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read and validate the scenario file *path*; ``run.name`` defaults to the file's stem."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise NotFound(f"no scenario file {str(p)!r}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidArgument(f"{p}: not valid TOML: {e}") from None
    return parse_scenario(data, [_cwd_ref(o) for o in overrides], base_dir=p.parent, default_name=p.stem)


def _cwd_ref(override: str) -> str:
    """``--set policy.STAGE=file.py:attr``: a relative file is the command line's, from the working
    folder (a file written in the scenario is taken from the scenario's folder)."""
    key, sep, value = override.partition("=")
    slot = key.strip().removeprefix("policy.")
    if not (sep and key.strip().startswith("policy.") and slot in STAGE_KEYS):
        return override
    try:                              # a TOML string ("...", as a sweep writes it) or a bare word
        ref, quoted = tomllib.loads(f"v = {value.strip()}")["v"], True
    except tomllib.TOMLDecodeError:
        ref, quoted = value.strip(), False
    if not isinstance(ref, str):
        return override
    ref = absolute_files({slot: ref}, str(Path.cwd()))[slot]
    return f"{key}={json.dumps(ref) if quoted else ref}"


# ---------------------------------------------------------------------------
# documentation
# ---------------------------------------------------------------------------


def schema_docs() -> dict[str, KeyDoc]:
    """Every scenario key (dotted) → KeyDoc, in schema order."""
    return schema_docs_of(Scenario)
