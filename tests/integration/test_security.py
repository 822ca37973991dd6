"""Secure by default, on a real cell (issue 13, acceptance 1 and 2): a cell brought up with no
security flag has a CA; every gRPC server (node daemons, broker, GM, LM), mosquitto and libvirtd
refuse a client without a certificate and one whose certificate comes from another CA; inside each
host's namespace nothing listens in plaintext for commands; a node's certificate cannot call
InjectFault or StartVm (PERMISSION_DENIED naming the role); and an MQTT client with h2's
identity cannot publish h1's report (the broker never sees it)."""
from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess

import aiomqtt
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.cell import cell as cellmod, cell_pki
from cellbed.cell.mqtt_conf import MQTT_PLAIN_PORT, MQTT_TLS_PORT
from cellbed.domain.identity import Identity, Role
from cellbed.domain.topics import report_topic
from cellbed.runtime.authz import Security, mqtt_tls
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.clock import RealClock
from cellbed.runtime.pki import CellCA
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb, node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

CELL, SUBNET = "sec", "10.231.17.0/24"


@pytest.fixture(scope="module")
def sec_cell(state_root, tmp_path_factory):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[0.5], host_mem_mib=[512], root=state_root,
                    monitor_period_s=2.0, san={}, megha={"gms": 1, "lms": 1, "standby": False})
    # A second CA that knows the same names: its certificates must be worthless here.
    rogue = CellCA.create(tmp_path_factory.mktemp("rogue"), CELL)
    try:
        yield st, rogue
    finally:
        cellmod.down(CELL, state_root)


def grpc_targets(st) -> dict[str, tuple[str, str]]:
    out = {h: (f"{d['address']}:{d['grpc_port']}", "cellbed.v1.NodeAgent") for h, d in st["hosts"].items()}
    out["broker"] = (st["broker"], "cellbed.v1.BrokerAgent")
    out.update({g: (a, "cellbed.v1.GlobalMaster") for g, a in st["megha"]["gms"].items()})
    out.update({i: (a, "cellbed.v1.LocalMaster") for i, a in st["megha"]["lms"].items()})
    return out


async def health(security: Security, target: str, service: str):
    async with security.channel(target) as ch:
        try:
            r = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            return r.status
        except grpc.aio.AioRpcError as e:
            return e.code()


async def test_every_grpc_server_refuses_no_certificate_and_another_ca(sec_cell):
    st, rogue = sec_cell
    rogue_admin = Security.mtls(CELL, rogue.issue(Identity(CELL, Role.ADMIN, "admin")))
    assert len(grpc_targets(st)) == 5
    for name, (target, service) in grpc_targets(st).items():
        assert await health(cell_pki.admin(st), target, service) == health_pb2.HealthCheckResponse.SERVING, name
        assert await health(Security.insecure(CELL), target, service) == grpc.StatusCode.UNAVAILABLE, name
        assert await health(rogue_admin, target, service) == grpc.StatusCode.UNAVAILABLE, name


