"""Tier 2 runs a test file per worker, two at a time (./cellbed.sh test, `--dist loadfile`): two
files' cells may be up together, so no two files may use the same subnet or cell name. Read from
the files themselves (their literals, and the scenarios and documentation they run), no cell."""
import re
from collections import defaultdict
from pathlib import Path

from tests import doc_commands as docs

REPO = Path(__file__).resolve().parents[2]
INTEGRATION = REPO / "tests" / "integration"
SUBNET = re.compile(r"10\.231\.\d+\.0/24")
SCENARIO = re.compile(r"[\w-]+\.toml")
CELL_NAME = re.compile(r'(?:cellmod\.up\(|CELL(?:, \w+)* = |"--cell", )"([a-z0-9]+)"')
NESTED_DEFAULTS = REPO / "ansible" / "roles" / "nested" / "defaults" / "main.yml"


def uses(path: Path) -> tuple[set[str], set[str]]:
    """(subnets, cell names) a test file brings up: its literals, the scenarios it names (whose own
    [cell] subnet it keeps unless it sets another), and for the docs test the documented commands."""
    text = path.read_text()
    subnets, names = set(SUBNET.findall(text)), set(CELL_NAME.findall(text))
    if re.search(r"\bcell2\b", text):                      # the conftest's shared fixture: its cell is the file's
        conftest = (INTEGRATION / "conftest.py").read_text()
        body = conftest[conftest.index("def cell2"):]
        subnets |= set(SUBNET.findall(body[:body.index("yield")]))
        names |= set(CELL_NAME.findall(body[:body.index("yield")]))
    if "pytest.mark.nested" in text:                         # the nested role's bridge, on its default subnet
        subnets |= set(SUBNET.findall(NESTED_DEFAULTS.read_text().split("nested_subnet:")[1].split("\n")[0]))
    for name in set(SCENARIO.findall(text)):
        scen = REPO / "scenarios" / name
        if scen.is_file() and "cell.subnet=" not in text:
            subnets |= set(SUBNET.findall(scen.read_text()))
    if path.name == "test_readme.py":
        for page in docs.PAGES:
            for c in docs.commands(page, docs.read(page)):
                if c.parse_only or "up" not in c.argv:
                    continue
                argv = list(c.argv)
                subnets.add(argv[argv.index("--subnet") + 1] if "--subnet" in argv else "10.231.0.0/24")
                names.add(argv[argv.index("--cell") + 1] if "--cell" in argv else "default")
    return subnets, names


def collisions(files) -> tuple[dict, dict]:
    """({subnet: files}, {cell name: files}) of what more than one of *files* uses."""
    by_subnet, by_name = defaultdict(set), defaultdict(set)
    for f in files:
        subnets, names = uses(f)
        for s in subnets:
            by_subnet[s].add(f.name)
        for n in names:
            by_name[n].add(f.name)
    return ({s: fs for s, fs in by_subnet.items() if len(fs) > 1},
            {n: fs for n, fs in by_name.items() if len(fs) > 1})


def test_no_two_integration_files_share_a_subnet_or_a_cell_name():
    files = sorted(INTEGRATION.glob("test_*.py"))
    assert len(set().union(*(uses(f)[0] for f in files))) >= 15     # the reader still finds the files' subnets
    assert collisions(files) == ({}, {})


def test_the_reader_catches_a_shared_subnet_and_a_shared_cell_name(tmp_path):
    """Planted: the check above fails on two files that share either."""
    (tmp_path / "test_a.py").write_text('CELL, SUBNET = "x", "10.231.99.0/24"\n')
    (tmp_path / "test_b.py").write_text('st = cellmod.up("x", 2, subnet="10.231.99.0/24")\n')
    (tmp_path / "test_c.py").write_text('st = cellmod.up("y", 2, subnet="10.231.98.0/24")\n')
    assert collisions(sorted(tmp_path.glob("*.py"))) == ({"10.231.99.0/24": {"test_a.py", "test_b.py"}},
                                                         {"x": {"test_a.py", "test_b.py"}})
