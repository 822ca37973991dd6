"""Megha over real gRPC + MQTT (cellbed-controller's Controller, in-process on port 0) with the
model backend for the nodes: health and reflection, the cellctl commands, periodic updates
over MQTT, bad input as status codes, and an LM takeover seen through gRPC."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from cellbed.controller.main import Controller
from cellbed.controller.megha.config import ControllerConfig
from cellbed.controller.megha.lm_wire import ACTIVE
from tests.conftest import wait_until

CELLCTL = [sys.executable, "-m", "cellbed.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mosquitto(tmp_path):
    """A private broker on a free loopback port; stopped by its pid."""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    p = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield port
    finally:
        p.terminate()
        p.wait(timeout=10)


def config(tmp_path, mqtt_port: int) -> dict:
    return {
        "cell": "t", "mqtt_host": "127.0.0.1", "mqtt_port": mqtt_port, "insecure": True, "state_dir": str(tmp_path / "state"),
        "agents": {n: "127.0.0.1:0" for n in ("gm1", "gm2", "lm1a", "lm1b", "lm2a")},
        "gm": [{"name": "gm1"}, {"name": "gm2"}],
        "lm": [{"name": "lm1", "instances": ["lm1a", "lm1b"]}, {"name": "lm2", "instances": ["lm2a"]}],
        "queue": [{"user": "alice", "share": 0.5, "gm": "gm1"}, {"user": "bob", "share": 0.5, "gm": "gm2"}],
        "model": {"hosts": 8, "cpu_cores": 2.0, "mem_mib": 4096, "attributes": [{"ssd": 1}, {}]},
        "lm_params": {"update_period_s": 0.5, "replicate_period_s": 0.2, "takeover_after_s": 1.0},
    }


@pytest.fixture
async def controller(tmp_path, mosquitto):
    cfg = ControllerConfig.from_dict(config(tmp_path, mosquitto))
    c = Controller(cfg)
    await c.start()
    # the CLI's view of the same cell: the config with the ports the servers bound
    toml = tmp_path / "controller.toml"
    d = config(tmp_path, mosquitto)
    d["agents"] = {n: c.book[n] for n in d["agents"]}
    toml.write_text(_toml(d))
    try:
        yield c, str(toml)
    finally:
        await c.stop()


def _toml(d: dict, prefix: str = "") -> str:
    out, tables = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and isinstance(v[0], dict) and k != "attributes":
            for item in v:
                out.append(f"\n[[{k}]]\n" + _toml(item))
        else:
            out.insert(0, f"{k} = {json.dumps(v) if not isinstance(v, list) or not v or not isinstance(v[0], dict) else _inline(v)}")
    for k, v in tables:
        out.append(f"\n[{k}]\n" + _toml(v))
    return "\n".join(out) + "\n"


def _inline(v: list) -> str:
    return "[" + ", ".join("{" + ", ".join(f"{a} = {json.dumps(b)}" for a, b in x.items()) + "}" for x in v) + "]"


async def cellctl(*args) -> subprocess.CompletedProcess:
    import asyncio
    p = await asyncio.create_subprocess_exec(*CELLCTL, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    out, err = await p.communicate()
    return subprocess.CompletedProcess(args, p.returncode, out.decode(), err.decode())


async def test_every_server_has_health_and_reflection(controller):
    c, _ = controller
    for name, service in (("gm1", "cellbed.v1.GlobalMaster"), ("lm1b", "cellbed.v1.LocalMaster")):
        async with grpc.aio.insecure_channel(c.book[name]) as ch:
            h = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert h.status == health_pb2.HealthCheckResponse.SERVING
            stream = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
            names = [s.name async for r in stream for s in r.list_services_response.service]
        assert service in names and "grpc.health.v1.Health" in names


async def test_cellctl_submit_returns_the_placement_and_allocation_time(controller):
    c, toml = controller
    r = await cellctl("submit", "--controller", toml, "--cpu", "0.5", "--mem", "256", "--constraint", "ssd=1",
                      "--user", "bob", "--json", "--wait-s", "20")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["state"] == "TASK_STATE_RUNNING" and st["gm"] == "gm2"
    host = st["placement"]["host"]
    assert int(host[1:]) % 2 == 1                       # m0001, m0003, ...: the hosts with ssd = 1
    a = st["allocation"]
    parts = a["framework_queue_ms"] + a["processing_ms"] + a["worker_queue_ms"] + a["communication_ms"]
    assert a["total_ms"] == pytest.approx(parts, abs=1e-6) and a["total_ms"] > 0
    assert a["total_ms"] == pytest.approx((a["start_unix_s"] - a["arrival_unix_s"]) * 1000, abs=0.01)
    text = await cellctl("submit", "--controller", toml, "--cpu", "0.5", "--mem", "256", "--user", "alice")
    assert text.returncode == 0 and "RUNNING on m" in text.stdout and "allocation time" in text.stdout, text


async def test_cellctl_bad_input_exits_with_the_status_and_the_numbers(controller):
    _, toml = controller
    r = await cellctl("submit", "--controller", toml, "--cpu", "0.5", "--mem", "256", "--constraint", "gpu=1",
                      "--user", "alice", "--gm", controller[0].book["gm1"])
    assert r.returncode == 2 and "INVALID_ARGUMENT" in r.stderr and "gpu" in r.stderr and "ssd" in r.stderr
    r = await cellctl("submit", "--controller", toml, "--cpu", "64", "--mem", "256", "--user", "alice")
    assert r.returncode == 2 and "INVALID_ARGUMENT" in r.stderr and "(0, 2]" in r.stderr, r.stderr
    r = await cellctl("submit", "--cpu", "1", "--mem", "256", "--user", "eve", "--gm", controller[0].book["gm1"])
    assert r.returncode == 2 and "NOT_FOUND" in r.stderr and "eve" in r.stderr, r.stderr


async def test_views_partitions_and_queues_with_updates_over_mqtt(controller):
    c, toml = controller
    for i in range(3):
        await cellctl("submit", "--controller", toml, "--cpu", "1", "--mem", "512", "--user", "alice", "--wait-s", "10")

    async def updated():   # periodic LM updates arrive over MQTT every 0.5 s
        return c.gms["gm2"].counters["states_received"] >= 4
    await wait_until(updated, 20, "gm2 to receive LM state updates over MQTT")
    v = json.loads((await cellctl("gm", "view", "--controller", toml, "--json")).stdout)
    assert [x["lm"] for x in v["lms"]] == ["lm1", "lm2"]
    assert all(0 <= x["staleness_s"] < 5 for x in v["lms"])
    assert {p["gm"] for x in v["lms"] for p in x["partitions"]} == {"gm1", "gm2"}
    parts = json.loads((await cellctl("lm", "partitions", "--controller", toml, "--json")).stdout)
    assert [p["instance"] for p in parts] == ["lm1a", "lm2a"] and parts[0]["role"] == "LM_ROLE_ACTIVE"
    used = sum(s["used"]["cpu_cores"] for p in parts for part in p["partitions"] for s in part["slices"])
    assert used == pytest.approx(3.0)
    q = {x["user"]: x for x in json.loads((await cellctl("queues", "--controller", toml, "--json")).stdout)}
    assert q["alice"]["placed"] == 3 and q["alice"]["share"] == 0.5 and q["bob"]["gm"] == "gm2"
    text = (await cellctl("queues", "--controller", toml)).stdout
    assert "alice" in text and "PREEMPT_ATTEMPTS" in text


async def test_the_standby_takes_over_and_gms_fail_over_to_it(controller):
    c, toml = controller
    r = await cellctl("submit", "--controller", toml, "--cpu", "1", "--mem", "512", "--user", "alice", "--json")
    before = json.loads(r.stdout)["placement"]
    standby = c.lms["lm1b"]
    for name, server, health, service in c.servers:
        if name == "lm1a":
            await server.stop(grace=0)                    # lm1a dies
    await c.lms["lm1a"].stop()

    async def took_over():
        return standby.role == ACTIVE
    await wait_until(took_over, 20, "lm1b to take over")
    placed = []
    for i in range(6):                                     # enough to need both LMs' hosts
        r = await cellctl("submit", "--controller", toml, "--cpu", "1", "--mem", "512", "--user", "alice", "--json",
                          "--wait-s", "20")
        placed.append(json.loads(r.stdout)["placement"])
    assert any(p["lm_instance"] == "lm1b" for p in placed), placed
    assert before["host"] in {c.lms["lm1b"].cluster.hosts[t.host] for t in standby.cluster.tasks.values()} \
        or before["lm"] == "lm2"
