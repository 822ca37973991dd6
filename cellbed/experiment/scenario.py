"""Scenario files: the TOML that names one experiment (DESIGN §10.4, §13).

A scenario has four tables::

    [cell]        model cell of N nodes, or a real cell of H hosts
    [workload]    generator (params → GeneratorConfig) or GCD trace (+ TraceOptions),
                  multiplier, compaction, time compression, real-cell scale-down
    [policy]      the policy at every stage: front-end, fit test, scores, SAN and its
                  constants, Megha's GMs/LMs/shares, sampling probes
    [run]         duration, tick, seed, name

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
import dataclasses
import enum
import ipaddress
import math
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cellbed.domain.errors import InvalidArgument, NotFound
from cellbed.policy.scores import DEFAULT_BANDS, SCORES, SiasParams, SrasParams
from cellbed.workload import GeneratorConfig, TraceOptions

__all__ = [
    "CellSection",
    "FRONTENDS",
    "FIT_NAMES",
    "KeyDoc",
    "MeghaSection",
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

FRONTENDS = ("masb", "megha", "central", "sampling", "bestfit")
"""Initial-placement front-ends: MASB random-BA + SIAS; Megha GMs/LMs; ``central`` = Megha with
1 GM × 1 LM; ``sampling`` = Sparrow-style d random probes with late binding; ``bestfit`` =
Borg-like central best-fit over all nodes, no migration of its own (MASB Table 3 baseline)."""
FIT_NAMES = ("sum", "gpa")
CELL_KINDS = ("model", "real")
SOURCES = ("generator", "trace")
SPIKE_POLICIES = ("none", "pause", "kill")
ACCELS = ("auto", "kvm", "tcg")

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


def _range_text(m: Mapping[str, Any]) -> str:
    lo, hi = m["lo"], m["hi"]
    u = f" {m['unit']}" if m["unit"] else ""
    if lo is not None and hi is not None:
        return f"{'(' if m['lo_open'] else '['}{lo}, {hi}{')' if m['hi_open'] else ']'}{u}"
    if lo is not None:
        return f"{'>' if m['lo_open'] else '>='} {lo}{u}"
    return f"{'<' if m['hi_open'] else '<='} {hi}{u}"


def _type_name(tp: Any) -> str:
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
        return f"an array of {_type_name(typing.get_args(tp)[0])[2:]}s"
    if origin in (dict, Mapping):
        return "a table"
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return f"{_type_name(inner[0])} (or omitted)"
    return str(tp)


def _coerce(key: str, value: Any, tp: Any, meta: Mapping[str, Any]) -> Any:
    """Type-check *value* against the field type *tp* and its range/choices; return the clean value."""
    def bad_type() -> InvalidArgument:
        return InvalidArgument(f"{key}={value!r}: must be {_type_name(tp)}")

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):  # Optional[X]
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return _coerce(key, value, inner, meta)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise bad_type()
        elem = typing.get_args(tp)[0]
        return tuple(_coerce(f"{key}[{i}]", v, elem, meta) for i, v in enumerate(value))
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
        raise InvalidArgument(f"{key}={value!r} is out of range: allowed {_range_text(meta)}")
    if hi is not None and (value > hi or (meta["hi_open"] and value == hi)):
        raise InvalidArgument(f"{key}={value!r} is out of range: allowed {_range_text(meta)}")
    return value


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_section(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("section"))


def _build(cls: type, raw: Any, prefix: str) -> Any:
    """Build section *cls* from the TOML table *raw*; *prefix* is its dotted key ("" at the top)."""
    where = prefix or "the scenario"
    if isinstance(raw, bool) and "enabled" in {f.name for f in fields(cls)}:
        raw = {"enabled": raw}  # `san = false` shorthand for `[policy.san] enabled = false`
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{prefix}={raw!r}: must be a table")
    flds = {f.name: f for f in fields(cls)}
    for k in raw:
        if k not in flds:
            raise InvalidArgument(f"unknown key {_join(prefix, k)} (allowed in {where}: {', '.join(flds)})")
    hints = _hints(cls)
    kw = {}
    for name, f in flds.items():
        if name not in raw:
            continue
        key = _join(prefix, name)
        if _is_section(f):
            kw[name] = _build(hints[name], raw[name], key)
        else:
            kw[name] = _coerce(key, raw[name], hints[name], f.metadata)
    return cls(**kw)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# ---------------------------------------------------------------------------
# the schema
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CellSection:
    """``[cell]``: what the agents run on."""

    kind: str = knob("model", "model = virtual-time model cell; real = namespace hosts with libvirt/QEMU",
                     choices=CELL_KINDS)
    nodes: int = knob(12583, "model cell: nodes drawn from the GCD machine classes (GCD cell: 12,583); "
                             "ignored with a trace, whose machines make the cell", lo=1, hi=1_000_000)
    hosts: int = knob(3, "real cell: number of namespace hosts (cellctl cell up --hosts)", lo=1, hi=32)
    subnet: str = knob("10.231.0.0/24", "real cell: private IPv4 subnet the cell owns, with room for hosts + 16")
    host_cpu_cores: float = knob(0.5, "real cell: CPU capacity per host, cores", lo=0.05, hi=64, unit="cores")
    host_mem_mib: int = knob(1024, "real cell: guest memory capacity per host, MiB", lo=128, hi=1 << 20,
                             unit="MiB")
    accel: str = knob("auto", "real cell: guest acceleration (auto picks kvm when /dev/kvm works)",
                      choices=ACCELS)
    network_delay_s: float = knob(0.0005, "model cell: one-way delay of every agent message, s (Sparrow's and "
                                          "Megha's simulators: 0.5 ms); a real cell has its real network",
                                  lo=0.0, hi=60.0, unit="s")

    def __post_init__(self) -> None:
        try:
            net = ipaddress.ip_network(self.subnet)
        except ValueError as e:
            raise InvalidArgument(f"cell.subnet={self.subnet!r}: {e}") from None
        if (net.version != 4 or not net.is_private or net.is_loopback or net.is_link_local
                or net.num_addresses < self.hosts + 16):
            raise InvalidArgument(f"cell.subnet={self.subnet!r}: must be a private IPv4 range with room for "
                                  f"cell.hosts + 16 = {self.hosts + 16} addresses")


@dataclass(frozen=True)
class TraceSection:
    """``[workload.trace]``: a GCD-2011 trace folder and the TraceOptions to read it with."""

    path: str = knob("", "folder holding <table>/part-NNNNN-of-MMMMM.csv[.gz]; relative paths are taken "
                         "from the scenario file's folder; required when workload.source = 'trace'")
    window_start_us: int | None = knob(None, "first trace time read, µs of trace time (inclusive); "
                                             "omit = from the start", lo=0, unit="µs")
    window_end_us: int | None = knob(None, "end of the window, µs of trace time (exclusive); omit = to the end",
                                     lo=1, unit="µs")
    node_fraction: float = knob(1.0, "share of machines kept (seeded subset; tasks follow their machines)",
                                lo=0.0, hi=1.0, lo_open=True)
    node_seed: int = knob(0, "seed of the machine subset", lo=0, hi=2**63 - 1)
    removed_task_grace_us: int = knob(600_000_000, "late usage of a removed task within this is tolerated, µs",
                                      lo=0, unit="µs")

    def __post_init__(self) -> None:
        s, e = self.window_start_us, self.window_end_us
        if s is not None and e is not None and e <= s:
            raise InvalidArgument(f"workload.trace.window_end_us={e} must be > workload.trace.window_start_us={s}")


@dataclass(frozen=True)
class RealScaleSection:
    """``[workload.real]``: how the GCD-shaped stream is scaled down to a real cell's small guests.

    No paper gives these; every default is [RECON].  Tasks that do not become a VM are still
    placed and accounted by the agents (they hold resources) but run no guest.
    """

    task_fraction: float = knob(1.0, "share of eligible tasks that become a real VM (seeded)", lo=0.0, hi=1.0,
                                lo_open=True)
    max_vms_per_host: int = knob(4, "at most this many guests run at once on a host", lo=1, hi=64)
    min_vm_mem_mib: int = knob(96, "floor on a guest's memory (the guest kernel needs it), MiB", lo=64,
                               hi=1 << 20, unit="MiB")
    min_task_s: float = knob(120.0, "tasks shorter than this (simulated s) never become a VM: booting takes "
                                    "seconds", lo=0.0, unit="s")
    dirty_mib_s_per_core: float = knob(8.0, "guest dirty rate per used core, MiB/s (GCD has no dirty rates)",
                                       lo=0.0, hi=4096, unit="MiB/s")


@dataclass(frozen=True)
class WorkloadSection:
    """``[workload]``: what arrives."""

    source: str = knob("generator", "generator = synthetic GCD-shaped stream; trace = GCD-2011 replay",
                       choices=SOURCES)
    multiplier: float = knob(1.0, "workload multiplier: each task is duplicated floor(m)-1 times, +1 with "
                                  "probability frac(m) (MASB §D.10; Table 4 uses 1.00–1.06)", lo=1.0, hi=64.0)
    compaction: float = knob(0.0, "fraction of nodes removed from the cell (MASB Table 5 uses 0–0.03)",
                             lo=0.0, hi=1.0, hi_open=True)
    time_compression: float = knob(1.0, "real cells: simulated seconds per wall-clock second. Every *_s key of a "
                                        "scenario is simulated time, so on a real cell it lasts *_s / "
                                        "time_compression wall seconds (migrations still take their real time). "
                                        "Model cells run in virtual time and need 1.0",
                                   lo=0.0, hi=1e6, lo_open=True)
    generator: dict[str, Any] = knob(None, "GeneratorConfig fields (cellbed.workload.GeneratorConfig); "
                                           "defaults are the digest §E values", factory=dict)
    trace: TraceSection = section(TraceSection, "trace folder and read options")
    real: RealScaleSection = section(RealScaleSection, "real-cell scale-down")


@dataclass(frozen=True)
class SanSection:
    """``[policy.san]``: Service Allocation Negotiation and the NA/BA constants (DESIGN §7)."""

    enabled: bool = knob(True, "run SAN (migration-based rebalancing) on overloaded nodes")
    max_util: float = knob(0.9, "used resources, and production requests (RUS rule), must stay within this "
                                "fraction of capacity", lo=0.0, hi=1.0, lo_open=True)
    rus_threshold: float = knob(0.10, "a spike is a rise of more than this fraction of capacity between two "
                                      "samples", lo=0.0, hi=1.0, lo_open=True)
    candidate_count: int = knob(15, "recommendations per GetCandidateNodes (score-weighted sampling)", lo=1,
                                hi=1000)
    realloc_scan_limit: int = knob(2000, "nodes the BA scores per GetCandidateNodes", lo=1, hi=10_000_000)
    initial_scan_limit: int = knob(200, "nodes the BA scores per initial allocation", lo=1, hi=10_000_000)
    node_expiry_s: float = knob(300.0, "BA cache entries older than this are dropped, s", lo=0.0, lo_open=True,
                                unit="s")
    window_s: float = knob(30.0, "SAN step 3: wait this long for candidates' answers, s", lo=0.0, lo_open=True,
                           unit="s")
    recommendation_expiry_s: float = knob(180.0, "SAN step 4: recommendations expire after this, s", lo=0.0,
                                          lo_open=True, unit="s")
    tabu_restarts: int = knob(25, "SCS tabu search restarts", lo=1, hi=10_000)
    tabu_steps: int = knob(5, "SCS tabu search depth per restart", lo=1, hi=10_000)
    tabu_patience: int = knob(6, "SCS stops after this many non-improving steps", lo=1, hi=10_000)
    monitor_period_s: float = knob(60.0, "NA monitoring period, s (DESIGN §7: 60 on model cells, 10 on real)",
                                   lo=0.0, lo_open=True, unit="s")
    report_period_s: float = knob(60.0, "NA → BA report period, s", lo=0.0, lo_open=True, unit="s")
    spike_policy: str = knob("none", "what an NA does to non-production VMs on a RUS spike",
                             choices=SPIKE_POLICIES)
    scs_log_every: int = knob(50, "keep 1 in this many SCS runs in the decision log (0 = none)", lo=0)
    scoring_log_every: int = knob(5000, "keep 1 in this many scorings/target choices in the decision log "
                                        "(0 = none)", lo=0)


@dataclass(frozen=True)
class MeghaSection:
    """``[policy.megha]``: Global and Local Masters (DESIGN §9; seed 001)."""

    gms: int = knob(10, "Global Masters (Megha's scaling runs: 10)", lo=1, hi=10_000)
    lms: int = knob(10, "Local Masters; each LM's cluster is cut into one partition per GM", lo=1, hi=10_000)
    update_period_s: float = knob(10.0, "LM → GM state update period, s (Megha: 10)", lo=0.0, lo_open=True,
                                  unit="s")
    shares: tuple[float, ...] = knob((), "fair share of each user queue, fractions summing to 1 (Megha's "
                                         "fairness run: [0.10, 0.25, 0.15, 0.50]); empty = one queue, no "
                                         "fairness preemption; workload user u goes to queue u mod len(shares)",
                                     lo=0.0, hi=1.0, lo_open=True)
    queue_gm: tuple[int, ...] = knob((), "GM index (0-based) serving each queue; empty = queue i → GM i mod gms",
                                     lo=0)

    def __post_init__(self) -> None:
        if self.shares and abs(sum(self.shares) - 1.0) > 1e-6:
            raise InvalidArgument(f"policy.megha.shares={list(self.shares)} must sum to 1 (sum {sum(self.shares):g})")
        if self.queue_gm:
            if len(self.queue_gm) != len(self.shares):
                raise InvalidArgument(f"policy.megha.queue_gm has {len(self.queue_gm)} entries: give one per "
                                      f"queue in policy.megha.shares ({len(self.shares)}), or none")
            for i, g in enumerate(self.queue_gm):
                if g >= self.gms:
                    raise InvalidArgument(f"policy.megha.queue_gm[{i}]={g} is out of range: allowed "
                                          f"[0, {self.gms - 1}] (policy.megha.gms = {self.gms})")


@dataclass(frozen=True)
class SamplingSection:
    """``[policy.sampling]``: the Sparrow-style baseline."""

    probes: int = knob(2, "d: random nodes probed per task (late binding to the first to answer)", lo=1,
                       hi=1000)


@dataclass(frozen=True)
class PolicySection:
    """``[policy]``: the policy at every stage."""

    frontend: str = knob("masb", "initial placement: masb | megha | central (Megha 1 GM × 1 LM) | sampling "
                                 "(Sparrow-style) | bestfit (Borg-like central best-fit, MASB Table 3)",
                         choices=FRONTENDS)
    fit: str = knob("sum", "fit test: sum (deterministic sums) or gpa (Gaussian percentile, seed 003)",
                    choices=FIT_NAMES)
    initial_score: str = knob("sias", "score for initial allocation (masb front-end)", choices=tuple(SCORES))
    realloc_score: str = knob("sras", "score for re-allocation (SAN candidates and target choice)",
                              choices=tuple(SCORES))
    gpa_rho: float = knob(0.01, "fit = gpa: accepted probability that CPU demand exceeds capacity (ϱ)",
                          lo=0.0, hi=0.5, lo_open=True)
    gpa_min_samples: int = knob(100, "fit = gpa: fewest 1-s CPU samples behind μ and σ", lo=2)
    san: SanSection = section(SanSection, "SAN switch and constants")
    megha: MeghaSection = section(MeghaSection, "Megha GMs/LMs")
    sampling: SamplingSection = section(SamplingSection, "Sparrow-style sampling")


@dataclass(frozen=True)
class RunSection:
    """``[run]``: length, granularity, seed and name."""

    duration_s: float = knob(2_505_600.0, "simulated span, s (GCD: 29 days)", lo=0.0, lo_open=True, unit="s")
    tick_s: float = knob(60.0, "one row of ticks.csv per tick, s (MASB/AGOCS: 1-minute cycles)", lo=0.0,
                         lo_open=True, unit="s")
    seed: int = knob(0, "the run seed: the workload and every agent's RNG derive from it", lo=0, hi=2**63 - 1)
    name: str = knob("", "run name; empty = the scenario file's name")

    def __post_init__(self) -> None:
        if self.tick_s > self.duration_s:
            raise InvalidArgument(f"run.tick_s={self.tick_s:g} must be <= run.duration_s={self.duration_s:g}")


@dataclass(frozen=True)
class Scenario:
    """A whole validated scenario. Build it with :func:`load_scenario` or :func:`parse_scenario`."""

    cell: CellSection = section(CellSection, "the cell")
    workload: WorkloadSection = section(WorkloadSection, "the workload")
    policy: PolicySection = section(PolicySection, "the policy at every stage")
    run: RunSection = section(RunSection, "run length, tick, seed, name")

    def __post_init__(self) -> None:
        w, c, p = self.workload, self.cell, self.policy
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
        if w.source == "generator":
            self.generator_config()  # validates [workload.generator] against the rest

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
            if k not in known:
                allowed = ", ".join(n for n in known if n not in GENERATOR_OWNED)
                raise InvalidArgument(f"unknown key workload.generator.{k} (allowed in workload.generator: {allowed})")
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
                                removed_task_grace_us=t.removed_task_grace_us)
        except ValueError as e:
            raise InvalidArgument(str(e).replace("TraceOptions.", "workload.trace.")) from None

    def as_dict(self) -> dict[str, Any]:
        """The scenario's own keys, every one resolved; valid input for :func:`parse_scenario`
        (``None`` values, which TOML cannot hold, are left out)."""
        return _plain(self, drop_none=True)

    def as_manifest(self) -> dict[str, Any]:
        """Everything needed to re-run and to read the run (JSON-ready).

        The scenario keys (as :meth:`as_dict`), plus: the full GeneratorConfig (every field), or
        the trace options; the score parameters and ASR bands in force; and the policy at each stage
        of the reference architecture (seed 002's warning: write every stage's policy down).
        """
        m = _plain(self, drop_none=False)
        if self.workload.source == "generator":
            m["workload"]["generator_resolved"] = _plain(self.generator_config(), drop_none=False)
        else:
            m["workload"]["trace_options"] = _plain(self.trace_options(), drop_none=False)
        m["policy"]["score_params"] = {
            "sias": _plain(SiasParams(), drop_none=False), "sras": _plain(SrasParams(), drop_none=False)}
        m["policy"]["asr_bands"] = _plain(DEFAULT_BANDS, drop_none=False)
        m["stages"] = self.stage_policies()
        return m

    def stage_policies(self) -> dict[str, str]:
        """The policy at each stage of seed 002's reference architecture (digest §A.5, §A.8 checklist).

        Stages the runner decides and the scenario does not (e.g. T11 recovery) are left for the
        runner to add to the manifest.
        """
        p, w, san = self.policy, self.workload, self.policy.san
        fit = ("sum of requests ≤ capacity (memory and CPU)" if p.fit == "sum" else
               f"GPA: CPU μ'+Φ⁻¹(1−{p.gpa_rho:g})σ' ≤ capacity (≥ {p.gpa_min_samples} samples), memory as a sum")
        if w.source == "generator":
            j1 = f"synthetic GCD-shaped generator, seed {self.run.seed}, multiplier {w.multiplier:g}"
        else:
            j1 = f"GCD-2011 trace {w.trace.path}, node fraction {w.trace.node_fraction:g}, multiplier {w.multiplier:g}"
        if w.compaction:
            j1 += f", cell compacted by {w.compaction:.2%}"
        s: dict[str, str] = {
            "J1": j1,
            "J2": "every job eligible (no user or flow-control filter)",
            "J3": "arrival order (no job sorting)",
            "T1": "every task of an arrived job",
            "T2": "FIFO by arrival time",
        }
        m = p.megha
        queues = (f"{len(m.shares)} user queues with shares {list(m.shares)}" if m.shares else "one queue")
        if p.frontend == "masb":
            s |= {
                "M4": "BAs are not filtered",
                "M5": "a uniformly random BA handles each arrival",
                "R3": "constraints vs node attributes on the BA's cache (stale ≤ "
                      f"{san.node_expiry_s:g} s)",
                "R4": f"{fit}, on requested resources, from the BA cache",
                "R5": f"highest {p.initial_score} over ≤ {san.initial_scan_limit} matching nodes "
                      "(requested resources)",
            }
        elif p.frontend in ("megha", "central"):
            s |= {
                "J2": f"{queues}; a queue is served by one GM, round-robin among its queues",
                "M4": "LMs by the GM's eventually consistent view (updates every "
                      f"{m.update_period_s:g} s, piggy-backed on replies)",
                "M5": f"internal partitions round-robin, then external partitions round-robin across LMs "
                      f"(repartition); {m.gms} GM × {m.lms} LM",
                "R3": "constraint bit-vectors ANDed per partition",
                "R4": f"{fit}, on the GM's view; the LM validates on its true state",
                "R5": "first fit in partition bit order",
            }
        elif p.frontend == "sampling":
            s |= {
                "M4": "no scheduler filter; every task's scheduler probes nodes itself",
                "M5": f"{p.sampling.probes} random probes per task, late binding to the first free",
                "R3": "constraints vs attributes of the probed nodes",
                "R4": f"{fit}, on the probed nodes' state",
                "R5": "first probe to offer a free slot (late binding)",
            }
        else:  # bestfit
            s |= {
                "M4": "monolithic: one central scheduler",
                "M5": "the central scheduler",
                "R3": "constraints vs node attributes over all nodes",
                "R4": f"{fit}, on requested resources, exact state",
                "R5": "best fit: the feasible node left with the least free capacity (sum of normalised "
                      "free CPU and memory)",
            }
        if p.frontend in ("megha", "central") and m.shares:
            s["T10"] = ("Megha fairness: under contention, preempt tasks of the user with the largest share "
                        "violation; the LM verifies")
        elif san.enabled and san.spike_policy != "none":
            s["T10"] = f"RUS spike > {san.rus_threshold:.0%}: {san.spike_policy} non-production VMs on the host"
        else:
            s["T10"] = "none"
        if san.enabled:
            s["T12"] = (f"SAN on overload (used or production requests > {san.max_util:.0%}): SCS by tabu search "
                        f"({san.tabu_restarts} restarts × {san.tabu_steps} steps, patience {san.tabu_patience}); "
                        f"candidates by {p.realloc_score} over ≤ {san.realloc_scan_limit} nodes, "
                        f"{san.candidate_count} by score-weighted sampling; window {san.window_s:g} s; "
                        f"target by {p.realloc_score} on fresh usage, score-weighted; "
                        f"expiry {san.recommendation_expiry_s:g} s")
        else:
            s["T12"] = "none (no migration)"
        return s


def _generator_message(msg: str) -> str:
    """Rename GeneratorConfig.<field> in *msg* to the scenario's dotted key."""
    owned = {"nodes": "cell.nodes", "duration_s": "run.duration_s", "seed": "run.seed",
             "workload_multiplier": "workload.multiplier", "compaction": "workload.compaction"}
    prefix = "GeneratorConfig."
    if msg.startswith(prefix):
        name = msg[len(prefix):].split(" ", 1)[0]
        return owned.get(name, f"workload.generator.{name}") + msg[len(prefix) + len(name):]
    return f"workload.generator: {msg}"


