"""The policy framework's mechanism (DESIGN §17): references, loading, signatures, parameters,
the guarded call (contracts, errors, time budget) and identity. Bad plugins are planted in
files under tmp_path, and one is installed as a real distribution (a .dist-info on sys.path)."""
from __future__ import annotations

import hashlib
import random
import sys
import textwrap
import threading

import numpy as np
import pytest

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.policy import api
from cellbed.runtime.plugins import refs
from cellbed.runtime.plugins.guard import PolicyEnv, PolicyFailed
from cellbed.runtime.plugins.resolve import SLOTS, Choice, PolicySet, choices_from_table, resolve

LOAD = api.HostLoad((1.0, 1024.0), (0.95, 100.0), (0.0, 0.0))


def plugin(tmp_path, body: str, name: str = "p.py") -> str:
    f = tmp_path / name
    f.write_text("from cellbed.policy import api\nimport random, time\nimport numpy as np\n" + textwrap.dedent(body))
    return str(f)


@pytest.mark.parametrize("text, kind, target, attr", [
    ("masb", "entry-point", "masb", ""),
    ("my.pkg.mod:rule", "module", "my.pkg.mod", "rule"),
    ("plugins/x.py:rule", "file", "/base/plugins/x.py", "rule"),
    ("/abs/x.py:Cls.rule", "file", "/abs/x.py", "Cls.rule"),
])
def test_reference_forms(text, kind, target, attr):
    r = refs.parse("overload", text, "/base")
    assert (r.kind, r.target, r.attr) == (kind, target, attr)


@pytest.mark.parametrize("text, words", [
    ("", "a policy reference"), ("a b", "not a policy name"), ("mod:1x", "not an attribute name"),
    ("9mod:f", "not a module name"), (3, "a policy reference"),
])
def test_bad_reference_forms_get_one_line(text, words):
    with pytest.raises(InvalidArgument) as e:
        refs.parse("overload", text)
    assert words in str(e.value) and "policy.overload" in str(e.value) and "\n" not in str(e.value)


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(InvalidArgument) as e:
        resolve("task_selection", Choice("nope"), PolicyEnv())
    assert str(e.value) == "policy.task_selection: unknown policy 'nope'; available: greedy, tabu"


@pytest.mark.parametrize("ref, words", [
    ("no_such_module_xyz:f", "no module named 'no_such_module_xyz'"),
    ("cellbed.policy.builtin.masb:nothing", "has no attribute 'nothing'"),
    ("cellbed.policy.builtin.masb:overload", None),
])
def test_module_references(ref, words):
    if words is None:
        assert resolve("overload", Choice(ref), PolicyEnv()).ident.origin == "module"
        return
    with pytest.raises(InvalidArgument, match=words):
        resolve("overload", Choice(ref), PolicyEnv())


def test_file_reference_missing_file_and_import_error(tmp_path):
    with pytest.raises(InvalidArgument, match="no such file"):
        resolve("overload", Choice("nothere.py:f", base_dir=str(tmp_path)), PolicyEnv())
    p = plugin(tmp_path, "raise RuntimeError('boom at import')\n")
    with pytest.raises(InvalidArgument) as e:
        resolve("overload", Choice(f"{p}:f"), PolicyEnv())
    assert "failed to load: RuntimeError: boom at import" in str(e.value)


def test_wrong_signature_and_wrong_stage_are_refused(tmp_path):
    p = plugin(tmp_path, """
        def two(load, extra): return None
        @api.policy(stage="fit")
        def fitlike(load): return None
        not_callable = 3
    """)
    with pytest.raises(InvalidArgument) as e:
        resolve("overload", Choice(f"{p}:two"), PolicyEnv())
    assert "wrong signature (load, extra)" in str(e.value) and "called as f(load)" in str(e.value)
    with pytest.raises(InvalidArgument, match="is a fit policy, not a overload policy"):
        resolve("overload", Choice(f"{p}:fitlike"), PolicyEnv())
    with pytest.raises(InvalidArgument, match="not a callable"):
        resolve("overload", Choice(f"{p}:not_callable"), PolicyEnv())


