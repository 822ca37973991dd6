"""Scenario TOML → typed, validated dataclasses; --set overrides; the resolved manifest (DESIGN §10.4, §13)."""
from __future__ import annotations

import json
import math

import pytest

from cellbed.domain.errors import InvalidArgument, NotFound
from cellbed.experiment.scenario.file import (
    FRONTENDS,
    Scenario,
    apply_overrides,
    load_scenario,
    parse_scenario,
    schema_docs,
)
from cellbed.policy.scores import SCORES
from cellbed.workload import GeneratorConfig, TraceOptions

# ---------------------------------------------------------------------------
# defaults are the papers' values
# ---------------------------------------------------------------------------


def test_empty_scenario_has_the_paper_defaults():
    s = parse_scenario("")
    assert (s.cell.kind, s.cell.nodes) == ("model", 12583)  # GCD cell
    assert (s.policy.frontend, s.policy.fit, s.policy.initial_score, s.policy.realloc_score) == \
        ("masb", "sum", "sias", "sras")
    san = s.policy.san
    assert san.enabled is True
    assert (san.max_util, san.rus_threshold, san.candidate_count) == (0.9, 0.10, 15)
    assert (san.realloc_scan_limit, san.initial_scan_limit, san.node_expiry_s) == (2000, 200, 300.0)
    assert (san.window_s, san.recommendation_expiry_s) == (30.0, 180.0)
    assert (san.tabu_restarts, san.tabu_steps, san.tabu_patience) == (25, 5, 6)
    assert (san.monitor_period_s, san.report_period_s, san.spike_policy) == (60.0, 60.0, "none")
    assert (s.policy.megha.gms, s.policy.megha.lms, s.policy.megha.update_period_s) == (10, 10, 10.0)
    assert s.policy.sampling.probes == 2
    assert (s.run.duration_s, s.run.tick_s, s.run.seed) == (2_505_600.0, 60.0, 0)  # 29 days, 1-min cycles
    assert (s.workload.source, s.workload.multiplier, s.workload.compaction) == ("generator", 1.0, 0.0)


def test_every_key_has_a_doc_and_a_default():
    docs = schema_docs()
    assert len(docs) > 50
    for key, d in docs.items():
        assert d.doc.strip(), f"{key} has no documentation"
    assert docs["policy.san.max_util"].allowed == "(0.0, 1.0]"
    assert docs["policy.frontend"].allowed == " | ".join(FRONTENDS)
    assert docs["policy.san.window_s"].default == 30.0


def test_a_full_scenario_parses_into_its_values():
    s = parse_scenario("""
        [cell]
        kind = "model"
        nodes = 200
        [workload]
        multiplier = 1.02
        compaction = 0.01
        [workload.generator]
        target_used_cpu = 0.5
        churn = true
        [policy]
        frontend = "masb"
        fit = "gpa"
        initial_score = "sias_gain"
        realloc_score = "sras_gain"
        [policy.san]
        max_util = 0.85
        spike_policy = "pause"
        [run]
        duration_s = 3600
        tick_s = 30
        seed = 7
        name = "x"
    """)
    assert s.cell.nodes == 200 and isinstance(s.run.duration_s, float) and s.run.duration_s == 3600.0
    assert (s.policy.fit, s.policy.initial_score, s.policy.realloc_score) == ("gpa", "sias_gain", "sras_gain")
    assert (s.policy.san.max_util, s.policy.san.spike_policy) == (0.85, "pause")
    g = s.generator_config()
    assert isinstance(g, GeneratorConfig)
    # the scenario owns nodes, duration, seed, multiplier and compaction; the rest passes through
    assert (g.nodes, g.duration_s, g.seed, g.workload_multiplier, g.compaction) == (200, 3600.0, 7, 1.02, 0.01)
    assert (g.target_used_cpu, g.churn) == (0.5, True)


def test_real_cell_feeds_hosts_to_the_generator():
    s = parse_scenario('[cell]\nkind = "real"\nhosts = 3\n[workload]\ntime_compression = 60.0\n'
                       '[run]\nduration_s = 36000')
    assert s.generator_config().nodes == 3
    assert s.workload.time_compression == 60.0