async def test_a_node_certificate_cannot_inject_faults_or_start_vms(sec_cell):
    st, _ = sec_cell
    as_h1 = cell_pki.security(st, Role.NODE, "h1")
    h2 = f"{st['hosts']['h2']['address']}:{st['hosts']['h2']['grpc_port']}"
    async with as_h1.channel(h2) as ch:
        for method, req, resp in (("InjectFault", npb.InjectFaultRequest(name="x"), npb.InjectFaultResponse),
                                  ("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name="x")), npb.StartVmResponse)):
            call = ch.unary_unary(f"/cellbed.v1.NodeAgent/{method}", request_serializer=req.SerializeToString,
                                  response_deserializer=resp.FromString)
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call(req, timeout=10)
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "needs role admin" in e.value.details()
        # reads stay open to every identity of the cell
        r = await ch.unary_unary("/cellbed.v1.NodeAgent/ListVms", request_serializer=npb.ListVmsRequest.SerializeToString,
                                 response_deserializer=npb.ListVmsResponse.FromString)(npb.ListVmsRequest(), timeout=10)
        assert r is not None


async def mqtt_refused(host: str, port: int, tls) -> bool:
    try:
        async with aiomqtt.Client(host, port, timeout=5, tls_params=tls):
            return False
    except (aiomqtt.MqttError, ssl.SSLError, OSError):
        return True


async def test_mosquitto_refuses_anonymous_plaintext_and_another_ca(sec_cell):
    st, rogue = sec_cell
    host = st["bridge_address"]
    assert await mqtt_refused(host, MQTT_PLAIN_PORT, None)          # nothing listens in plaintext
    assert await mqtt_refused(host, MQTT_TLS_PORT, None)            # TLS port: no TLS, no entry
    rogue_files = rogue.issue(Identity(CELL, Role.NODE, "h1"), [st["hosts"]["h1"]["address"]])
    assert await mqtt_refused(host, MQTT_TLS_PORT, mqtt_tls(Security.mtls(CELL, rogue_files)))
    assert not await mqtt_refused(host, MQTT_TLS_PORT, mqtt_tls(cell_pki.admin(st)))


async def test_h2_cannot_publish_h1s_report(sec_cell):
    st, _ = sec_cell
    host = st["bridge_address"]
    forged = masbpb.NodeReport(host="h1", capacity=cpb.Resources(cpu_cores=999.0, mem_mib=999.0), task_count=999)
    marker = masbpb.NodeReport(host="h2", capacity=cpb.Resources(cpu_cores=0.5, mem_mib=512.0), task_count=4242)
    seen: list[str] = []
    async with aiomqtt.Client(host, MQTT_TLS_PORT, timeout=10, tls_params=mqtt_tls(cell_pki.admin(st))) as watcher:
        await watcher.subscribe(report_topic(CELL, "+"))

        async def watch():
            async for m in watcher.messages:
                r = masbpb.NodeReport.FromString(m.payload)
                seen.append(f"{m.topic}:{r.task_count}:{r.capacity.cpu_cores}")
        task = asyncio.ensure_future(watch())
        try:
            h2 = mqtt_tls(cell_pki.security(st, Role.NODE, "h2"))
            async with aiomqtt.Client(host, MQTT_TLS_PORT, timeout=10, tls_params=h2) as c:
                await c.publish(report_topic(CELL, "h1"), forged.SerializeToString(), qos=1)
                await c.publish(report_topic(CELL, "h2"), marker.SerializeToString(), qos=1)
            # The marker went after the forgery on the same connection: once it is seen, the
            # forgery would have been seen before it.
            async def marker_seen():
                return any(":4242:" in s and s.split(":")[0].endswith("/h2") for s in seen)
            await wait_until(marker_seen, 30, "the marker report on h2's own topic")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert not any(":999:" in s for s in seen), seen
    t = GrpcTransport(lambda n: n, RealClock(), security=cell_pki.admin(st))
    try:
        cache = await t.request(st["broker"], "BrokerAgent/ListCache", masbpb.ListCacheRequest(), timeout=10)
    finally:
        await t.close()
    assert all(e.report.capacity.cpu_cores != 999.0 for e in cache.entries)


def listeners(netns: str) -> list[tuple[str, int, str]]:
    out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltnp"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        addr, port = parts[3].rsplit(":", 1)
        rows.append((addr, int(port), parts[-1] if "users:" in parts[-1] else ""))
    return rows


def test_no_plaintext_command_listener_in_any_host(sec_cell):
    st, _ = sec_cell
    for h, d in st["hosts"].items():
        ports = {p for _, p, _ in listeners(d["netns"])}
        assert 16509 not in ports, f"{h}: libvirtd listens on plain TCP 16509: {sorted(ports)}"
        assert d["grpc_port"] in ports and 16514 in ports, f"{h}: {sorted(ports)}"
        # Every listener is one the cell knows: gRPC (mTLS), libvirt TLS, QEMU's migration range
        # (TLS, per migration), the read-only metrics, ssh when asked.
        known = {d["grpc_port"], 16514, 9464, 22} | set(range(49152, 49216))
        assert ports <= known, f"{h}: unexpected listeners {sorted(ports - known)}"
    print(json.dumps({h: sorted({p for _, p, _ in listeners(d['netns'])}) for h, d in st["hosts"].items()}))


def test_libvirtd_refuses_a_client_without_a_certificate(sec_cell):
    st, _ = sec_cell
    a = st["hosts"]["h1"]["address"]
    empty = os.path.join(st["pki"]["dir"], "..", "no-client-pki")
    os.makedirs(empty, exist_ok=True)
    r = subprocess.run(["virsh", "-c", f"qemu+tls://{a}/system?pkipath={empty}", "list"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    r = subprocess.run(["virsh", "-c", f"qemu+tcp://{a}/system", "list"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
