"""``cellctl policy check``: it finds each violation planted in five bad plugins, with a minimal
input, and none in any of Cellbed's built-in policies. Also: the example plugin package uses
Cellbed's public API only."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from cellbed.cli.main import main as cellctl
from cellbed.runtime.plugins import kit, refs
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.plugins.guard import PolicyEnv
from cellbed.runtime.plugins.resolve import Choice, resolve
from cellbed.policy.api import STAGES

REPO = Path(__file__).resolve().parents[2]
BAD = REPO / "tests" / "fixtures" / "bad_policies.py"


@pytest.mark.parametrize("slot, attr, kind, words", [
    ("realloc_score", "nan_score", "contract", "is not finite"),
    ("target_order", "impure_order", "impure", "for the same input and rng seed"),
    ("allocation", "mutating_alloc", "mutates", "tried to change an input array"),
    ("fit", "raising_fit", "raises", "ZeroDivisionError"),
    ("preemption", "stray_preempt", "contract", "named the requester"),
])
def test_the_kit_finds_each_planted_violation(slot, attr, kind, words):
    sp = resolve(slot, Choice(f"{BAD}:{attr}"), PolicyEnv())
    found = kit.check(sp.stage, sp.fn, sp.kw, examples=60)
    assert [v.kind for v in found] == [kind], found
    assert words in found[0].what
    assert found[0].example and "not reproduced" not in found[0].example


def test_the_minimal_input_is_minimal():
    sp = resolve("preemption", Choice(f"{BAD}:stray_preempt"), PolicyEnv())
    (v,) = kit.check(sp.stage, sp.fn, sp.kw, examples=60)
    assert v.example == "requester='u1', shares={'u1': 0.0}, consumed={'u1': 0.0}"   # one user, zero shares


def test_cellctl_policy_check_exits_1_on_a_violation_and_0_on_a_builtin(capsys):
    with pytest.raises(SystemExit) as e:
        cellctl(["policy", "check", f"{BAD}:stray_preempt", "--examples", "30", "--json"])
    assert e.value.code == 1
    out = json.loads(capsys.readouterr().out)
    assert out["stage"] == "preemption" and out["violations"][0]["kind"] == "contract"
    cellctl(["policy", "check", "megha", "--stage", "preemption", "--examples", "30"])
    assert "no violation" in capsys.readouterr().out


def test_cellctl_policy_check_refuses_a_bad_reference_with_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        cellctl(["policy", "check", "nothing.py:f", "--stage", "overload"])
    assert e.value.code == 2 and "no such file" in capsys.readouterr().err


def builtins() -> list[tuple[str, str]]:
    out = []
    for stage in STAGES:
        for ep in refs.entry_points(stage):
            if ep.dist is not None and ep.dist.name == "cellbed":
                out.append((STAGES[stage].keys[0].split(".", 1)[1], ep.name))
    return out


@pytest.mark.parametrize("slot, name", builtins())
def test_no_builtin_breaks_its_contract(slot, name):
    sp = PolicyBook().get(slot, name)
    assert kit.check(sp.stage, sp.fn, sp.kw, examples=30) == []


def test_every_stage_has_a_builtin():
    assert {s for s, _ in builtins()} >= {s.keys[0].split(".", 1)[1] for s in STAGES.values()}


def test_the_example_package_imports_only_the_public_api():
    pkg = REPO / "examples" / "refarch-policies"
    files = sorted(pkg.rglob("*.py"))
    assert files
    bad = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module + "." + a.name for a in node.names] if node.module == "cellbed.policy" \
                    else [node.module]
            bad += [f"{f.relative_to(pkg)}: {n}" for n in names
                    if n.split(".")[0] == "cellbed" and n not in ("cellbed.policy.api",)]
    assert bad == []
