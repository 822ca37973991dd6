"""The floor plan (issue 11), checked from the code itself with ``ast``:

* no cycle between Cellbed's packages (``cellbed.X``, and ``cellbed.X.Y`` for the policy
  families), and no import of a layer above from a layer below;
* no function-local import of a ``cellbed`` module (they are how cycles used to be dodged);
* no access to another object's private attribute (``x._name`` where ``x`` is not ``self``/``cls``);
* libvirt imported only by ``daemon/hv_libvirt.py``;
* no non-generated, non-test Python file over 450 lines.

Every exception is listed below with its reason. ``python tests/unit/test_layout.py`` prints the
figures (packages, edges, local imports, private accesses, the largest files).
"""
from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"cellbed": REPO / "cellbed", "cellbed.daemon": REPO / "daemon", "cellbed.broker": REPO / "broker",
         "cellbed.controller": REPO / "controller"}
MAX_LINES = 450

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


def imports(mod: str, path: Path):
    """(imported module, is_local, lineno) for every cellbed import in *mod*."""
    tree = ast.parse(path.read_text(), str(path))
    out = []

    def visit(node, depth):
        for child in ast.iter_child_nodes(node):
            local = depth > 0
            if isinstance(child, ast.Import):
                for a in child.names:
                    out.append((a.name, local, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                names = _resolve(mod, path, child)
                known = [n for n in names[1:] if n in ALL]
                out.extend((n, local, child.lineno) for n in (known or names[:1]))
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, depth + 1)
            elif isinstance(child, ast.If) and _is_type_checking(child):
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
        tree = ast.parse(path.read_text(), str(path))
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
        tree = ast.parse(path.read_text(), str(path))
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
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in AGENT_CLASSES:
                    out.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}(...)")
    for p in (REPO / "scripts").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in AGENT_CLASSES:
                out.append(f"{p.relative_to(REPO)}:{node.lineno}: {node.func.id}(...)")
    return out


# --- the tests ----------------------------------------------------------------------------------

def test_no_package_cycles():
    cycles = find_cycles(package_graph())
    assert not cycles, "package cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


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


def test_the_checker_sees_planted_violations(tmp_path):
    """The walkers can fail: a planted cycle, a local import and a private access are found."""
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    src = tmp_path / "m.py"
    src.write_text("import os\n\ndef f(x):\n    from cellbed.runtime import clock\n    return x._secret\n")
    assert imports("cellbed.zz", src) == [("cellbed.runtime.clock", True, 4)]
    tree = ast.parse(src.read_text())
    attrs = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    assert "_secret" in attrs


if __name__ == "__main__":
    g = package_graph()
    print("packages:", len(set(g) | {w for ws in g.values() for w in ws}), "edges:", sum(map(len, g.values())))
    print("cycles:", find_cycles(g))
    li = local_imports()
    print("function-local cellbed imports:", len(li))
    pa = private_accesses()
    print("private accesses:", len(pa))
    if "-v" in sys.argv:
        print("\n".join(li + pa))
    print("libvirt importers:", libvirt_importers())
    print("agent constructions outside the assembly:", agent_constructions())
    lf = long_files()
    print("files > 400 lines:", sum(1 for n, _ in lf if n > 400), "> 450:", sum(1 for n, _ in lf if n > 450))
    for n, p in lf[:20]:
        print(f"  {n:5d} {p}")