def test_parameters_are_checked_by_type_and_range(tmp_path):
    p = plugin(tmp_path, """
        import dataclasses
        @dataclasses.dataclass(frozen=True)
        class P:
            threshold: float = api.param(0.8, lo=0.0, hi=1.0)
            mode: str = api.param("cpu", choices=("cpu", "mem"))
            n: int = 3
        @api.policy(params=P)
        def rule(load, params):
            return api.Verdict(load.used[0] > params.threshold * load.capacity[0], (), (0.0, 0.0))
        def plain(load): return api.Verdict(False, (), (0.0, 0.0))
    """)
    env = PolicyEnv()
    cases = [({"threshold": 2.0}, "policy.params.overload.threshold: allowed 0.0..1.0, got 2.0"),
             ({"threshold": "x"}, "policy.params.overload.threshold: allowed a finite number (0.0..1.0), got 'x'"),
             ({"mode": "gpu"}, "policy.params.overload.mode: allowed 'cpu', 'mem', got 'gpu'"),
             ({"n": 1.5}, "policy.params.overload.n: allowed an integer, got 1.5"),
             ({"zz": 1}, "policy.params.overload.zz: unknown parameter; allowed: mode, n, threshold")]
    for given, msg in cases:
        with pytest.raises(InvalidArgument) as e:
            resolve("overload", Choice(f"{p}:rule", given), env)
        assert str(e.value) == msg
    with pytest.raises(InvalidArgument, match="takes no parameters"):
        resolve("overload", Choice(f"{p}:plain", {"a": 1}), env)
    sp = resolve("overload", Choice(f"{p}:rule", {"threshold": 0.5}), env)
    assert sp.ident.params == {"threshold": 0.5, "mode": "cpu", "n": 3}
    assert sp(LOAD).overloaded is True


def test_builtin_defaults_from_the_agent_config_and_explicit_params_win():
    env = PolicyEnv()
    assert resolve("overload", Choice("masb"), env, {"max_util": 0.5, "other": 1}).ident.params == {"max_util": 0.5}
    assert resolve("overload", Choice("masb", {"max_util": 0.7}), env, {"max_util": 0.5}).ident.params == \
        {"max_util": 0.7}
    with pytest.raises(InvalidArgument, match="allowed 0.05..1.0"):
        resolve("overload", Choice("masb"), env, {"max_util": 5.0})


BAD = """
    @api.policy(stage="score")
    def nan_score(load, capacity, task): return np.full(len(load), np.nan)
    def short_score(load, capacity, task): return np.zeros(len(load) - 1)
    def raises(load): raise KeyError("gone")
    def garbage(load): return "overloaded"
    def not_offered(scores, capacity, used, task_used, rng): return [api.Pick(len(scores) + 5, 1.0, False)]
    def twice(scores, capacity, used, task_used, rng): return [api.Pick(0, 1.0, False), api.Pick(0, 1.0, False)]
    def not_perm(acceptors, scores, rng): return [0, 0]
    def hangs(load):
        while True:
            pass
    def sleeps(load):
        time.sleep(30)
        return api.Verdict(False, (), (0.0, 0.0))
    def exits(load): raise SystemExit(3)
    def bad_alloc(hosts, demand, rng): return int(np.flatnonzero(~hosts.offered)[0])
    def key_nan(task, rng): return float("nan")
"""
ACC = [api.Acceptor("a", (1.0, 1.0), (0.1, 0.1), False), api.Acceptor("b", (1.0, 1.0), (0.1, 0.1), False)]
QT = api.QueuedTask("t", "u", 1, 0.0, 10.0, (0.1, 64.0))
HOSTS = api.Hosts(np.array([True, False]), np.array([[1.0, 100.0], [1.0, 100.0]]), np.ones((2, 2)))
ROWS = [
    # slot, attr, inputs, what the one line says
    ("realloc_score", "nan_score", (np.ones((3, 2)), np.ones((3, 2)), np.ones(2)), "score nan for host 0 is not finite"),
    ("realloc_score", "short_score", (np.ones((3, 2)), np.ones((3, 2)), np.ones(2)), "returned 2 scores for 3 hosts"),
    ("overload", "raises", (LOAD,), "raised KeyError: 'gone'"),
    ("overload", "garbage", (LOAD,), "returned 'overloaded', not a Verdict"),
    ("overload", "exits", (LOAD,), "raised SystemExit: 3"),
    ("candidates", "not_offered", (np.ones(3), np.ones((3, 2)), np.ones((3, 2)), np.ones(2), None),
     "picked host 8, which was not offered (0..2)"),
    ("candidates", "twice", (np.ones(3), np.ones((3, 2)), np.ones((3, 2)), np.ones(2), None), "picked host 0 twice"),
    ("target_order", "not_perm", (ACC, np.ones(2), random.Random(1)), "returned [0, 0], not a permutation of 0..1"),
    ("allocation", "bad_alloc", (HOSTS, np.array([0.1, 1.0]), random.Random(1)), "chose host 1, which was not offered"),
    ("task_order", "key_nan", (QT, random.Random(1)), "returned nan, not a finite number"),
    ("overload", "hangs", (LOAD,), "did not answer within its budget of 50 ms (interrupted)"),
    ("overload", "sleeps", (LOAD,), "did not answer within its budget of 50 ms (interrupted)"),
]