def _plain(obj: Any, *, drop_none: bool) -> Any:
    """Dataclasses, enums, tuples → JSON-ready dicts, names and lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in fields(obj):
            v = getattr(obj, f.name)
            if v is None and drop_none:
                continue
            out[f.name] = _plain(v, drop_none=drop_none)
        return out
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, Mapping):
        return {str(k.name if isinstance(k, enum.Enum) else k): _plain(v, drop_none=drop_none)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, drop_none=drop_none) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


# ---------------------------------------------------------------------------
# loading and overrides
# ---------------------------------------------------------------------------

def _field_at(dotted: str) -> tuple[Any, Mapping[str, Any] | None, list[str]]:
    """Resolve a dotted key against the schema → (field type, field metadata, path parts).

    Keys under ``workload.generator`` resolve to the GeneratorConfig field's type (``Any``:
    GeneratorConfig validates it).  A section key (e.g. ``policy.san``) resolves to the section's
    ``enabled`` switch when it has one.  Unknown keys raise InvalidArgument naming the allowed ones.
    """
    parts = dotted.split(".")
    if not dotted or any(not p for p in parts):
        raise InvalidArgument(f"--set {dotted!r}: the key must be a dotted path such as run.seed")
    cls: type = Scenario
    prefix = ""
    for i, part in enumerate(parts):
        flds = {f.name: f for f in fields(cls)}
        if part not in flds:
            raise InvalidArgument(f"unknown key {_join(prefix, part)} (allowed in {prefix or 'the scenario'}: "
                                  f"{', '.join(flds)})")
        f = flds[part]
        tp = _hints(cls)[part]
        prefix = _join(prefix, part)
        last = i == len(parts) - 1
        if _is_section(f):
            if last:
                if "enabled" in {g.name for g in fields(tp)}:
                    ef = next(g for g in fields(tp) if g.name == "enabled")
                    return bool, ef.metadata, parts + ["enabled"]
                raise InvalidArgument(f"--set {dotted}: {dotted} is a table; set one of its keys "
                                      f"({', '.join(g.name for g in fields(tp))})")
            cls = tp
            continue
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


def _parse_value(key: str, text: str, tp: Any) -> Any:
    """Parse the value of ``--set key=value`` as a TOML value; a bare word is a string for string keys."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        if tp is str or tp is Any:
            return text
        raise InvalidArgument(f"--set {key}={text}: cannot read {text!r} as a TOML value "
                              f"({key} must be {_type_name(tp)})") from None
    if tp is str and not isinstance(value, str):
        return text  # `--set run.name=2024` means the string "2024"
    return value


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
        tp, meta, parts = _field_at(key)
        value = _parse_value(key, text, tp)
        if meta is not None:
            try:
                _coerce(key, value, tp, meta)
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
    if default_name:
        run = raw.get("run", {})
        if isinstance(run, Mapping) and not run.get("name"):
            raw["run"] = dict(run, name=default_name)
    return _build(Scenario, raw, "")


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
    return parse_scenario(data, overrides, base_dir=p.parent, default_name=p.stem)


# ---------------------------------------------------------------------------
# documentation
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KeyDoc:
    """One scenario key: its type, default, allowed values and documentation."""

    key: str
    type: str
    default: Any
    allowed: str
    doc: str


def schema_docs() -> dict[str, KeyDoc]:
    """Every scenario key (dotted) → KeyDoc, in schema order."""
    out: dict[str, KeyDoc] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = _hints(cls)
        inst = cls()
        for f in fields(cls):
            key = _join(prefix, f.name)
            if _is_section(f):
                walk(hints[f.name], key)
                continue
            m = f.metadata
            if m.get("choices"):
                allowed = " | ".join(m["choices"])
            elif m.get("lo") is not None or m.get("hi") is not None:
                allowed = _range_text(m)
            else:
                allowed = ""
            out[key] = KeyDoc(key, _type_name(hints[f.name]), _plain(getattr(inst, f.name), drop_none=False),
                              allowed, m.get("doc", ""))

    walk(Scenario, "")
    return out
