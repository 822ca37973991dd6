"""cellbed-node: the node daemon entry point."""
from __future__ import annotations

import logging
import os

from cellbed.runtime import rpc
from cellbed.daemon.agent import NodeAgent
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.domxml import GuestImage
from cellbed.daemon.servicer import NodeAgentServicer
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.rng import agent_rng
from cellbed.runtime.telemetry import MqttPublisher
from cellbed.v1 import masb_pb2, masb_pb2_grpc, node_pb2, node_pb2_grpc

log = logging.getLogger("cellbed.node")
SERVICE = node_pb2.DESCRIPTOR.services_by_name["NodeAgent"].full_name
SAN_SERVICE = masb_pb2.DESCRIPTOR.services_by_name["San"].full_name


def make_backend(cfg: NodeConfig, agent_ref: list):
    from cellbed.daemon.hv_libvirt import LibvirtBackend  # the only libvirt importer
    guest = os.path.abspath(cfg.guest_dir)
    return LibvirtBackend(cfg.libvirt_uri, accel=cfg.accel,
                          image=GuestImage(os.path.join(guest, "vmlinuz"), os.path.join(guest, "initrd.img")),
                          cpu_model=cfg.cpu_model or None, measure_dirty_rate=cfg.measure_dirty_rate,
                          on_lifecycle=lambda n, s, r: agent_ref[0].on_lifecycle(n, s, r) if agent_ref else None)


async def serve(cfg: NodeConfig) -> None:
    ref: list = []
    clock = RealClock()
    brokers = cfg.broker_targets()
    transport = GrpcTransport(lambda n: brokers.get(n) or ref[0].peers.get(n).target, clock,
                              mqtt_host=cfg.mqtt_host if brokers else "", mqtt_port=cfg.mqtt_port, name=cfg.host)
    agent = NodeAgent(cfg, make_backend(cfg, ref), clock=clock, transport=transport)
    ref.append(agent)
    san = None
    services = [(node_pb2_grpc.add_NodeAgentServicer_to_server, NodeAgentServicer(agent), SERVICE)]
    if brokers:   # MASB: this node negotiates (SAN) with the brokers and its peers
        from cellbed.daemon.san import SanAgent, SanConfig, SanServicer
        overrides = {k: v for k, v in cfg.san.items() if k != "seed"}
        if cfg.state_dir and "decision_log" not in overrides:   # sampled decision logs next to the history
            os.makedirs(cfg.state_dir, exist_ok=True)
            overrides["decision_log"] = os.path.join(cfg.state_dir, "san-decisions.jsonl")
        san = SanAgent(agent, transport, clock, agent_rng(int(cfg.san.get("seed", 0)), cfg.host),
                       SanConfig.from_mapping(overrides), list(brokers), cfg.cell)
        services.append((masb_pb2_grpc.add_SanServicer_to_server, SanServicer(san), SAN_SERVICE))
    if cfg.mqtt_host:
        agent.telemetry = MqttPublisher(cfg.mqtt_host, cfg.mqtt_port, f"cellbed/{cfg.cell}/node/{cfg.host}",
                                        agent.clock)
        agent.telemetry.start()
    names = [s[2] for s in services]
    server, port, health = rpc.create_server(f"{cfg.address}:{cfg.grpc_port}", services)
    await rpc.set_not_serving(health, names)   # until the inventory is rebuilt
    await server.start()
    await agent.start()
    if san is not None:
        san.start()
        san.publish_report()
    await rpc.set_serving(health, names)
    log.info("node %s serving NodeAgent on %s:%d", cfg.host, cfg.address, port)
    await rpc.wait_for_signal()
    log.info("node %s stopping", cfg.host)
    await server.stop(grace=2)
    if san is not None:
        await san.stop()
    if agent.telemetry:
        await agent.telemetry.stop()
    await agent.stop()


def main(argv: list[str] | None = None) -> None:
    rpc.daemon_main("cellbed-node", __doc__, serve, NodeConfig.load, argv)


if __name__ == "__main__":
    main()