def test_trace_source_resolves_path_and_options(tmp_path):
    f = tmp_path / "sc.toml"
    f.write_text('[workload]\nsource = "trace"\n[workload.trace]\npath = "gcd"\nnode_fraction = 0.1\n'
                 'window_start_us = 600000000\nwindow_end_us = 4200000000\n')
    s = load_scenario(f)
    assert s.workload.trace.path == str((tmp_path / "gcd").resolve())  # relative to the scenario file
    assert s.run.name == "sc"  # the file's stem
    assert s.trace_options() == TraceOptions(window_start_us=600_000_000, window_end_us=4_200_000_000,
                                             node_fraction=0.1)


# ---------------------------------------------------------------------------
# errors name the dotted key and what is allowed
# ---------------------------------------------------------------------------

BAD = [
    # (scenario text, substrings the error must contain)
    ('[policy]\nfrontend = "borg"', ["policy.frontend", "masb, megha, central, sampling, bestfit"]),
    ('[policy]\nfit = "max"', ["policy.fit", "gpa, sum", "file.py:attr"]),
    ('[policy]\ninitial_score = "sas"', ["policy.initial_score", "sias, sias_gain, sras, sras_gain"]),
    ('[policy]\ntask_order = "x y"', ["policy.task_order", "not a policy name"]),
    ('[policy.params]\nnostage = {}', ["policy.params.nostage", "unknown policy stage"]),
    ('[policy.san]\nmax_util = 1.5', ["policy.san.max_util=1.5", "(0.0, 1.0]"]),
    ('[policy.san]\nmax_util = 0', ["policy.san.max_util=0.0", "(0.0, 1.0]"]),  # open at 0
    ('[policy.san]\ncandidate_count = 0', ["policy.san.candidate_count=0", "[1, 1000]"]),
    ('[policy.san]\nspike_policy = "drop"', ["policy.san.spike_policy", "none, pause, kill"]),
    ('[policy.san]\nwindow_s = -1', ["policy.san.window_s", "> 0.0 s"]),
    ('[policy.san]\ntabu_steps = 2.5', ["policy.san.tabu_steps=2.5", "must be an integer"]),
    ('[policy.san]\nenabled = "yes"', ["policy.san.enabled", "must be a boolean"]),
    ('[policy]\nsan = 3', ["policy.san=3", "must be a table"]),
    ('[cell]\nnodes = 200.0', ["cell.nodes=200.0", "must be an integer"]),
    ('[cell]\nnodes = 0', ["cell.nodes=0", "[1, 1000000]"]),
    ('[cell]\nkind = "vm"', ["cell.kind", "model, real"]),
    ('[cell]\nhosts = 40', ["cell.hosts=40", "[1, 32]"]),
    ('[cell]\nsubnet = "8.8.8.0/24"', ["cell.subnet", "private IPv4"]),
    ('[cell]\nsubnet = "10.0.0.0/30"', ["cell.subnet", "room for cell.hosts + 16"]),
    ('[cell]\nsubnet = "nope"', ["cell.subnet='nope'"]),
    ('[workload]\nmultiplier = 0.5', ["workload.multiplier=0.5", "[1.0, 64.0]"]),
    ('[workload]\ncompaction = 1.0', ["workload.compaction=1.0", "[0.0, 1.0)"]),
    ('[workload]\nsource = "file"', ["workload.source", "generator, trace"]),
    ('[workload]\nsource = "trace"', ["workload.trace.path is required"]),
    ('[workload.trace]\npath = "x"', ["workload.trace.path", "workload.source = 'generator'"]),
    ('[workload]\ntime_compression = 10.0', ["workload.time_compression", "real cells only"]),
    ('[workload]\ntime_compression = 0\n[cell]\nkind="real"', ["workload.time_compression=0.0", "(0.0, 1000000.0]"]),
    ('[workload.trace]\nnode_fraction = 0', ["workload.trace.node_fraction=0.0", "(0.0, 1.0]"]),
    ('[workload]\nsource="trace"\n[workload.trace]\npath="x"\nwindow_start_us=10\nwindow_end_us=5',
     ["workload.trace.window_end_us=5", "window_start_us=10"]),
    ('[workload.real]\nmax_vms_per_host = 0', ["workload.real.max_vms_per_host=0", "[1, 64]"]),
    ('[workload.generator]\nnodes = 10', ["workload.generator.nodes is set by cell.nodes"]),
    ('[workload.generator]\nseed = 1', ["workload.generator.seed is set by run.seed"]),
    ('[workload.generator]\nworkload_multiplier = 2', ["workload.generator.workload_multiplier", "workload.multiplier"]),
    ('[workload.generator]\ntarget_used_cpu = 3', ["workload.generator.target_used_cpu", "(0, 2)"]),
    ('[workload.generator]\nbogus = 1', ["unknown key workload.generator.bogus", "target_used_cpu"]),
    ('[workload]\ngenerator = 3', ["workload.generator=3", "must be a table"]),
    ('[policy]\nfrontend = "central"', ["policy.frontend='central'", "policy.megha.gms = 1", "10 × 10"]),
    ('[cell]\nnodes = 5\n[policy]\nfrontend = "megha"\n[policy.megha]\nlms = 10',
     ["policy.megha.lms=10", "allowed 1..5", "cell.nodes = 5"]),
    ('[cell]\nnodes = 3\n[policy]\nfrontend = "sampling"\n[policy.megha]\nlms = 4', ["policy.megha.lms=4", "1..3"]),
    ('[cell]\nnodes = 20000\n[policy]\nfrontend = "megha"\n[policy.megha]\ngms = 5000', ["policy.megha.gms=5000", "1000"]),
    ('[cell]\nnodes = 20000\n[policy]\nfrontend = "megha"\n[policy.megha]\nlms = 5000', ["policy.megha.lms=5000", "1000"]),
    ('[policy.megha]\nshares = [0.5, 0.4]', ["policy.megha.shares", "sum to 1"]),
    ('[policy.megha]\nshares = [0.5, 0.0, 0.5]', ["policy.megha.shares[1]=0.0", "(0.0, 1.0]"]),
    ('[policy.megha]\nshares = [0.5, 0.5]\nqueue_gm = [0]', ["policy.megha.queue_gm", "one per queue"]),
    ('[policy.megha]\nshares = [0.5, 0.5]\nqueue_gm = [0, 10]', ["policy.megha.queue_gm[1]=10", "[0, 9]"]),
    ('[policy.megha]\nshares = 0.5', ["policy.megha.shares=0.5", "must be an array"]),
    ('[policy]\ngpa_rho = 0.7', ["policy.gpa_rho=0.7", "(0.0, 0.5]"]),
    ('[run]\nduration_s = 0', ["run.duration_s=0.0", "> 0.0 s"]),
    ('[run]\nduration_s = nan', ["run.duration_s=nan", "finite"]),
    ('[run]\ntick_s = 120\nduration_s = 60', ["run.tick_s=120", "run.duration_s=60"]),
    ('[run]\nseed = -1', ["run.seed=-1", "[0, "]),
    ('[run]\nseed = true', ["run.seed=True", "must be an integer"]),
    ('[run]\nname = 5', ["run.name=5", "must be a string"]),
    # unknown keys name the key and the allowed ones
    ('[policy]\nsna = true', ["unknown key policy.sna", "frontend, fit, initial_score"]),
    ('[policy.san]\nmaxutil = 0.9', ["unknown key policy.san.maxutil", "max_util"]),
    ('[runs]\nseed = 1', ["unknown key runs", "cell, workload, policy, run"]),
    ('cell = 3', ["cell=3", "must be a table"]),
    ('[run\nseed=1', ["not valid TOML"]),
]


