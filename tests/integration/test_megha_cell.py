"""Megha on a real single-box cell (issue 4, acceptance 1): 2 LMs (the first with a standby),
2 GMs and 4 namespace hosts running real VMs under TCG; every GM and LM is its own
cellbed-controller process, over gRPC and the cell's MQTT broker.

34 constrained tasks from 2 users (32 placeable, 2 that no host satisfies) are submitted at
once; each VM is 128 MiB, idle (cpu_load 0, the box has 2 cores under TCG), and runs 15-25 s.
A host holds 4 such VMs (512 MiB), so at most 16 run at a time and the GMs compete for every
freed slot; each LM boots at most 2 VMs per host at a time (a TCG boot takes seconds of CPU). Mid-run, GM gm1 is killed (SIGKILL) and restarted from its queue journal, and LM
instance lm1a is killed so that lm1b takes over.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pytest

from cellbed.domain import errors, wire
from cellbed.cell import agents as cell_agents, cell as cellmod, cell_pki, megha as meghamod
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from cellbed.domain.constraints import Constraint, ConstraintOp, constraints_match
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

SUBNET = "10.231.40.0/24"
BRIDGE = "10.231.40.1"
ATTRS = [{"ssd": 1, "rack": "a"}, {"ssd": 1, "rack": "b"}, {"rack": "a"}, {"gpu": 1, "rack": "b"}]
EQ, NE = ConstraintOp.EQUAL, ConstraintOp.NOT_EQUAL
CONSTRAINTS = [(), (Constraint("ssd", EQ, 1),), (Constraint("rack", EQ, "a"),), (Constraint("rack", NE, "a"),),
               (Constraint("gpu", EQ, 1),), (Constraint("ssd", EQ, 1), Constraint("rack", EQ, "b"))]
NEVER = (Constraint("gpu", EQ, 1), Constraint("ssd", EQ, 1))       # no host has both
# Twice the cell's 16 slots: the GMs compete for every slot of the first burst and again for every
# freed one. It was 50 until issue 27: the same first burst and 18 more TCG boots (~120 s); the
# longer run is `CELLBED_MEGHA_TASKS=50 ./cellbed.sh test tests/integration/test_megha_cell.py`.
# 20 was tried twice (issue 27): the first run found GetTask answering NOT_FOUND for a task right
# after lm1b's takeover (a bug, unit/test_gm_remote_status.py); another saw no inconsistency at all
# (20 tasks do not always make the GMs collide), which this test requires. It saved 13 s.
PLACEABLE = int(os.environ.get("CELLBED_MEGHA_TASKS", "32"))
AGENTS = {"gm1": 50071, "gm2": 50072, "lm1a": 50081, "lm1b": 50082, "lm2a": 50083}


def controller_toml(hosts: dict, state_dir: str, security: list[str]) -> str:
    lines = ['cell = "mg"', f'mqtt_host = "{BRIDGE}"', *security, f'state_dir = "{state_dir}"',
             'known_attributes = ["ssd", "rack", "gpu", "host"]', "", "[agents]"]
    lines += [f'{n} = "{BRIDGE}:{p}"' for n, p in AGENTS.items()]
    lines += ["", "[hosts]"] + [f'{h} = "{d["address"]}:{d["grpc_port"]}"' for h, d in hosts.items()]
    lines += ["", '[[gm]]', 'name = "gm1"', '[[gm]]', 'name = "gm2"',
              '[[lm]]', 'name = "lm1"', 'instances = ["lm1a", "lm1b"]', 'hosts = ["h1", "h2"]',
              '[[lm]]', 'name = "lm2"', 'instances = ["lm2a"]', 'hosts = ["h3", "h4"]',
              '[[queue]]', 'user = "alice"', 'share = 0.5', 'gm = "gm1"',
              '[[queue]]', 'user = "bob"', 'share = 0.5', 'gm = "gm2"',
              "[gm_params]", "request_timeout_s = 20.0", "retry_period_s = 5.0",
              "[lm_params]", "update_period_s = 2.0", "start_timeout_s = 240.0", "takeover_after_s = 3.0",
              "max_starting_per_host = 2"]
    return "\n".join(lines) + "\n"


class Agents:
    """The cellbed-controller processes this test started (by pid; nothing else is touched)."""

    def __init__(self, config: str, logdir: str) -> None:
        self.config, self.logdir = config, logdir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        log = open(os.path.join(self.logdir, f"{name}.log"), "ab")
        self.procs[name] = subprocess.Popen([sys.executable, "-m", "cellbed.controller.main", "--config", self.config,
                                             "--only", name], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def kill(self, name: str) -> None:
        p = self.procs.pop(name)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)

    def stop_all(self) -> None:
        for name, p in list(self.procs.items()):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.procs.clear()


async def serving(target: str, service: str, security) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    try:
        async with security.channel(target) as ch:
            r = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
            return r.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


@pytest.fixture(scope="module")
def megha_cell(state_root, tmp_path_factory):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up("mg", 4, subnet=SUBNET, host_cpus=[0.5], host_mem_mib=[512], root=state_root,
                    monitor_period_s=2.0, host_attributes=ATTRS)
    work = tmp_path_factory.mktemp("megha")
    cfg = os.path.join(work, "controller.toml")
    # The agents join the running cell: certificates from its CA, identities in its MQTT ACL.
    st = cell_agents.add_agents("mg", state_root, gms=[n for n in AGENTS if n.startswith("gm")],
                                lm_of={n: n[:3] for n in AGENTS if n.startswith("lm")})
    with open(cfg, "w") as f:
        f.write(controller_toml(st["hosts"], os.path.join(work, "state"), meghamod.security_lines(st)))
    agents = Agents(cfg, str(work))
    try:
        yield st, agents, cfg
    finally:
        agents.stop_all()
        for n in AGENTS:
            p = os.path.join(work, f"{n}.log")
            if os.path.exists(p):
                print(f"--- {n}.log (tail)\n" + "".join(open(p, errors="replace").readlines()[-25:]))
        for h in st["hosts"]:
            p = os.path.join(state_root, "mg", h, "logs", "node.log")
            if os.path.exists(p):
                print(f"--- {h} node.log (tail)\n" + "".join(open(p, errors="replace").readlines()[-15:]))
        cellmod.down("mg", state_root)


async def start_agents(agents: Agents, names, security) -> None:
    for n in names:
        agents.start(n)
        svc = "cellbed.v1.GlobalMaster" if n.startswith("gm") else "cellbed.v1.LocalMaster"

        async def up(n=n, svc=svc):
            return await serving(f"{BRIDGE}:{AGENTS[n]}", svc, security)
        await wait_until(up, 90, f"{n} SERVING")


def spec(i: int) -> meghapb.MeghaTask:
    user = "alice" if i % 2 == 0 else "bob"
    return meghapb.MeghaTask(name=f"mt{i:02d}", user=user, request=wire.resources(0.1, 128),
                         constraints=wire.constraints_pb(CONSTRAINTS[i % len(CONSTRAINTS)]),
                         duration_s=15.0 + (i % 3) * 5.0, workload=npb.Workload(cpu_load=0.0, wss_mib=0))


async def test_thirty_two_constrained_tasks_as_real_vms_with_gm_restart_and_lm_takeover(megha_cell):
    st, agents, _ = megha_cell
    await start_agents(agents, ["lm1a", "lm2a", "lm1b", "gm1", "gm2"], cell_pki.admin(st))
    t = GrpcTransport(lambda n: f"{BRIDGE}:{AGENTS[n]}" if n in AGENTS else n, RealClock(),
                      security=cell_pki.admin(st))
    hosts = {h: f"{d['address']}:{d['grpc_port']}" for h, d in st["hosts"].items()}
    seen: dict[str, set[str]] = {}
    violations: list[str] = []
    stop = asyncio.Event()

    async def monitor():   # the nodes' truth, once a second: one host per VM, memory within capacity
        while not stop.is_set():
            where: dict[str, list[str]] = {}
            for h, target in hosts.items():
                try:
                    vms = (await t.request(target, "NodeAgent/ListVms", npb.ListVmsRequest(), timeout=10)).vms
                except errors.CellbedError:
                    continue
                if sum(v.spec.mem_mib for v in vms) > 512:
                    violations.append(f"{h} holds {sum(v.spec.mem_mib for v in vms)} MiB > 512")
                for v in vms:
                    where.setdefault(v.spec.name, []).append(h)
                    seen.setdefault(v.spec.name, set()).add(h)
            violations.extend(f"{n} on {hs}" for n, hs in where.items() if len(hs) > 1)
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass

    counters: list[dict] = []

    async def snapshot(names):
        for n in names:
            try:
                if n.startswith("gm"):
                    counters.append(dict((await t.request(n, "GlobalMaster/GetView", meghapb.GetViewRequest())).counters))
                else:
                    counters.append(dict((await t.request(n, "LocalMaster/ListPartitions",
                                                          meghapb.ListPartitionsRequest())).counters))
            except errors.CellbedError:
                pass

    mon = asyncio.create_task(monitor())
    tasks = [spec(i) for i in range(PLACEABLE)]
    never = [meghapb.MeghaTask(name=f"never{i}", user=u, request=wire.resources(0.1, 128),
                           constraints=wire.constraints_pb(NEVER), workload=npb.Workload(cpu_load=0.0))
             for i, u in enumerate(("alice", "bob"))]
    t0 = time.monotonic()
    try:
        for x in tasks + never:
            gm = "gm1" if x.user == "alice" else "gm2"
            r = await t.request(gm, "GlobalMaster/Submit", meghapb.SubmitRequest(task=x), timeout=20)
            assert r.status.state in (meghapb.TASK_STATE_QUEUED, meghapb.TASK_STATE_STARTING, meghapb.TASK_STATE_RUNNING)

        async def started(k: int):
            return sum(len(hs) > 0 for n, hs in seen.items() if n.startswith("mt")) >= k
        await wait_until(lambda: started(8), 300, "8 VMs running")
        await snapshot(["gm1"])
        agents.kill("gm1")                                  # crash: its queue lives in the journal
        with pytest.raises(errors.Unavailable):             # it really is down: clients see UNAVAILABLE
            await t.request("gm1", "GlobalMaster/Submit", meghapb.SubmitRequest(task=tasks[0]), timeout=5)
        await start_agents(agents, ["gm1"], cell_pki.admin(st))
        await wait_until(lambda: started(PLACEABLE // 2), 600, f"{PLACEABLE // 2} VMs started")
        await snapshot(["lm1a"])
        agents.kill("lm1a")                                 # lm1b takes over lm1's hosts

        async def took_over():
            try:
                r = await t.request("lm1b", "LocalMaster/GetRole", meghapb.GetRoleRequest(), timeout=5)
                return r.role == meghapb.LM_ROLE_ACTIVE
            except errors.CellbedError:
                return False
        await wait_until(took_over, 60, "lm1b to take over")

        statuses: dict[str, meghapb.TaskStatus] = {}

        async def all_started():
            for x in tasks:
                if x.name in statuses:
                    continue
                gm = "gm1" if x.user == "alice" else "gm2"
                try:
                    s = (await t.request(gm, "GlobalMaster/GetTask", meghapb.GetTaskRequest(name=x.name),
                                         timeout=10)).status
                except errors.Unavailable:      # an LM that holds it did not answer (its takeover): ask again
                    continue
                if s.state in (meghapb.TASK_STATE_RUNNING, meghapb.TASK_STATE_FINISHED):
                    statuses[x.name] = s
            return len(statuses) == len(tasks)
        await wait_until(all_started, 900, f"all {PLACEABLE} placeable tasks to start", period_s=2.0)
        elapsed = time.monotonic() - t0
        never_st = [(await t.request("gm1" if x.user == "alice" else "gm2", "GlobalMaster/GetTask",
                                     meghapb.GetTaskRequest(name=x.name))).status for x in never]
        await snapshot(["gm1", "gm2", "lm1b", "lm2a"])
    finally:
        stop.set()
        await mon
        await t.close()

    # every task ran on a host satisfying its constraints, exactly once, and nothing overflowed
    assert not violations, violations[:10]
    for x in tasks:
        host = statuses[x.name].placement.host
        assert constraints_match(wire.constraints_from_pb(x.constraints), {**ATTRS[int(host[1:]) - 1], "host": host}), \
            (x.name, host)
        assert host in seen.get(x.name, ()), (x.name, seen.get(x.name), host)   # (a failed boot may have
                                                                               # tried another host before)
    for s in never_st:
        assert s.state == meghapb.TASK_STATE_QUEUED and "no host satisfies" in s.detail, s
    total = {k: sum(c.get(k, 0) for c in counters) for k in ("inconsistency_internal", "inconsistency_external",
                                                              "repartitions", "takeovers", "recovered_queued",
                                                              "recovered_placed", "duplicates")}
    print(f"\n{PLACEABLE + 2} tasks ({PLACEABLE} placeable) started in {elapsed:.0f} s; counters over every agent: {total}")
    assert total["inconsistency_internal"] + total["inconsistency_external"] > 0
    assert total["takeovers"] == 1 and total["recovered_queued"] + total["recovered_placed"] > 0

    # allocation time on the real cell: the four parts, the VM boot separately
    rows = [s.allocation for s in statuses.values() if s.allocation.start_unix_s]
    print(f"real cell, {PLACEABLE} tasks under contention (ms):   p50      p90      max")
    for f in ("framework_queue_ms", "processing_ms", "worker_queue_ms", "communication_ms", "total_ms", "boot_ms"):
        vals = sorted(getattr(a, f) for a in rows)
        print(f"  {f:20s} {statistics.median(vals):9.1f} {vals[int(0.9 * (len(vals) - 1))]:9.1f} {vals[-1]:9.1f}")
    for a in rows:
        parts = a.framework_queue_ms + a.processing_ms + a.worker_queue_ms + a.communication_ms
        assert a.total_ms == pytest.approx(parts, abs=1e-6)


async def test_cellctl_submit_on_the_idle_cell_shows_parts_and_boot(megha_cell):
    """The real-cell benchmark: submit -> VM running on an idle cell, with the VM boot shown
    separately (printed, not asserted)."""
    cell, agents, cfg = megha_cell
    if "gm1" not in agents.procs:
        await start_agents(agents, ["lm1a", "lm2a", "lm1b", "gm1", "gm2"], cell_pki.admin(cell))
    figures = []
    root = os.path.dirname(os.path.dirname(cell["pki"]["dir"]))     # cellctl acts as the cell's admin
    for i in range(3):
        p = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cellbed.cli.main", "--cell", "mg", "--state-root", root,
            "submit", "--controller", cfg, "--cpu", "0.1", "--mem", "128",
            "--user", "bob", "--constraint", "rack=b", "--name", f"solo{i}", "--duration-s", "5", "--json",
            "--wait-s", "200", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await p.communicate()
        assert p.returncode == 0, err.decode()
        st = json.loads(out)
        assert st["state"] == "TASK_STATE_RUNNING" and st["placement"]["host"] in ("h2", "h4")
        figures.append(st["allocation"])
    print("\nreal cell, idle, submit -> VM running (ms): total = fq + proc + wq + comm; boot separate")
    for a in figures:
        print(f"  total {a['total_ms']:8.1f} = {a['framework_queue_ms']:.1f} + {a['processing_ms']:.2f} + "
              f"{a['worker_queue_ms']:.1f} + {a['communication_ms']:.1f};  boot {a['boot_ms']:.0f}")
