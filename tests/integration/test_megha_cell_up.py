"""Megha in one command (issue 15): `cellctl cell up --hosts 4 --san --megha --gms 2 --lms 2`
brings up 4 namespace hosts, the MASB broker and 2 GMs + 2 LMs as supervised cellbed-controller
processes; then `cellctl submit --cpu 0.1 --mem 128` (no --controller, no --user) places a real
VM through a GM and an LM, `gm view`, `lm partitions`, `queues` and `task` answer from the
cell's recorded config, an LM killed by its recorded pid is restarted by the cell's supervisor
(and adopts its running VM), and `cell down` leaves nothing behind.

Every cellctl here is a separate process (as a user runs it), in a folder without a
controller.toml and without $CELLBED_CONTROLLER.
"""
from __future__ import annotations

import asyncio
import json
import glob
import os
import signal
import subprocess
import sys
import ssl
import urllib.request

import pytest

from cellbed.cell import cell as cellmod, cell_pki, procs
from cellbed.cell.iproute import link_exists, netns_exists
from cellbed.cell.supervise import read_pids
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

CELL, SUBNET = "mh", "10.231.14.0/24"
CELLCTL = [sys.executable, "-m", "cellbed.cli.main"]


class Ctl:
    def __init__(self, state_root: str, cwd: str) -> None:
        self.state_root, self.cwd = state_root, cwd
        self.env = {k: v for k, v in os.environ.items() if k != "CELLBED_CONTROLLER"}

    async def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(
            subprocess.run, [*CELLCTL, "--state-root", self.state_root, "--cell", CELL, *args],
            capture_output=True, text=True, timeout=timeout, cwd=self.cwd, env=self.env)

    async def json(self, *args: str, timeout: float = 600):
        r = await self.run(*args, "--json", timeout=timeout)
        assert r.returncode == 0, f"cellctl {' '.join(args)}: {r.stderr}"
        return json.loads(r.stdout)


def scrape(st: dict, target: str) -> str:
    """/metrics over HTTPS with the cell's scraping certificate (plain HTTP in an insecure cell)."""
    tls = cell_pki.files(st, cell_pki.PROMETHEUS)
    ctx = None
    if tls is not None:
        ctx = ssl.create_default_context(cafile=tls.ca)
        ctx.load_cert_chain(tls.cert, tls.key)
    try:
        with urllib.request.urlopen(f"{'https' if ctx else 'http'}://{target}/metrics", timeout=5, context=ctx) as r:
            return r.read().decode()
    except OSError:
        return ""


@pytest.fixture(scope="module")
def megha_cell(state_root, tmp_path_factory):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    cwd = str(tmp_path_factory.mktemp("cwd"))                 # no ./controller.toml
    ctl = Ctl(state_root, cwd)
    try:
        yield ctl
    finally:
        sdir = cellmod.state_dir(CELL, state_root)
        for name in ("supervise", "lm1a", "lm2a", "gm1", "gm2"):
            p = os.path.join(sdir, "megha", f"{name}.log")
            if os.path.exists(p):
                print(f"--- {name}.log (tail)\n" + "".join(open(p, errors="replace").readlines()[-20:]))
        cellmod.down(CELL, state_root)                          # idempotent: the last test already did it