@pytest.mark.parametrize("text,needles", BAD, ids=[b[1][0][:40] for b in BAD])
def test_bad_values_name_the_key_and_the_allowed_values(text, needles):
    with pytest.raises(InvalidArgument) as ei:
        parse_scenario(text)
    msg = str(ei.value)
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"


def test_every_score_name_is_accepted_and_nothing_else():
    for name in SCORES:
        assert parse_scenario(f'[policy]\nrealloc_score = "{name}"').policy.realloc_score == name
    with pytest.raises(InvalidArgument):
        parse_scenario('[policy]\nrealloc_score = "SRAS"')  # names are exact


def test_san_bool_shorthand():
    assert parse_scenario("[policy]\nsan = false").policy.san.enabled is False
    assert parse_scenario("[policy]\nsan = false").policy.san.max_util == 0.9


def test_central_with_one_gm_and_one_lm_is_valid():
    s = parse_scenario('[policy]\nfrontend = "central"\nsan = false\n[policy.megha]\ngms = 1\nlms = 1')
    assert s.stage_policies()["M5"].endswith("1 GM × 1 LM")


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(NotFound, match="no scenario file"):
        load_scenario(tmp_path / "nope.toml")


# ---------------------------------------------------------------------------
# --set overrides
# ---------------------------------------------------------------------------

