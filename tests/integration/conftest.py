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


# One real run of scenarios/real-3host.toml, shared by the runner's tests and compare's (issue 27):
# 20 simulated minutes at time compression 9 (133 s of wall time) on a 3-host cell of its own.
REAL_3HOST_SETS = ["cell.subnet=10.231.51.0/24", "run.duration_s=1200", "workload.time_compression=9"]


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


@pytest.fixture(scope="session")
def real_3host_run(tmp_path_factory):
    """(run folder, (bridges, netns) before the run, (bridges, netns) right after it)."""
    out, before = cellctl_real(tmp_path_factory, "run", "real-3host.toml", REAL_3HOST_SETS)
    return out, before, (bridges(), netns())


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


# Tier 2 may run on two workers (./cellbed.sh test: --dist loadgroup). A test file is the unit
# of work: its module-scoped cell lives on one worker, on the file's own cell name and subnet.
# The files that read the session's real 3-host run share a group, so that run happens once.
SHARED_RUNS = {"real_3host_run": "real-3host"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") or "integration" not in item.keywords:
            continue
        group = next((g for f, g in SHARED_RUNS.items() if f in item.fixturenames), item.module.__name__)
        item.add_marker(pytest.mark.xdist_group(group))


def cell_leftovers(name: str) -> tuple[set[str], set[str]]:
    """What of the cell *name* exists now: (its bridge, its namespaces). Another test file's cell
    may come and go meanwhile, so a file checks its own cell's names, not the box's whole list."""
    return {b for b in bridges() if b == f"cb{name}br"}, {n for n in netns() if n.startswith(f"cb-{name}-")}