async def test_cell_up_megha_starts_supervised_gms_and_lms(megha_cell):
    ctl = megha_cell
    r = await ctl.run("cell", "up", "--hosts", "4", "--subnet", SUBNET, "--host-cpus", "0.4", "--host-mem-mib", "512",
                      "--monitor-period-s", "2", "--san", "--san-set", "boot_grace_s=60",
                      "--megha", "--gms", "2", "--lms", "2", "--explain", "all", timeout=900)
    assert r.returncode == 0, r.stderr
    assert "megha: gm1 10.231.14.1:50071, gm2 10.231.14.1:50072" in r.stdout, r.stdout
    st = cellmod.load_state(CELL, ctl.state_root)
    m = st["megha"]
    assert m["gms"] == {"gm1": "10.231.14.1:50071", "gm2": "10.231.14.1:50072"}
    assert m["lms"] == {"lm1a": "10.231.14.1:50081", "lm2a": "10.231.14.1:50082"}
    assert m["partitions"] == {"lm1": ["h1", "h2"], "lm2": ["h3", "h4"]}
    assert m["controller"] == os.path.join(cellmod.state_dir(CELL, ctl.state_root), "controller.toml")
    sup = [x for x in st["resources"] if x.get("name") == "megha-supervisor"]
    assert len(sup) == 1 and procs.alive(sup[0]) and sup[0]["pids_file"] == m["pids_file"]
    assert cellmod.health_ok(st["broker"], service="cellbed.v1.BrokerAgent", security=cell_pki.admin(st))     # --san and --megha together
    agents = {t["labels"]["agent"]: (t["job"], t["target"]) for t in st["metrics_targets"] if t["job"] in ("gm", "lm")}
    assert agents == {"lm1a": ("lm", "10.231.14.1:9470"), "lm2a": ("lm", "10.231.14.1:9471"),
                      "gm1": ("gm", "10.231.14.1:9472"), "gm2": ("gm", "10.231.14.1:9473")}
    for name, (job, target) in agents.items():       # each process serves its own /metrics
        async def scraped(job=job, target=target):     # (its exporter starts just after its gRPC server)
            return f"cellbed_{job}_" in await asyncio.to_thread(scrape, st, target)
        await wait_until(scraped, 30, f"/metrics of {name} on {target}")


async def test_submit_right_after_up_with_no_flags_places_a_vm_through_a_gm_and_an_lm(megha_cell):
    ctl = megha_cell
    st = await ctl.json("submit", "--cpu", "0.1", "--mem", "128", "--name", "mt1")
    assert st["state"] == "TASK_STATE_RUNNING", st
    assert st["user"] == "default" and st["gm"] == "gm1"
    p = st["placement"]
    part = {"lm1": ["h1", "h2"], "lm2": ["h3", "h4"]}
    assert p["host"] in part[p["lm"]] and p["lm_instance"] == p["lm"] + "a"
    a = st["allocation"]
    parts = a["framework_queue_ms"] + a["processing_ms"] + a["worker_queue_ms"] + a["communication_ms"]
    assert a["total_ms"] > 0 and a["total_ms"] == pytest.approx(parts, abs=1e-6)
    assert a["attempts"] >= 1 and a["boot_ms"] > 0
    text = await ctl.run("task", "mt1")
    assert text.returncode == 0 and "RUNNING on " + p["host"] in text.stdout and "allocation time" in text.stdout, text
    # why that host (issue 29): gm1's explanation of the placement, as the real GM wrote it
    found = glob.glob(os.path.join(cellmod.state_dir(CELL, ctl.state_root), "**", "decisions-gm1.jsonl"),
                      recursive=True)
    assert len(found) == 1, found
    [d] = [x for x in map(json.loads, open(found[0]).read().splitlines())
           if x.get("task") == "mt1" and x["outcome"] == "placed"]     # one record per attempt: the one that placed
    assert d["kind"] == "megha" and d["chosen"] == p["host"], d
    last = d["matches"][-1]                              # the GM's match on its view, then the LM's verdict
    assert last["chosen"] == p["host"] and last["lm"] == p["lm"] and last["offered"] >= 1
    assert d["verdicts"][-1]["result"] == "ok" and d["verdicts"][-1]["host"] == p["host"]
    assert d["view_age_s"] is not None and d["view_age_s"] >= 0 and d["messages"] == 2 * len(d["verdicts"])
    other = await ctl.json("submit", "--cpu", "0.1", "--mem", "128", "--name", "mt2", "--user", "user2")
    assert other["state"] == "TASK_STATE_RUNNING" and other["gm"] == "gm2", other
    status = await ctl.json("cell", "status")
    assert [(a["agent"], a["health"], a["restarts"]) for a in status["megha"]] == [
        ("lm1a", "SERVING", 0), ("lm2a", "SERVING", 0), ("gm1", "SERVING", 0), ("gm2", "SERVING", 0)]
    assert all(h["health"] == "SERVING" for h in status["hosts"])


