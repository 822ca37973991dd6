"""gRPC server reflection under both names clients ask for: ``grpc.reflection.v1`` (what grpcurl,
Postman and current grpc_cli try first) and ``grpc.reflection.v1alpha`` (older clients).

grpcio-reflection ships only v1alpha. The v1 protocol is the same protocol: v1's
``reflection.proto`` is v1alpha's with the package renamed, so the messages are identical on the
wire. One servicer (grpcio-reflection's own) therefore answers both services; this module adds the
v1 service name to the server, and v1's file to the descriptor pool so that a client can resolve the
reflection service itself.
"""
from __future__ import annotations

from typing import Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection as v1alpha
from grpc_reflection.v1alpha import reflection_pb2 as rpb

V1ALPHA_SERVICE = v1alpha.SERVICE_NAME                   # grpc.reflection.v1alpha.ServerReflection
V1_PACKAGE = "grpc.reflection.v1"
V1_SERVICE = f"{V1_PACKAGE}.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
METHOD = "ServerReflectionInfo"


def v1_file_proto() -> descriptor_pb2.FileDescriptorProto:
    """v1's reflection.proto, derived from v1alpha's: same messages and field numbers, v1 package."""
    fdp = descriptor_pb2.FileDescriptorProto()
    rpb.DESCRIPTOR.CopyToProto(fdp)
    old = f".{rpb.DESCRIPTOR.package}."
    fdp.name, fdp.package = V1_FILE, V1_PACKAGE

    def renamed(type_name: str) -> str:
        return f".{V1_PACKAGE}.{type_name[len(old):]}" if type_name.startswith(old) else type_name

    def messages(msgs) -> None:
        for m in msgs:
            for f in m.field:
                if f.HasField("type_name"):
                    f.type_name = renamed(f.type_name)
            messages(m.nested_type)
    messages(fdp.message_type)
    for svc in fdp.service:
        for m in svc.method:
            m.input_type, m.output_type = renamed(m.input_type), renamed(m.output_type)
    return fdp


def _ensure_v1_file(pool: descriptor_pool.DescriptorPool) -> None:
    try:
        pool.FindFileByName(V1_FILE)
    except KeyError:
        pool.AddSerializedFile(v1_file_proto().SerializeToString())


def enable(server: grpc.aio.Server, service_names: Iterable[str]) -> list[str]:
    """Register reflection v1 and v1alpha on *server* for *service_names* (plus themselves).
    Returns every service name that reflection lists."""
    pool = descriptor_pool.Default()
    _ensure_v1_file(pool)
    names = sorted({*service_names, V1_SERVICE, V1ALPHA_SERVICE})
    servicer = v1alpha.aio.ReflectionServicer(names, pool=pool)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo, request_deserializer=rpb.ServerReflectionRequest.FromString,
        response_serializer=rpb.ServerReflectionResponse.SerializeToString)
    server.add_generic_rpc_handlers(tuple(grpc.method_handlers_generic_handler(svc, {METHOD: handler})
                                          for svc in (V1_SERVICE, V1ALPHA_SERVICE)))
    return names
