"""mTLS and authorisation by role on a real gRPC server (port 0) with the cell's CA (issue 13):
no certificate, or one from another CA, is refused at the handshake; a node certificate gets
PERMISSION_DENIED naming the role for InjectFault and StartVm, and an admin passes (the base
servicer then answers UNIMPLEMENTED, which proves the call got through); reads are open to every
identity of the cell; peer-to-peer admission is for nodes only."""
from __future__ import annotations

import os
import stat

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.domain.identity import Identity, Role
from cellbed.runtime import rpc
from cellbed.runtime.authz import Security
from cellbed.runtime.pki import CellCA, identity_of
from cellbed.v1 import node_pb2 as npb, node_pb2_grpc as npbg

SERVICE = "cellbed.v1.NodeAgent"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = CellCA.create(d / "ca", "c1")
    other = CellCA.create(d / "other", "c1")   # same cell name, another CA: must not be trusted
    files = {r: ca.issue(Identity("c1", r, n), ["127.0.0.1"])
             for r, n in ((Role.NODE, "h1"), (Role.ADMIN, "admin"), (Role.LM, "lm1a"), (Role.BROKER, "ba1"))}
    files["foreign-admin"] = other.issue(Identity("c1", Role.ADMIN, "admin"), ["127.0.0.1"])
    files["other-cell-admin"] = CellCA.create(d / "c2", "c2").issue(Identity("c2", Role.ADMIN, "admin"), ["127.0.0.1"])
    return ca, files


@pytest.fixture
async def server(pki):
    ca, files = pki
    srv, port, health = rpc.create_server("127.0.0.1:0", [(npbg.add_NodeAgentServicer_to_server,
                                                           npbg.NodeAgentServicer(), SERVICE)],
                                          security=Security.mtls("c1", files[Role.NODE]))
    await srv.start()
    await rpc.set_serving(health, [SERVICE])
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await srv.stop(grace=None)


async def call(target, security, method, req, resp_cls):
    async with security.channel(target) as ch:
        fn = ch.unary_unary(f"/{SERVICE}/{method}", request_serializer=req.SerializeToString,
                            response_deserializer=resp_cls.FromString)
        try:
            await fn(req, timeout=10)
            return grpc.StatusCode.OK, ""
        except grpc.aio.AioRpcError as e:
            return e.code(), e.details()


def test_keys_are_private_and_identity_is_in_the_certificate(pki):
    ca, files = pki
    f = files[Role.NODE]
    assert stat.S_IMODE(os.stat(f.key).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(ca.folder, "ca.key")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(ca.folder).st_mode) == 0o700
    assert identity_of(open(f.cert, "rb").read()) == Identity("c1", Role.NODE, "h1")


async def test_no_certificate_is_refused(server):
    code, _ = await call(server, Security.insecure("c1"), "ListVms", npb.ListVmsRequest(), npb.ListVmsResponse)
    assert code == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("who", ["foreign-admin"])
async def test_certificate_of_another_ca_is_refused(server, pki, who):
    code, _ = await call(server, Security.mtls("c1", pki[1][who]), "ListVms", npb.ListVmsRequest(),
                         npb.ListVmsResponse)
    assert code == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("method,req,resp,role,want", [
    ("InjectFault", npb.InjectFaultRequest(), npb.InjectFaultResponse, Role.NODE, "PERMISSION_DENIED"),
    ("StartVm", npb.StartVmRequest(), npb.StartVmResponse, Role.NODE, "PERMISSION_DENIED"),
    ("MigrateVm", npb.MigrateVmRequest(), npb.MigrateVmResponse, Role.BROKER, "PERMISSION_DENIED"),
    ("PrepareIncoming", npb.PrepareIncomingRequest(), npb.PrepareIncomingResponse, Role.ADMIN, "PERMISSION_DENIED"),
    ("InjectFault", npb.InjectFaultRequest(), npb.InjectFaultResponse, Role.ADMIN, "UNIMPLEMENTED"),
    ("StartVm", npb.StartVmRequest(), npb.StartVmResponse, Role.LM, "UNIMPLEMENTED"),
    ("PrepareIncoming", npb.PrepareIncomingRequest(), npb.PrepareIncomingResponse, Role.NODE, "UNIMPLEMENTED"),
    ("ListVms", npb.ListVmsRequest(), npb.ListVmsResponse, Role.BROKER, "UNIMPLEMENTED"),
])
async def test_authorisation_by_role(server, pki, method, req, resp, role, want):
    code, details = await call(server, Security.mtls("c1", pki[1][role]), method, req, resp)
    assert code.name == want, details
    if want == "PERMISSION_DENIED":
        assert "needs role" in details and role.value in details