BASE = '[cell]\nnodes = 200\n[policy.san]\nmax_util = 0.8\n[run]\nduration_s = 3600\n'

GOOD_SETS = [
    # (override, attribute path, expected value)
    ("run.seed=7", "run.seed", 7),
    ("run.duration_s=7200", "run.duration_s", 7200.0),  # TOML int accepted for a float key
    ("run.name=table3", "run.name", "table3"),  # a bare word is a string for string keys
    ("run.name=2024", "run.name", "2024"),  # ... and so is a number
    ('policy.frontend="megha"', "policy.frontend", "megha"),
    ("policy.frontend=bestfit", "policy.frontend", "bestfit"),
    ("policy.san=false", "policy.san.enabled", False),  # shorthand for policy.san.enabled
    ("policy.san.enabled=false", "policy.san.enabled", False),
    ("policy.san.candidate_count=20", "policy.san.candidate_count", 20),
    ("policy.megha.shares=[0.1, 0.25, 0.15, 0.5]", "policy.megha.shares", (0.1, 0.25, 0.15, 0.5)),
    ("workload.multiplier=1.04", "workload.multiplier", 1.04),
    ("cell.nodes = 400", "cell.nodes", 400),  # spaces around = are fine
]


@pytest.mark.parametrize("ov,attr,want", GOOD_SETS, ids=[g[0] for g in GOOD_SETS])
def test_set_overrides_apply_and_keep_the_rest(ov, attr, want):
    s = parse_scenario(BASE, [ov])
    v = s
    for part in attr.split("."):
        v = getattr(v, part)
    assert v == want
    assert s.policy.san.max_util == 0.8 or ov.startswith("policy.san.max_util")  # untouched keys survive
    assert s.cell.nodes in (200, 400)


def test_set_reaches_generator_keys_and_generator_validates_them():
    s = parse_scenario(BASE, ["workload.generator.target_used_cpu=0.5"])
    assert s.generator_config().target_used_cpu == 0.5
    with pytest.raises(InvalidArgument, match="workload.generator.target_used_cpu"):
        parse_scenario(BASE, ["workload.generator.target_used_cpu=5"])


def test_later_set_wins():
    assert parse_scenario(BASE, ["run.seed=1", "run.seed=2"]).run.seed == 2


BAD_SETS = [
    ("run.seed=x", ["--set run.seed=x", "must be an integer"]),
    ("run.seed=1.5", ["--set run.seed=1.5", "run.seed=1.5", "must be an integer"]),
    ("run.seed", ["expected key=value"]),
    ("policy.san.max_util=2", ["--set policy.san.max_util=2", "(0.0, 1.0]"]),
    ("policy.frontend=borg", ["policy.frontend='borg'", "masb, megha"]),
    ("policy.bogus=1", ["unknown key policy.bogus", "frontend"]),
    ("run.seed.x=1", ["run.seed is not a table"]),
    ("policy.megha=1", ["policy.megha is a table", "gms"]),
    ("nope=1", ["unknown key nope", "cell, workload, policy, run"]),
    ("=1", ["dotted path"]),
    ("workload.generator=1", ["set one generator key"]),
    ("workload.generator.nodes=5", ["workload.generator.nodes is set by cell.nodes"]),
    ("workload.generator.a.b=1", ["one level deep"]),
]


@pytest.mark.parametrize("ov,needles", BAD_SETS, ids=[b[0] for b in BAD_SETS])
def test_bad_set_overrides_name_the_key(ov, needles):
    with pytest.raises(InvalidArgument) as ei:
        parse_scenario(BASE, [ov])
    for n in needles:
        assert n in str(ei.value), f"{n!r} not in {str(ei.value)!r}"