async def test_gm_view_lm_partitions_and_queues_need_no_controller_flag(megha_cell):
    ctl = megha_cell
    v = await ctl.json("gm", "view")
    assert v["gm"] == "gm1" and [x["lm"] for x in v["lms"]] == ["lm1", "lm2"]
    parts = await ctl.json("lm", "partitions")
    assert [(x["lm"], x["instance"], x["role"]) for x in parts] == [("lm1", "lm1a", "LM_ROLE_ACTIVE"),
                                                                   ("lm2", "lm2a", "LM_ROLE_ACTIVE")]
    hosts = {x["lm"]: sorted({s["host"] for pt in x["partitions"] for s in pt["slices"]}) for x in parts}
    assert hosts == {"lm1": ["h1", "h2"], "lm2": ["h3", "h4"]}
    used = sum(s["used"]["cpu_cores"] for x in parts for pt in x["partitions"] for s in pt["slices"])
    assert used == pytest.approx(0.2)
    q = {x["user"]: x for x in await ctl.json("queues")}
    assert set(q) == {"default", "user2"} and q["default"]["gm"] == "gm1" and q["user2"]["gm"] == "gm2"
    assert q["default"]["share"] == 0.5 and int(q["default"]["placed"]) == 1


async def test_an_lm_killed_by_its_recorded_pid_is_restarted_and_adopts_its_vm(megha_cell):
    ctl = megha_cell
    st = cellmod.load_state(CELL, ctl.state_root)
    pids_file = st["megha"]["pids_file"]
    task = await ctl.json("task", "mt1")
    inst, host = task["placement"]["lm_instance"], task["placement"]["host"]
    before = read_pids(pids_file)["processes"][inst]
    assert procs.alive(before)
    os.kill(before["pid"], signal.SIGKILL)

    async def back():
        rec = read_pids(pids_file)
        now = rec["processes"][inst]
        return (now != before and procs.alive(now) and rec["restarts"][inst] == 1
                and cellmod.health_ok(st["megha"]["lms"][inst], service="cellbed.v1.LocalMaster",
                                   security=cell_pki.admin(st)))
    await wait_until(back, 180, f"{inst} to be restarted by the supervisor and SERVING")
    parts = {x["instance"]: x for x in await ctl.json("lm", "partitions")}
    on_host = [s for pt in parts[inst]["partitions"] for s in pt["slices"] if s["host"] == host and not s["logical"]]
    assert sum(s["tasks"] for s in on_host) == 1           # the restarted LM adopted the running VM
    status = await ctl.json("cell", "status")
    assert {a["agent"]: a["restarts"] for a in status["megha"]} == {"lm1a": int(inst == "lm1a"),
                                                                    "lm2a": int(inst == "lm2a"), "gm1": 0, "gm2": 0}
    again = await ctl.json("submit", "--cpu", "0.1", "--mem", "128", "--name", "mt3")
    assert again["state"] == "TASK_STATE_RUNNING", again


async def test_cell_down_leaves_nothing(megha_cell):
    ctl = megha_cell
    st = cellmod.load_state(CELL, ctl.state_root)
    sdir = cellmod.state_dir(CELL, ctl.state_root)
    recorded = [x for x in st["resources"] if x["kind"] == "process" and "pid" in x]
    recorded += list(read_pids(st["megha"]["pids_file"])["processes"].values())
    for h in st["hosts"]:
        with open(os.path.join(sdir, h, "pids.json")) as f:
            recorded += list(json.load(f).values())
    assert len(recorded) >= 1 + 1 + 4 + 4 + 4               # mosquitto, broker, supervisor, agents, hosts
    r = await ctl.run("cell", "down")
    assert r.returncode == 0, r.stderr
    assert [x for x in recorded if procs.alive(x)] == []
    assert not os.path.exists(sdir)
    assert not link_exists(st["bridge"]) and not any(link_exists(f"cb{CELL}h{i}") for i in range(1, 5))
    assert not any(netns_exists(h["netns"]) for h in st["hosts"].values())
    r = await ctl.run("cell", "down")
    assert r.returncode == 0 and "nothing to do" in r.stdout
