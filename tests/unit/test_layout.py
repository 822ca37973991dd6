"""The floor plan (issue 11), checked from the code itself with ``ast``:

* no cycle between Cellbed's packages (``cellbed.X``, and ``cellbed.X.Y`` for the policy
  families), and no import of a layer above from a layer below;
* no import circle between any two or more modules (the module-level imports, ``TYPE_CHECKING``
  ones included: a circle drawn only for the type checker is still one concept split in two);
* ``cellbed/experiment/`` is a house of rooms (issue 26): at most ``MAX_EXPERIMENT_MODULES``
  modules at its top level, beside its subpackages, and no circle between its rooms (each room,
  and each top-level module, one node);
* no ``*Mixin`` class in the agents (``daemon/``, ``broker/``, ``controller/``): an agent is
  composed of parts that own their state, not one class split across files;
* no function-local import of a ``cellbed`` module (they are how cycles used to be dodged);
* no access to another object's private attribute (``x._name`` where ``x`` is not ``self``/``cls``);
* libvirt imported only by ``daemon/hv_libvirt.py``;
* no non-generated, non-test Python file over 450 lines.

Every exception is listed below with its reason. ``python tests/unit/test_layout.py`` prints the
figures (packages, edges, module circles, local imports, private accesses, the experiment's rooms,
the largest files).
"""
from __future__ import annotations

import ast
import collections
import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"cellbed": REPO / "cellbed", "cellbed.daemon": REPO / "daemon", "cellbed.broker": REPO / "broker",
         "cellbed.controller": REPO / "controller"}
MAX_LINES = 450
EXPERIMENT = REPO / "cellbed" / "experiment"
MAX_EXPERIMENT_MODULES = 8
"""Top-level modules of cellbed/experiment/, its __init__.py counted: the shared base (runner,
progress, ...) and the facade; everything else lives in a room (subpackage) by capability."""
MIXIN_FREE = (REPO / "daemon", REPO / "broker", REPO / "controller")

# Layers, bottom up. A package may import its own layer's packages (without cycles) and the ones below.
LAYERS = [
    ("floor", {"cellbed.v1", "cellbed.domain", "cellbed.runtime", "cellbed.policy", "cellbed.workload",
               "cellbed.metrics"}),
    ("agents", {"cellbed.daemon", "cellbed.broker", "cellbed.controller"}),
    ("assembly", {"cellbed.assembly", "cellbed.model", "cellbed.cell", "cellbed.experiment"}),
    ("front", {"cellbed.cli", "cellbed.ui", "cellbed.entry"}),
]
# cellbed.ui (`cellctl ui`, issue 30) is a front end beside cellbed.cli: it reads the cell's state and
# certificates (cellbed.cell), calls the agents (cellbed.runtime, cellbed.v1) and reads results folders
# (cellbed.experiment). cellbed.cli imports it (cli/ui_cmd.py); it imports nothing of cellbed.cli.
ENTRY_POINTS = {"cellbed.daemon.main", "cellbed.broker.main", "cellbed.controller.main"}
"""The console scripts' modules stand above the assembly they call (the 'entry' pseudo-package)."""

AGENT_CLASSES = {"NodeAgent", "SanAgent", "BrokerAgent", "GlobalMaster", "LocalMaster", "SamplingScheduler",
                 "SamplingWorker"}
"""Built only by cellbed/assembly.py (issue 11): entry points, cells and drivers call the assembly."""

LOCAL_IMPORT_EXCEPTIONS = {
    # (module, imported module): reason
    ("cellbed.cli.main", "cellbed.cli.*"):
        "cellctl loads a sub-command's module when that sub-command runs, so `cellctl --help` and the "
        "light verbs start without importing numpy, matplotlib and the agents",
}
PRIVATE_ACCESS_EXCEPTIONS = {
    # (module, attribute): reason
}
PRIVATE_OK = {"_replace", "_asdict", "_fields", "_make", "_value_", "_name_", "_member_map_",
              "_value2member_map_", "_exit", "_current_frames", "_getframe"}
