"""Every ready scenario in scenarios/ parses, and the reproduction sets differ only where they should."""
from __future__ import annotations

from pathlib import Path

import pytest

from cellbed.experiment.scenario.file import load_scenario
from cellbed.experiment.sweep.plan import load_spec, plan_sweep

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(SCENARIOS.glob("*.toml"))


def test_the_ready_scenarios_are_there():
    names = {f.stem for f in FILES}
    assert {"smoke", "masb-table3-bestfit", "masb-table3-masb", "masb-table6-sas-only", "masb-table6-sias-sras",
            "masb-table6-siasgain-sras", "masb-table6-sias-srasgain", "megha-10k", "central-10k",
            "sampling-10k"} <= names


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_every_scenario_parses(path):
    s = load_scenario(path)
    assert s.run.name == path.stem
    s.as_manifest()  # resolves the generator config too


def _without(d: dict, *paths: str) -> dict:
    """*d* with the dotted *paths* removed (for "identical except ..." comparisons)."""
    import copy
    d = copy.deepcopy(d)
    for p in paths:
        *head, last = p.split(".")
        node = d
        for h in head:
            node = node[h]
        node.pop(last)
    return d


def load(stem: str):
    return load_scenario(SCENARIOS / f"{stem}.toml")


def test_smoke_is_small_masb_with_san():
    s = load("smoke")
    assert s.cell.kind == "model" and s.cell.nodes <= 500 and s.run.duration_s <= 3600
    assert s.policy.frontend == "masb" and s.policy.san.enabled


def test_table3_pair_differs_only_in_policy():
    b, m = load("masb-table3-bestfit"), load("masb-table3-masb")
    assert (b.policy.frontend, b.policy.san.enabled) == ("bestfit", False)
    assert (m.policy.frontend, m.policy.san.enabled, m.policy.initial_score, m.policy.realloc_score) == \
        ("masb", True, "sias", "sras")
    assert _without(b.as_dict(), "policy", "run.name") == _without(m.as_dict(), "policy", "run.name")


TABLE6 = {
    "masb-table6-sas-only": ("sras", "sras"),
    "masb-table6-sias-sras": ("sias", "sras"),
    "masb-table6-siasgain-sras": ("sias_gain", "sras"),
    "masb-table6-sias-srasgain": ("sias", "sras_gain"),
    "masb-table6-siasgain-srasgain": ("sias_gain", "sras_gain"),
}


def test_table6_set_differs_only_in_the_scores():
    loaded = {k: load(k) for k in TABLE6}
    for k, (ini, re) in TABLE6.items():
        assert (loaded[k].policy.initial_score, loaded[k].policy.realloc_score) == (ini, re), k
        assert loaded[k].policy.san.enabled
    rest = [_without(s.as_dict(), "policy.initial_score", "policy.realloc_score", "run.name") for s in loaded.values()]
    assert all(r == rest[0] for r in rest)
    # and they run the same cell and workload as the Table 3 MASB run
    t3 = load("masb-table3-masb").as_dict()
    assert rest[0]["cell"] == t3["cell"] and rest[0]["workload"] == t3["workload"] and rest[0]["run"] == \
        _without(t3, "run.name")["run"]


def test_megha_set_differs_only_in_the_front_end():
    m, c, s = load("megha-10k"), load("central-10k"), load("sampling-10k")
    assert (m.policy.frontend, m.policy.megha.gms, m.policy.megha.lms) == ("megha", 10, 10)
    assert (c.policy.frontend, c.policy.megha.gms, c.policy.megha.lms) == ("central", 1, 1)
    assert (s.policy.frontend, s.policy.sampling.probes) == ("sampling", 2)
    for x in (m, c, s):
        assert x.cell.nodes == 10_000 and not x.policy.san.enabled
    strip = ("policy.frontend", "policy.megha", "run.name")
    assert _without(m.as_dict(), *strip) == _without(c.as_dict(), *strip) == _without(s.as_dict(), *strip)


SWEEPS = sorted((SCENARIOS.parent / "sweeps").glob("*.toml"))


@pytest.mark.parametrize("path", SWEEPS, ids=[f.stem for f in SWEEPS])
def test_every_sweep_spec_plans(path):
    """sweeps/*.toml (the MASB tables' reruns): every run's scenario loads with its overrides,
    at least 3 seeds except the one-seed exploration beyond the paper (masb-t4x) and the short
    versions a test runs (*-ci, e.g. refarch-ci in tests/component/test_refarch.py)."""
    plan = plan_sweep(load_spec(path))
    assert plan.runs and all(r.scenario.is_file() for r in plan.runs)
    seeds = {r.seed for r in plan.runs}
    assert len(seeds) >= 3 or path.stem == "masb-t4x" or path.stem.endswith("-ci"), (path.stem, seeds)
