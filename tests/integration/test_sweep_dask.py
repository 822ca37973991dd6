"""A sweep on a real distributed Dask cluster across a cell's network (issue 16): a 2-host cell
(10.231.20.0/24), `dask scheduler` in h1's network namespace on port 8786, a `dask worker` in h1's
and in h2's, and `cellctl sweep --scheduler ...` from the box over the cell's bridge. Its results
equal, run for run, those of the same sweep on a LocalCluster, and both hosts' workers ran runs.

Twice: over plaintext TCP (Dask's default; cellctl warns), and over mutual TLS with the cell's own
certificates (cellbed/cell/cell_pki.py: the scheduler and each worker with its host's node
certificate, the client with the admin's), which a client without a certificate cannot reach.

The Dask processes are recorded by pid and stopped by pid; the cell comes down with `cell down`.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from distributed import Client
from distributed.security import Security

from cellbed.cell import cell as cellmod
from cellbed.cell import cell_pki
from cellbed.domain.identity import Role
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DASK = str(Path(sys.executable).parent / "dask")
SMOKE = REPO / "scenarios" / "smoke.toml"
BESTFIT = REPO / "scenarios" / "masb-table3-bestfit.toml"
PORT = 8786
FILES = ("ticks.csv", "migrations.csv", "allocations.csv")


@pytest.fixture(scope="module")
def dk_cell(state_root):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up("dk", 2, subnet="10.231.20.0/24", host_cpus=[0.8], host_mem_mib=[512], root=state_root)
    try:
        yield st
    finally:
        cellmod.down("dk", state_root)


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    d = tmp_path_factory.mktemp("dkspec")
    p = d / "dk.toml"
    p.write_text(f'name = "dk"\nscenarios = ["{SMOKE}", "{BESTFIT}"]\nseeds = [1, 2]\n'
                 '[set]\n"run.duration_s" = 600\n"cell.nodes" = 60\n')
    return p


def cellctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellbed.cli.main", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def local_sweep(spec, tmp_path_factory):
    """The reference: the same sweep on a LocalCluster of this box."""
    out = tmp_path_factory.mktemp("dklocal") / "sweep"
    p = cellctl("sweep", str(spec), "--out", str(out), "--workers", "2", "--no-report", "--json")
    assert p.returncode == 0, p.stderr
    return out


def in_host(st: dict, host: str, argv: list[str], log: Path) -> subprocess.Popen:
    """*argv* in *host*'s network namespace (nsenter execs it: the pid is the program's), with its
    Dask scratch space beside *log* (not the shared /tmp/dask-scratch-space)."""
    env = {**os.environ, "DASK_TEMPORARY_DIRECTORY": str(log.parent / "dask-scratch")}
    return subprocess.Popen(["nsenter", f"--net=/run/netns/{st['hosts'][host]['netns']}", *argv],
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)


@pytest.fixture(params=["tcp", "tls"])
def dask_cluster(request, dk_cell, tmp_path):
    """A Dask scheduler in h1 and a worker in h1 and in h2; (scheduler address, client TLS flags)."""
    proto = request.param
    st = dk_cell
    h1 = st["hosts"]["h1"]["address"]
    addr = f"{proto}://{h1}:{PORT}"

    def tls(host: str, role: Role = Role.NODE) -> list[str]:
        f = cell_pki.files(st, role, host)
        return ["--tls-ca-file", f.ca, "--tls-cert", f.cert, "--tls-key", f.key] if proto == "tls" else []
    procs: list[subprocess.Popen] = []
    try:
        procs.append(in_host(st, "h1", [DASK, "scheduler", "--host", h1, "--port", str(PORT), "--protocol", proto,
                                        "--no-dashboard", "--dashboard-address", f"{h1}:8787", *tls("h1")],
                             tmp_path / "scheduler.log"))
        for h in ("h1", "h2"):
            a = st["hosts"][h]["address"]
            procs.append(in_host(st, h, [DASK, "worker", addr, "--host", a, "--protocol", proto, "--name", h,
                                         "--nthreads", "1", "--no-nanny", "--no-dashboard", "--dashboard-address",
                                         f"{a}:0", "--memory-limit", "0", *tls(h)], tmp_path / f"worker-{h}.log"))
        admin = cell_pki.files(st, Role.ADMIN, "admin")
        flags = ["--tls-ca-file", admin.ca, "--tls-cert", admin.cert, "--tls-key", admin.key] if proto == "tls" else []
        yield addr, flags, procs
    finally:
        # The workers, then the scheduler, each waited for: a worker told to stop while the
        # scheduler closes under it hangs in its own close until killed (30 s per cluster, issue 27).
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print(f"pid {p.pid} ({p.args[3]}) ignored SIGTERM for 30 s: killed")
                p.kill()
                p.wait()
        for log in sorted(tmp_path.glob("*.log")):
            print(f"--- {log.name} (tail)\n" + "".join(log.read_text(errors="replace").splitlines(True)[-15:]))


def without_wall(path: Path) -> str:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    i = rows[0].index("wall_s") if "wall_s" in rows[0] else None
    return "".join(",".join(r[:i] + r[i + 1:] if i is not None else r) + "\n" for r in rows)


async def test_sweep_across_the_cell_equals_the_local_sweep(dask_cluster, dk_cell, spec, local_sweep, tmp_path):
    addr, flags, procs = dask_cluster
    sec = None
    if flags:
        sec = Security(tls_ca_file=flags[1], tls_client_cert=flags[3], tls_client_key=flags[5], require_encryption=True)

    async def two_workers():
        assert all(p.poll() is None for p in procs), "a Dask process exited (see its log)"
        try:
            async with Client(addr, security=sec, asynchronous=True, timeout=5) as c:
                return len(await c.nthreads()) == 2
        except OSError:
            return False
    await wait_until(two_workers, 120, "the scheduler in h1 and a worker in h1 and h2")
    if flags:   # without the cell's certificate the scheduler cannot be reached
        with pytest.raises(OSError):
            async with Client(addr.replace("tls://", "tcp://"), asynchronous=True, timeout=5):
                pass

    out = tmp_path / "sweep"
    p = cellctl("sweep", str(spec), "--out", str(out), "--scheduler", addr, *flags, "--no-report", "--json")
    assert p.returncode == 0, p.stderr
    assert ("plaintext and unauthenticated" in p.stderr) == (not flags)
    res = json.loads(p.stdout)
    assert (res["ran"], res["failed"], res["cluster"]) == (4, [], f"the Dask cluster at {addr}")
    hosts = {dk_cell["hosts"][h]["address"] for h in ("h1", "h2")}
    ran_on = {r["worker"].split("://")[1].rsplit(":", 1)[0] for r in res["runs"].values()}
    assert ran_on == hosts, res["runs"]
    assert {w.split("://")[0] for w in res["workers"]} == {addr.split("://")[0]}
    for scen in (SMOKE, BESTFIT):
        for seed in (1, 2):
            rel = Path(scen.stem) / "default" / f"seed-{seed}"
            for f in FILES:
                assert without_wall(out / rel / f) == without_wall(local_sweep / rel / f), f"{rel}/{f} differs"
    assert os.path.exists(out / "sweep.json")