def test_apply_overrides_does_not_touch_its_input():
    raw = {"run": {"seed": 1}, "policy": {"san": False}}
    out = apply_overrides(raw, ["run.seed=2", "policy.san.max_util=0.7"])
    assert raw == {"run": {"seed": 1}, "policy": {"san": False}}
    assert out == {"run": {"seed": 2}, "policy": {"san": {"enabled": False, "max_util": 0.7}}}


# ---------------------------------------------------------------------------
# as_dict round-trips; as_manifest resolves everything
# ---------------------------------------------------------------------------

def test_as_dict_round_trips():
    s = parse_scenario(BASE + '[policy.megha]\nshares = [0.5, 0.5]\n[workload.generator]\nchurn = true\n')
    again = parse_scenario(s.as_dict())
    assert again == s
    assert again is not s


def test_manifest_is_json_and_fully_resolved():
    s = parse_scenario(BASE)
    m = json.loads(json.dumps(s.as_manifest(), allow_nan=False))
    # every generator field, not just the ones the file set
    from dataclasses import fields
    assert set(m["workload"]["generator_resolved"]) == {f.name for f in fields(GeneratorConfig)}
    assert m["workload"]["generator_resolved"]["nodes"] == 200
    # the resolved generator config rebuilds the same GeneratorConfig
    g = dict(m["workload"]["generator_resolved"])
    assert GeneratorConfig.from_mapping(g) == s.generator_config()
    assert m["policy"]["san"]["max_util"] == 0.8
    assert m["policy"]["score_params"]["sras"]["beta"] == 500.0
    assert m["policy"]["asr_bands"]["sta_pct"] == 90.0
    # the policy at every stage of the reference architecture's checklist (digest §A.8)
    for stage in ("J1", "J2", "J3", "T1", "T2", "R3", "R4", "R5", "M4", "M5", "T10", "T12"):
        assert m["stages"][stage], stage


def test_stage_policies_follow_the_frontend_and_san():
    masb = parse_scenario(BASE).stage_policies()
    assert "sias" in masb["R5"] and "200" in masb["R5"]
    assert "sras" in masb["T12"] and "15" in masb["T12"]
    best = parse_scenario(BASE, ["policy.frontend=bestfit", "policy.san=false"]).stage_policies()
    assert best["R5"].startswith("allocation best_fit")
    assert best["T12"].startswith("none")
    samp = parse_scenario(BASE, ["policy.frontend=sampling", "policy.sampling.probes=3"]).stage_policies()
    assert "3 random probes" in samp["M5"]
    fair = parse_scenario(BASE, ["policy.frontend=megha", "policy.megha.shares=[0.5,0.5]"]).stage_policies()
    assert "2 user queues" in fair["J2"] and "fairness" in fair["T10"]
    gpa = parse_scenario(BASE, ["policy.fit=gpa"]).stage_policies()
    assert "fit gpa (CPU" in gpa["T12"] and "node admission used" in gpa["R4"]
    srtf = parse_scenario(BASE, ["policy.frontend=central", "policy.megha.gms=1", "policy.megha.lms=1",
                                 "policy.task_order=refarch.srtf",
                                 "policy.allocation=worst_fit"]).stage_policies()
    assert srtf["T2"].startswith("task_order refarch.srtf") and srtf["R5"].startswith("allocation worst_fit")
    assert "node admission requested" in srtf["R4"]


def test_trace_manifest_carries_trace_options():
    s = parse_scenario('[workload]\nsource = "trace"\n[workload.trace]\npath = "/data/gcd"\nnode_seed = 3')
    m = s.as_manifest()
    assert m["workload"]["trace_options"]["node_seed"] == 3
    assert "generator_resolved" not in m["workload"]
    assert m["workload"]["trace"]["window_start_us"] is None  # manifest keeps the "not set"
    assert "window_start_us" not in s.as_dict()["workload"]["trace"]  # TOML-able dict drops it


def test_scenario_is_frozen():
    s = parse_scenario("")
    with pytest.raises(Exception):
        s.run.seed = 3  # type: ignore[misc]
    assert isinstance(s, Scenario)
    assert not math.isnan(s.run.duration_s)
