"""A real single-box cell for integration tests: namespaces, libvirtd, QEMU (TCG here)."""
import json
import os
import shutil
import subprocess

import pytest

from cellbed.cell import cell as cellmod
from cellbed.experiment.chaos.observe import libvirt_uri as chaos_libvirt_uri

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUEST = os.path.join(REPO, "build", "guest")


def _can_run_cells() -> str:
    if os.geteuid() != 0:
        return "needs root"
    for t in ("libvirtd", "qemu-system-x86_64", "mosquitto", "unshare", "nsenter"):
        if not shutil.which(t):
            return f"{t} not installed (run ./cellbed.sh setup)"
    if not os.path.exists(os.path.join(GUEST, "initrd.img")):
        return "guest not built (run ./cellbed.sh setup)"
    return ""


@pytest.fixture(scope="session")
def state_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cells"))


@pytest.fixture(scope="module")
def cell2(state_root):
    """Two hosts: h1 with 1.0 core / 1024 MiB, h2 with 0.8 core / 448 MiB (small, for refusals)."""
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up("it", 2, subnet="10.231.9.0/24", host_cpus=[1.0, 0.8], host_mem_mib=[1024, 448],
                    root=state_root, monitor_period_s=1.0)
    try:
        yield st
    finally:
        for h in st["hosts"]:
            log = os.path.join(state_root, "it", h, "logs", "node.log")
            if os.path.exists(log):
                print(f"--- {h} node.log (tail)\n" + "".join(open(log).readlines()[-40:]))
        cellmod.down("it", state_root)


def set_args(sets: list[str]) -> list[str]:
    return sum((["--set", s] for s in sets), [])


def cellctl_real(tmp_path_factory, command: str, scenario: str, sets: list[str]):
    """`cellctl COMMAND SCENARIO --out DIR --quiet --set ...` of a real-cell scenario (failing the
    test if cells cannot run here): (DIR, (bridges, netns) before it ran)."""
    from cellbed.cli.main import main as cellctl
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    out = tmp_path_factory.mktemp(command) / "out"
    before = (bridges(), netns())
    cellctl([command, os.path.join(REPO, "scenarios", scenario), "--out", str(out), "--quiet", *set_args(sets)])
    return out, before


def bridges() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def host_pids(state_root: str, cell: str, host: str) -> dict:
    with open(os.path.join(state_root, cell, host, "pids.json")) as f:
        return json.load(f)


def libvirt_uri(cell: dict, host: str) -> str:
    """*host*'s libvirtd as reached from the box (the chaos observer's, one definition)."""
    return chaos_libvirt_uri(cell, host)


def virsh_names(address_or_uri: str) -> list[str]:
    """The domains of a libvirtd: a URI (libvirt_uri), or an address of an insecure cell."""
    uri = address_or_uri if "://" in address_or_uri else f"qemu+tcp://{address_or_uri}/system"
    out = subprocess.run(["virsh", "-c", uri, "list", "--all", "--name"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return [n for n in out.split() if n]


def netns() -> set[str]:
    """The network namespaces that exist now (a test checks that a cell it ran left none behind)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


# Tier 2 runs on two workers (./cellbed.sh test: --dist loadfile --no-loadscope-reorder;
# CELLBED_TEST_LANES=1 runs it serially): a test file is the unit of work, its cell on one worker, on the file's
# own cell name and subnet (unit/test_integration_isolation.py), and nothing is shared between
# files. The longest files go first, so that the two workers end together (seconds on two workers,
# the clean-clone run of 41ef500, docs/results/suite.md: 434, 314, 238, 181, 174, 144, 116, 85, 56,
# 55); the others follow in file order.
LONGEST_FIRST = ("test_ansible.py", "test_chaos.py", "test_megha_cell.py", "test_real_3host.py", "test_readme.py",
                 "test_faults.py", "test_cell_migration.py", "test_refarch_real.py", "test_ui_cell.py",
                 "test_megha_cell_up.py")


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):      # one worker (serially): the files in their own order
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(rank)) if it.get_closest_marker("integration") else -1)


def cell_leftovers(name: str) -> tuple[set[str], set[str]]:
    """What of the cell *name* exists now: (its bridge, its namespaces). Another test file's cell
    may come and go meanwhile, so a file checks its own cell's names, not the box's whole list."""
    return {b for b in bridges() if b == f"cb{name}br"}, {n for n in netns() if n.startswith(f"cb-{name}-")}
