"""Issue 26, item 3: one best fit. The rule is defined once, as the ``allocation`` stage's registered
policy ``best_fit`` (cellbed/policy/builtin/megha.py), and every place that places by best fit (the
model cell's best-fit front-end, which the twin runs too, and the real-cell runner) calls it through the one
chooser, cellbed/model/central_fit.py ``choose``, instead of computing a fit of its own.

The scan reads the source (ast): a function named best fit (``best_fit``, ``bestfit``, any case or
leading underscores) is a definition of the rule; a function whose name says it places by best fit
(``_place_bestfit``, ``_best_host``) must reach ``choose``. The checker's own test plants a second
definition and a placement that fits by itself."""
from __future__ import annotations

import ast
import importlib.metadata
import inspect
from pathlib import Path

from cellbed.model import central_fit

REPO = Path(__file__).resolve().parents[2]
TREES = ("cellbed", "daemon", "broker", "controller")


def _norm(name: str) -> str:
    return name.lower().lstrip("_").replace("_", "")


def scan(root: Path) -> tuple[list[str], list[str]]:
    """(the definitions of best fit, the best-fit placements that do not call choose), as file:function."""
    defs, rogue = [], []
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            mod = ast.parse(path.read_text(), str(path))
            rel = path.relative_to(root).as_posix()
            for fn in ast.walk(mod):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                n = _norm(fn.name)
                if n == "bestfit":
                    defs.append(f"{rel}:{fn.name}")
                elif "bestfit" in n or n == "besthost":
                    calls = {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "")
                             for c in ast.walk(fn) if isinstance(c, ast.Call)}
                    if not calls & {"choose", "_best_host"}:
                        rogue.append(f"{rel}:{fn.name}")
    return defs, rogue


def test_best_fit_is_defined_once_and_that_is_the_registered_policy():
    [ep] = [e for e in importlib.metadata.entry_points(group="cellbed.policy.allocation") if e.name == "best_fit"]
    fn = ep.load()
    where = f"{Path(inspect.getsourcefile(fn)).resolve().relative_to(REPO).as_posix()}:{fn.__name__}"
    defs, rogue = scan(REPO)
    assert defs == [where] == ["cellbed/policy/builtin/megha.py:best_fit"]
    assert rogue == []


def test_the_model_the_real_runner_and_the_twin_place_through_the_one_chooser():
    users = sorted(p.relative_to(REPO).as_posix() for t in TREES for p in (REPO / t).rglob("*.py")
                   if "central_fit import" in p.read_text())
    assert users == ["cellbed/experiment/real/run.py", "cellbed/model/masb.py"]   # the twin is a model cell (masb.py)
    assert "def choose(" in inspect.getsource(central_fit)


def test_the_checker_finds_a_second_best_fit_and_a_fit_of_its_own(tmp_path):
    for t in TREES:
        (tmp_path / t).mkdir()
    (tmp_path / "cellbed" / "a.py").write_text("def best_fit(h, d, rng):\n    return 0\n")
    (tmp_path / "daemon" / "b.py").write_text(
        "class R:\n    def _BestFit(self):\n        return 1\n"
        "    async def _place_bestfit(self, vm):\n        return min(self.hosts, key=lambda h: h.free)\n"
        "    async def _place_ok(self, vm):\n        return choose(p, rows, d, rng)\n")
    defs, rogue = scan(tmp_path)
    assert defs == ["cellbed/a.py:best_fit", "daemon/b.py:_BestFit"]
    assert rogue == ["daemon/b.py:_place_bestfit"]