"""Python's own documented underscore APIs (namedtuple, enum, os, sys)."""


@functools.lru_cache(maxsize=None)
def _parsed(text: str, name: str) -> ast.Module:
    return ast.parse(text, name)


def parse(path: Path) -> ast.Module:
    """*path*'s syntax tree, parsed once per content (the walkers below share it; none changes it)."""
    return _parsed(path.read_text(), str(path))


def modules() -> dict[str, Path]:
    out = {}
    for pkg, root in ROOTS.items():
        for p in root.rglob("*.py"):
            rel = p.relative_to(root).with_suffix("")
            parts = [x for x in rel.parts if x != "__init__"]
            name = ".".join([pkg, *parts])
            if pkg == "cellbed" and parts and parts[0] in ("daemon", "broker", "controller"):
                continue
            if name.startswith("cellbed.v1") and p.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            out[name] = p
    return out


def package_of(mod: str) -> str:
    if mod in ENTRY_POINTS:
        return "cellbed.entry"
    parts = mod.split(".")
    if len(parts) >= 3 and parts[1] == "policy":
        return ".".join(parts[:3]) if len(parts) > 3 or (REPO / "cellbed" / "policy" / parts[2]).is_dir() \
            else "cellbed.policy"
    return ".".join(parts[:2])


def _resolve(mod: str, path: Path, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = mod.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[:len(base) - node.level + 1]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [prefix] + [f"{prefix}.{a.name}" for a in node.names]


def imports(mod: str, path: Path, *, type_checking: bool = False, known_modules=None):
    """(imported module, is_local, lineno) for every cellbed import in *mod*; with *type_checking*
    the imports under ``if TYPE_CHECKING:`` too (as module-level ones). ``from P import n`` names
    module ``P.n`` when that is one of *known_modules* (default: Cellbed's), else ``P``."""
    universe = ALL if known_modules is None else known_modules
    tree = parse(path)
    out = []

    def visit(node, depth):
        for child in ast.iter_child_nodes(node):
            local = depth > 0
            if isinstance(child, ast.Import):
                for a in child.names:
                    out.append((a.name, local, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                names = _resolve(mod, path, child)
                known = [n for n in names[1:] if n in universe]
                out.extend((n, local, child.lineno) for n in (known or names[:1]))
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, depth + 1)
            elif isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
                continue
            else:
                visit(child, depth)
    visit(tree, 0)
    return [(m, loc, ln) for m, loc, ln in out if m == "cellbed" or m.startswith("cellbed.")]


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


ALL = modules()


def package_graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = collections.defaultdict(set)
    for mod, path in ALL.items():
        a = package_of(mod)
        for m, _, _ in imports(mod, path):
            if m == "cellbed":
                continue
            b = package_of(m)
            if b != a and m.split(".")[1] != "v1" or (b != a and a != "cellbed.v1"):
                if b != a:
                    g[a].add(b)
    return g


def find_cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(set(g) | {w for ws in g.values() for w in ws}):
        if v not in index:
            strong(v)
    return out


def module_graph(mods: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the Cellbed modules it imports at module level (``TYPE_CHECKING`` imports
    included; an import of a name resolves to the module that holds it, an import of a package
    to its ``__init__``). Generated code (``*_pb2``) is left out: it imports nothing of ours."""
    mods = ALL if mods is None else mods
    g: dict[str, set[str]] = collections.defaultdict(set)
    for mod, path in mods.items():
        for m, local, _ in imports(mod, path, type_checking=True, known_modules=mods):
            if local:
                continue
            while m and m not in mods:
                m = m.rpartition(".")[0]
            if m and m != mod:
                g[mod].add(m)
    return g


def rooms(root: Path = EXPERIMENT) -> dict[str, tuple[int, int]]:
    """The subpackages of *root*: name -> (Python files, lines), subfolders included."""
    out = {}
    for d in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
        files = sorted(d.rglob("*.py"))
        out[d.name] = (len(files), sum(len(f.read_text().splitlines()) for f in files))
    return out


def top_level_modules(root: Path = EXPERIMENT) -> list[str]:
    """The Python files directly in *root*, its __init__.py included."""
    return sorted(p.name for p in root.glob("*.py"))


def room_violations(root: Path = EXPERIMENT, limit: int = MAX_EXPERIMENT_MODULES) -> list[str]:
    top = top_level_modules(root)
    if len(top) <= limit:
        return []
    return [f"{root.relative_to(root.parents[1])}: {len(top)} top-level modules (at most {limit}; put the "
            f"rest in a room by capability): {', '.join(top)}"]


def room_graph(g: dict[str, set[str]] | None = None, house: str = "cellbed.experiment") -> dict[str, set[str]]:
    """The module graph folded onto *house*'s rooms: a subpackage is one node, and so is each
    top-level module (the base and the facade: ``__init__``)."""
    g = module_graph() if g is None else g

    def room(m: str) -> str | None:
        if m == house:
            return "__init__"
        return m[len(house) + 1:].split(".")[0] if m.startswith(house + ".") else None
    out: dict[str, set[str]] = collections.defaultdict(set)
    for a, bs in g.items():
        ra = room(a)
        for b in bs:
            rb = room(b)
            if ra and rb and ra != rb:
                out[ra].add(rb)
    return out


def mixin_classes(roots=MIXIN_FREE) -> list[str]:
    """Classes named ``*Mixin`` under *roots*."""
    out = []
    for root in roots:
        for p in sorted(root.rglob("*.py")):
            for node in ast.walk(parse(p)):
                if isinstance(node, ast.ClassDef) and node.name.endswith("Mixin"):
                    out.append(f"{p.relative_to(root.parent)}:{node.lineno}: class {node.name}")
    return out


def layer_of(pkg: str) -> int:
    for i, (_, pkgs) in enumerate(LAYERS):
        if pkg in pkgs or any(pkg.startswith(p + ".") for p in pkgs):
            return i
    return -1


def local_imports() -> list[str]:
    bad = []
    for mod, path in ALL.items():
        for m, local, ln in imports(mod, path):
            if not local:
                continue
            if any(mod == a and (m == b or (b.endswith(".*") and m.startswith(b[:-1])))
                   for a, b in LOCAL_IMPORT_EXCEPTIONS):
                continue
            bad.append(f"{path.relative_to(REPO)}:{ln}: imports {m} inside a function")
    return bad


def private_accesses() -> list[str]:
    bad = []
    for mod, path in ALL.items():
        tree = parse(path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            a = node.attr
            if not a.startswith("_") or a.startswith("__") or a in PRIVATE_OK:
                continue
            v = node.value
            if isinstance(v, ast.Name) and v.id in ("self", "cls"):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            if (mod, a) in PRIVATE_ACCESS_EXCEPTIONS:
                continue
            bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return bad


def libvirt_importers() -> list[str]:
    out = []
    for mod, path in ALL.items():
        tree = parse(path)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "libvirt" or n.startswith("libvirt.") or n == "libvirtaio" for n in names):
                out.append(str(path.relative_to(REPO)))
    return sorted(set(out))


def long_files() -> list[tuple[int, str]]:
    out = []
    for d in ("cellbed", "daemon", "broker", "controller", "scripts", "ansible"):
        for p in (REPO / d).rglob("*.py"):
            if p.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            n = len(p.read_text().splitlines())
            out.append((n, str(p.relative_to(REPO))))
    return sorted(out, reverse=True)


def agent_constructions() -> list[str]:
    """Calls of an agent class's constructor outside cellbed/assembly.py."""
    out = []
    for mod, path in ALL.items():
        if mod == "cellbed.assembly":
            continue
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in AGENT_CLASSES:
                    out.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}(...)")
    for p in (REPO / "scripts").rglob("*.py"):
        for node in ast.walk(parse(p)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in AGENT_CLASSES:
                out.append(f"{p.relative_to(REPO)}:{node.lineno}: {node.func.id}(...)")
    return out


# --- the tests ----------------------------------------------------------------------------------

def test_no_package_cycles():
    cycles = find_cycles(package_graph())
    assert not cycles, "package cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_module_circles():
    """Strongly connected components of the module graph: two modules that import each other
    (also only under TYPE_CHECKING, also through others) are one concept in two files, or a
    shared piece that belongs below both."""
    circles = find_cycles(module_graph())
    assert not circles, "module circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_experiment_is_a_house_of_rooms():
    bad = room_violations()
    assert not bad, "\n".join(bad)
    circles = find_cycles(room_graph())
    assert not circles, "circles between cellbed/experiment's rooms: " + "; ".join(" <-> ".join(c) for c in circles)


def test_no_mixins_in_the_agents():
    bad = mixin_classes()
    assert not bad, "compose the agent of parts instead:\n" + "\n".join(bad)


def test_no_layer_imports_a_layer_above():
    bad = []
    for a, bs in package_graph().items():
        for b in bs:
            la, lb = layer_of(a), layer_of(b)
            if la < 0:
                bad.append(f"{a}: in no layer (add it to LAYERS)")
            elif lb > la:
                bad.append(f"{a} ({LAYERS[la][0]}) imports {b} ({LAYERS[lb][0]})")
    assert not bad, "\n".join(sorted(set(bad)))


def test_no_function_local_cellbed_imports():
    bad = local_imports()
    assert not bad, "\n".join(bad)


def test_no_access_to_another_objects_private_attributes():
    bad = private_accesses()
    assert not bad, "\n".join(bad)


def test_agents_are_built_only_by_the_assembly():
    bad = agent_constructions()
    assert not bad, "build agents through cellbed.assembly:\n" + "\n".join(bad)


def test_only_hv_libvirt_imports_libvirt():
    assert libvirt_importers() == ["daemon/hv_libvirt.py"]


def test_no_file_over_450_lines():
    bad = [f"{p}: {n} lines" for n, p in long_files() if n > MAX_LINES]
    assert not bad, "\n".join(bad)


def test_every_package_is_in_the_wheel():
    """pyproject lists packages by hand (package-dir maps daemon/ etc. under cellbed.*): a package
    missing there would be missing from the wheel that Ansible installs on lab servers."""
    import tomllib
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for pkg, root in ROOTS.items():
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root).parts
            if pkg == "cellbed" and rel and rel[0] in ("daemon", "broker", "controller"):
                continue
            found.add(".".join([pkg, *rel]))
    assert found - listed == set(), f"add to pyproject [tool.setuptools] packages: {sorted(found - listed)}"


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_no_package_file_is_ignored_by_git():
    """.gitignore ignores every ``results/`` folder (run outputs): a package of that name (or any
    other an ignore rule matches) would lose its files from commits while the editable install,
    which reads the working tree, kept working."""
    files = sorted(str(p.relative_to(REPO)) for root in ROOTS.values() for p in root.rglob("*.py")
                   if "__pycache__" not in p.parts)
    r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "--stdin"], input="\n".join(files),
                       capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    assert r.stdout == "", "git ignores these source files (add an exception to .gitignore):\n" + r.stdout


def test_the_checker_sees_planted_violations(tmp_path):
    """The walkers can fail: a planted cycle, a local import, a private access and a mixin are found."""
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    src = tmp_path / "m.py"
    src.write_text("import os\n\ndef f(x):\n    from cellbed.runtime import clock\n    return x._secret\n")
    assert imports("cellbed.zz", src) == [("cellbed.runtime.clock", True, 4)]
    tree = ast.parse(src.read_text())
    attrs = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    assert "_secret" in attrs
    (tmp_path / "part.py").write_text("class Part:\n    pass\n\n\nclass HostMixin:\n    pass\n")
    assert mixin_classes([tmp_path]) == [f"{tmp_path.name}/part.py:5: class HostMixin"]


def test_the_checker_sees_a_planted_module_circle_a_crowded_room_and_a_mixin(tmp_path):
    """A 2-module circle (one side only under TYPE_CHECKING), a circle between two rooms, an
    experiment folder with 9 top-level modules, and a ``FooMixin`` class in an agent folder: each
    is found; the same tree without them passes."""
    pkg = tmp_path / "zz"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cellbed.zz import b\n\ndef f():\n    from cellbed.zz import c\n")  # local: no edge
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cellbed.zz.a import X\n")
    (pkg / "c.py").write_text("from cellbed.zz.a import Y\n")
    mods = {"cellbed.zz": pkg / "__init__.py", **{f"cellbed.zz.{m}": pkg / f"{m}.py" for m in "abc"}}
    g = module_graph(mods)
    assert g == {"cellbed.zz.a": {"cellbed.zz.b"}, "cellbed.zz.b": {"cellbed.zz.a"}, "cellbed.zz.c": {"cellbed.zz.a"}}
    assert find_cycles(g) == [["cellbed.zz.a", "cellbed.zz.b"]]
    (pkg / "b.py").write_text("X = 1\n")
    assert find_cycles(module_graph(mods)) == []
    rooms_circle = {"cellbed.experiment.a.x": {"cellbed.experiment.b.y", "cellbed.domain.errors"},
                    "cellbed.experiment.b.z": {"cellbed.experiment.a.w", "cellbed.experiment.base"},
                    "cellbed.experiment": {"cellbed.experiment.a.x"}}
    assert room_graph(rooms_circle) == {"a": {"b"}, "b": {"a", "base"}, "__init__": {"a"}}
    assert find_cycles(room_graph(rooms_circle)) == [["a", "b"]]

    exp = tmp_path / "cellbed" / "experiment"
    (exp / "room").mkdir(parents=True)
    (exp / "room" / "__init__.py").write_text("")
    (exp / "room" / "one.py").write_text("A = 1\nB = 2\n")
    for i in range(8):
        (exp / f"m{i}.py").write_text("")
    assert room_violations(exp) == [] and rooms(exp) == {"room": (2, 2)}
    (exp / "m8.py").write_text("")
    bad = room_violations(exp)
    assert len(bad) == 1 and bad[0].startswith("cellbed/experiment: 9 top-level modules (at most 8")

    agent = tmp_path / "daemon"
    (agent / "san").mkdir(parents=True)
    (agent / "san" / "host.py").write_text("class Host:\n    pass\n")
    assert mixin_classes([agent]) == []
    (agent / "san" / "foo.py").write_text("class Base:\n    class FooMixin:\n        pass\n")
    assert mixin_classes([agent]) == ["daemon/san/foo.py:2: class FooMixin"]


if __name__ == "__main__":
    g = package_graph()
    print("packages:", len(set(g) | {w for ws in g.values() for w in ws}), "edges:", sum(map(len, g.values())))
    print("cycles:", find_cycles(g))
    mg = module_graph()
    circles = find_cycles(mg)
    print("modules:", len(ALL), "module edges:", sum(map(len, mg.values())), "module circles:", len(circles))
    for c in circles:
        print("  " + " <-> ".join(c))
    li = local_imports()
    print("function-local cellbed imports:", len(li))
    pa = private_accesses()
    print("private accesses:", len(pa))
    if "-v" in sys.argv:
        print("\n".join(li + pa))
    print("libvirt importers:", libvirt_importers())
    print("agent constructions outside the assembly:", agent_constructions())
    top = top_level_modules()
    print(f"cellbed/experiment/ top-level modules: {len(top)} (at most {MAX_EXPERIMENT_MODULES}):", ", ".join(top))
    rs = rooms()
    print(f"cellbed/experiment/ rooms: {len(rs)}; circles between rooms: {len(find_cycles(room_graph(mg)))}")
    for name, (files, lines) in rs.items():
        print(f"  {name + '/':10s} {files:3d} files {lines:6d} lines")
    mx = mixin_classes()
    print("*Mixin classes in daemon/, broker/, controller/:", len(mx))
    lf = long_files()
    print("files > 400 lines:", sum(1 for n, _ in lf if n > 400), "> 450:", sum(1 for n, _ in lf if n > 450))
    for n, p in lf[:20]:
        print(f"  {n:5d} {p}")