@pytest.mark.parametrize("mode", ["strict", "isolate"])
@pytest.mark.parametrize("slot, attr, inputs, words", ROWS, ids=[r[1] for r in ROWS])
def test_bad_plugins_are_refused_with_one_line(tmp_path, mode, slot, attr, inputs, words):
    p = plugin(tmp_path, BAD)
    env = PolicyEnv(mode=mode, budget_ms=50)
    sp = resolve(slot, Choice(f"{p}:{attr}"), env)
    with pytest.raises(PolicyFailed) as e:
        sp(*inputs)
    msg = str(e.value)
    assert isinstance(e.value, FailedPrecondition)
    assert words in msg and "\n" not in msg
    assert msg.startswith(f"policy {SLOTS[slot]} '{p}:{attr}' (file, sha256 ")
    assert "input digest " in msg
    assert (sp.acc.calls, sp.acc.errors) == (1, 1)             # a failed call is a call: counted and timed
    assert env.fatal == ([e.value] if mode == "strict" else [])
    # the same policy object keeps answering later calls (an agent keeps serving)
    with pytest.raises(PolicyFailed):
        sp(*inputs)
    assert (sp.acc.calls, sp.acc.errors) == (2, 2)


def test_a_late_answer_off_the_main_thread_is_refused_once_it_comes(tmp_path):
    p = plugin(tmp_path, """
        def slow(load):
            time.sleep(0.08)
            return api.Verdict(False, (), (0.0, 0.0))
    """)
    sp = resolve("overload", Choice(f"{p}:slow"), PolicyEnv(budget_ms=20))
    got = []

    def run():
        try:
            sp(LOAD)
        except PolicyFailed as e:
            got.append(str(e))
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(got) == 1 and "over its budget of 20 ms" in got[0]


def test_a_good_plugin_is_timed_and_identified(tmp_path):
    p = plugin(tmp_path, """
        @api.policy(name="cpu-only", version="2.1")
        def rule(load):
            return api.Verdict(load.used[0] > 0.9 * load.capacity[0], ("cpu",), (0.0, 0.0))
    """)
    sp = resolve("overload", Choice(f"{p}:rule"), PolicyEnv())
    assert [bool(sp(LOAD)) for _ in range(3)] == [True] * 3
    assert (sp.acc.calls, sp.acc.errors, sp.acc.examined) == (3, 0, 3)
    i = sp.ident
    assert (i.name, i.version, i.origin, i.api_version, i.dist) == ("cpu-only", "2.1", "file", api.API_VERSION, "")
    assert i.sha256 == hashlib.sha256(open(p, "rb").read()).hexdigest()


def test_an_installed_distribution_is_found_by_entry_point(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "mypol").mkdir(parents=True)
    (site / "mypol" / "__init__.py").write_text(
        "from cellbed.policy import api\n"
        "def never(load):\n    return api.Verdict(False, (), (0.0, 0.0))\n")
    info = site / "mypol-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypol\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[cellbed.policy.overload]\nnever = mypol:never\n")
    monkeypatch.syspath_prepend(str(site))
    sp = resolve("overload", Choice("never"), PolicyEnv())
    assert (sp.ident.origin, sp.ident.dist, sp.ident.dist_version, sp.ident.version) == \
        ("entry-point", "mypol", "1.2.3", "1.2.3")
    assert not sp.trusted and sp(LOAD).overloaded is False
    assert "never" in [e.name for e in refs.entry_points("overload")]
    sys.modules.pop("mypol", None)


def test_the_builtins_resolve_for_every_slot_and_are_trusted():
    ps = PolicySet.build(PolicyEnv(), list(SLOTS), {})
    assert {i.key for i in ps.identities()} == {f"policy.{s}" for s in SLOTS}
    assert all(ps[s].trusted and ps[s].ident.origin == "builtin" for s in SLOTS)


def test_a_policy_table_gives_choices_and_refuses_stray_parameters():
    got = choices_from_table({"overload": "x.py:f", "frontend": "masb", "params": {"overload": {"a": 1}}}, "/b")
    assert got == {"overload": Choice("x.py:f", {"a": 1}, "/b")}
    with pytest.raises(InvalidArgument, match=r"policy.params.nostage: unknown policy stage"):
        choices_from_table({"params": {"nostage": {}}})
    assert choices_from_table({"params": {"overload": {"max_util": 0.5}}}) == {"overload": Choice("", {"max_util": 0.5})}