async def test_a_refusal_does_not_break_a_later_good_call(server, pki):
    node = Security.mtls("c1", pki[1][Role.NODE])
    assert (await call(server, node, "StartVm", npb.StartVmRequest(), npb.StartVmResponse))[0] == \
        grpc.StatusCode.PERMISSION_DENIED
    assert (await call(server, node, "ListVms", npb.ListVmsRequest(), npb.ListVmsResponse))[0] == \
        grpc.StatusCode.UNIMPLEMENTED


async def test_health_is_available_to_authenticated_clients_only(server, pki):
    async with Security.mtls("c1", pki[1][Role.ADMIN]).channel(server) as ch:
        r = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=10)
        assert r.status == health_pb2.HealthCheckResponse.SERVING
        insecure = health_pb2.HealthCheckRequest(service="cellbed.insecure")
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await health_pb2_grpc.HealthStub(ch).Check(insecure, timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND        # not registered: this server is secure


async def test_plaintext_only_by_choice_and_then_loud(caplog):
    srv, port, health = rpc.create_server("127.0.0.1:0", [(npbg.add_NodeAgentServicer_to_server,
                                                           npbg.NodeAgentServicer(), SERVICE)],
                                          security=Security.insecure("c1"))
    await srv.start()
    await rpc.set_serving(health, [SERVICE])
    try:
        assert any("PLAINTEXT" in r.message for r in caplog.records)
        async with Security.insecure("c1").channel(f"127.0.0.1:{port}") as ch:
            r = await health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service="cellbed.insecure"), timeout=10)
            assert r.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await srv.stop(grace=None)


@pytest.mark.parametrize("secure", [True, False])
async def test_undecodable_request_is_invalid_argument_not_unknown(pki, secure):
    ca, files = pki
    srv_sec = Security.mtls("c1", files[Role.NODE]) if secure else Security.insecure("c1")
    srv, port, health = rpc.create_server("127.0.0.1:0", [(npbg.add_NodeAgentServicer_to_server,
                                                           npbg.NodeAgentServicer(), SERVICE)], security=srv_sec)
    await srv.start()
    cli = Security.mtls("c1", files[Role.ADMIN]) if secure else Security.insecure("c1")
    try:
        async with cli.channel(f"127.0.0.1:{port}") as ch:
            raw = ch.unary_unary(f"/{SERVICE}/ListVms", request_serializer=lambda b: b,
                                 response_deserializer=lambda b: b)
            # a truncated varint; invalid UTF-8 in StopVmRequest.name (a string field)
            for method, garbage in (("ListVms", b"\xff\xff\xff"), ("StopVm", b"\x0a\x04\xc3\x28\xc3\x28")):
                call = ch.unary_unary(f"/{SERVICE}/{method}", request_serializer=lambda b: b,
                                      response_deserializer=lambda b: b)
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await call(garbage, timeout=10)
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
                assert f"{method}Request" in e.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as e:      # a good request still reaches the servicer
                await raw(npb.ListVmsRequest().SerializeToString(), timeout=10)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await srv.stop(grace=None)
