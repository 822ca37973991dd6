"""The sync digest over real gRPC (issue 16): two broker agents behind grpc.aio servers on
loopback port 0, each with its own gRPC client. The digest crosses the wire as a fixed64 and is
compared in another agent's cache: equal caches answer in_sync; a report only the sender got is
carried by the full path."""
import numpy as np

from cellbed.assembly import broker_policies
from cellbed.broker.agent import BrokerAgent, BrokerServicer
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime import rpc
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.v1 import masb_pb2 as masbpb, masb_pb2_grpc as masbpbg
from tests.unit.test_sync_digest import HOSTS, report

SERVICE = masbpb.DESCRIPTOR.services_by_name["BrokerAgent"].full_name


async def test_equal_caches_answer_in_sync_over_grpc_and_a_missed_report_still_crosses():
    clock = RealClock()
    addresses: dict[str, str] = {}
    agents, servers, transports = {}, [], []
    try:
        for name, peer in (("ba1", "ba2"), ("ba2", "ba1")):
            t = GrpcTransport(addresses.__getitem__, clock, name=name)
            transports.append(t)
            agents[name] = a = BrokerAgent(name, t, clock, np.random.default_rng(1),
                                           broker_policies(PolicyBook(), BrokerParams()), params=BrokerParams(),
                                           peers=[peer], cell="c")
            server, port, _ = rpc.create_server("127.0.0.1:0", [
                (masbpbg.add_BrokerAgentServicer_to_server, BrokerServicer(a), SERVICE)])
            await server.start()
            servers.append(server)
            addresses[name] = f"127.0.0.1:{port}"
        a, b = agents["ba1"], agents["ba2"]
        now = clock.now()
        for i, h in enumerate(HOSTS):
            r = report(h, now - 100 + i)
            a.on_report("t", r)
            b.on_report("t", r)
        assert a.cache.digest == b.cache.digest != 0
        assert await a.sync_with("ba2") == 0
        assert a.counters["syncs_in_sync"] == 1 and b.counters["sync_served_in_sync"] == 1
        late = report("h04", now - 1)
        a.on_report("t", late)                              # ba2 missed it
        assert await a.sync_with("ba2") == 0
        assert a.counters["syncs_in_sync"] == 1, "unequal caches answered in_sync"
        assert b.cache.holds(late) and a.cache.digest == b.cache.digest
        assert await b.sync_with("ba1") == 0 and b.counters["syncs_in_sync"] == 1
    finally:
        for s in servers:
            await s.stop(None)
        for t in transports:
            await t.close()
