"""The authorisation table (cellbed/domain/identity.py): complete for every RPC of every
service, deny by default, and a refusal names the role that is needed."""
from __future__ import annotations

import pytest

from cellbed.domain.errors import InvalidArgument
from cellbed.domain.identity import POLICY, Identity, Role, authorize
from cellbed.v1 import masb_pb2, megha_pb2, node_pb2


def all_methods():
    for mod in (node_pb2, masb_pb2, megha_pb2):
        for svc in mod.DESCRIPTOR.services_by_name.values():
            for m in svc.methods:
                yield f"/{svc.full_name}/{m.name}"


def test_every_rpc_has_an_entry():
    missing = [m for m in all_methods() if m not in POLICY]
    assert missing == []


def ident(role, name="x", cell="c1"):
    return Identity(cell, role, name)


CASES = [
    # method, caller, allowed?, words in the reason
    ("/cellbed.v1.NodeAgent/InjectFault", ident(Role.NODE, "h1"), False, "needs role admin"),
    ("/cellbed.v1.NodeAgent/InjectFault", ident(Role.ADMIN), True, ""),
    ("/cellbed.v1.NodeAgent/StartVm", ident(Role.NODE, "h2"), False, "admin or broker or lm"),
    ("/cellbed.v1.NodeAgent/StartVm", ident(Role.BROKER, "ba1"), True, ""),
    ("/cellbed.v1.NodeAgent/MigrateVm", ident(Role.BROKER, "ba1"), False, "needs role admin"),
    ("/cellbed.v1.NodeAgent/StartVm", ident(Role.LM, "lm1a"), True, ""),
    ("/cellbed.v1.NodeAgent/PrepareIncoming", ident(Role.ADMIN), False, "needs role node"),
    ("/cellbed.v1.NodeAgent/PrepareIncoming", ident(Role.NODE, "h1"), True, ""),
    ("/cellbed.v1.San/ProcessTaskMigration", ident(Role.GM), False, "needs role node"),
    ("/cellbed.v1.BrokerAgent/SyncCache", ident(Role.BROKER, "ba2"), True, ""),
    ("/cellbed.v1.LocalMaster/Launch", ident(Role.LM), False, "needs role gm"),
    ("/cellbed.v1.GlobalMaster/GetView", ident(Role.NODE, "h1"), True, ""),
    ("/grpc.health.v1.Health/Check", ident(Role.BROKER), True, ""),
    ("/cellbed.v1.NodeAgent/ListVms", ident(Role.ADMIN, cell="c2"), False, "another cell"),
    ("/cellbed.v1.NodeAgent/ListVms", None, False, "no certificate"),
    ("/cellbed.v1.NodeAgent/NoSuch", ident(Role.ADMIN), False, "denied by default"),
]


@pytest.mark.parametrize("method,who,ok,words", CASES)
def test_authorize(method, who, ok, words):
    d = authorize(method, who, "c1")
    assert d.allowed is ok and words in d.reason


def test_identity_uri_round_trip_and_bad_uris():
    i = Identity("c1", Role.NODE, "h1")
    assert i.uri == "cellbed://c1/node/h1" and Identity.from_uri(i.uri) == i
    for bad in ("cellbed://c1/root/h1", "https://c1/node/h1", "cellbed://C1/node/h1", "cellbed://c1/node/"):
        with pytest.raises(InvalidArgument):
            Identity.from_uri(bad)
