"""Server reflection on every Cellbed server (issue 15): a client that speaks only
grpc.reflection.v1, with v1's own message types, lists the services and resolves a method's
request and response types from the descriptors the server sends; v1alpha still answers too."""
from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha_pb2

from cellbed.runtime import reflection, rpc
from cellbed.v1 import node_pb2_grpc as npbg

SERVICE = "cellbed.v1.NodeAgent"


def v1_messages():
    """v1's request/response classes, built from a private pool that holds only v1's file: the
    client does not borrow v1alpha's classes."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(reflection.v1_file_proto())
    req = message_factory.GetMessageClass(pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionRequest"))
    resp = message_factory.GetMessageClass(pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionResponse"))
    return req, resp


@pytest.fixture
async def server():
    srv, port, health = rpc.create_server("127.0.0.1:0", [(npbg.add_NodeAgentServicer_to_server,
                                                           npbg.NodeAgentServicer(), SERVICE)])
    await srv.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await srv.stop(grace=None)


async def ask(target: str, service: str, req_cls, resp_cls, requests: list) -> list:
    async with grpc.aio.insecure_channel(target) as ch:
        call = ch.stream_stream(f"/{service}/ServerReflectionInfo", request_serializer=req_cls.SerializeToString,
                                response_deserializer=resp_cls.FromString)(iter(requests), timeout=10)
        return [r async for r in call]


def resolve_method(file_protos: list[bytes], full_method: str):
    """Build the server's files into a fresh pool (dependencies first) and find the method."""
    pending = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in file_protos]
    pool = descriptor_pool.DescriptorPool()
    while pending:
        added = [f for f in pending if all(_has(pool, d) for d in f.dependency)]
        assert added, f"unresolvable dependencies: {[f.name for f in pending]}"
        for f in added:
            pool.Add(f)
            pending.remove(f)
    service, method = full_method.rsplit(".", 1)
    return pool.FindServiceByName(service).methods_by_name[method]


def _has(pool, name: str) -> bool:
    try:
        pool.FindFileByName(name)
        return True
    except KeyError:
        return False


async def test_v1_lists_services_and_resolves_a_method(server):
    req, resp = v1_messages()
    listed = await ask(server, reflection.V1_SERVICE, req, resp, [req(list_services="")])
    names = {s.name for s in listed[0].list_services_response.service}
    assert {SERVICE, "grpc.health.v1.Health", reflection.V1_SERVICE, reflection.V1ALPHA_SERVICE} <= names

    files = await ask(server, reflection.V1_SERVICE, req, resp, [req(file_containing_symbol=SERVICE)])
    fdr = files[0].file_descriptor_response
    assert fdr.file_descriptor_proto, files[0]
    # The file of the symbol may not carry its imports; ask for them by name until closed.
    protos = {descriptor_pb2.FileDescriptorProto.FromString(b).name: b for b in fdr.file_descriptor_proto}
    missing = True
    while missing:
        deps = {d for b in protos.values() for d in descriptor_pb2.FileDescriptorProto.FromString(b).dependency}
        missing = sorted(deps - set(protos))
        for name in missing:
            r = (await ask(server, reflection.V1_SERVICE, req, resp, [req(file_by_filename=name)]))[0]
            assert r.HasField("file_descriptor_response"), f"{name}: {r.error_response.error_message}"
            protos.update({descriptor_pb2.FileDescriptorProto.FromString(b).name: b
                           for b in r.file_descriptor_response.file_descriptor_proto})
    m = resolve_method(list(protos.values()), f"{SERVICE}.StartVm")
    assert (m.input_type.full_name, m.output_type.full_name) == ("cellbed.v1.StartVmRequest",
                                                                  "cellbed.v1.StartVmResponse")
    assert "spec" in m.input_type.fields_by_name


async def test_v1_resolves_the_reflection_service_itself(server):
    req, resp = v1_messages()
    r = (await ask(server, reflection.V1_SERVICE, req, resp, [req(file_containing_symbol=reflection.V1_SERVICE)]))[0]
    files = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in r.file_descriptor_response.file_descriptor_proto]
    assert reflection.V1_FILE in [f.name for f in files]
    assert resolve_method([f.SerializeToString() for f in files],
                          f"{reflection.V1_SERVICE}.ServerReflectionInfo").client_streaming


async def test_v1alpha_still_answers(server):
    listed = await ask(server, reflection.V1ALPHA_SERVICE, v1alpha_pb2.ServerReflectionRequest,
                       v1alpha_pb2.ServerReflectionResponse, [v1alpha_pb2.ServerReflectionRequest(list_services="")])
    assert SERVICE in {s.name for s in listed[0].list_services_response.service}


async def test_unknown_symbol_is_an_error_response_not_a_broken_stream(server):
    req, resp = v1_messages()
    out = await ask(server, reflection.V1_SERVICE, req, resp,
                    [req(file_containing_symbol="no.such.Symbol"), req(list_services="")])
    assert out[0].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert SERVICE in {s.name for s in out[1].list_services_response.service}
