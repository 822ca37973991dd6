"""cellbed-node: the node daemon entry point."""
from __future__ import annotations

import asyncio
import logging
import os

from cellbed import assembly
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.domxml import GuestImage
from cellbed.daemon.hv_libvirt import LibvirtBackend
from cellbed.daemon.prom import NodeCollector
from cellbed.daemon.san import SanConfig
from cellbed.domain.topics import node_topic
from cellbed.runtime import prom, rpc
from cellbed.runtime.authz import mqtt_tls, security_from
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.explain import ExplainLog
from cellbed.runtime.peers import PeerDirectory
from cellbed.runtime.plugins import service as policy_service
from cellbed.runtime.plugins.config import ErrorLog
from cellbed.runtime.plugins.prom import PolicyCollector
from cellbed.runtime.telemetry import MqttPublisher
from cellbed.v1 import masb_pb2 as masbpb, masb_pb2_grpc as masbpbg, node_pb2 as npb, node_pb2_grpc as npbg

log = logging.getLogger("cellbed.node")
SERVICE = npb.DESCRIPTOR.services_by_name["NodeAgent"].full_name
SAN_SERVICE = masbpb.DESCRIPTOR.services_by_name["San"].full_name


def make_backend(cfg: NodeConfig, agent_ref: list) -> LibvirtBackend:
    guest = os.path.abspath(cfg.guest_dir)
    return LibvirtBackend(cfg.libvirt_uri, accel=cfg.accel,
                          image=GuestImage(os.path.join(guest, "vmlinuz"), os.path.join(guest, "initrd.img")),
                          cpu_model=cfg.cpu_model or None, measure_dirty_rate=cfg.measure_dirty_rate,
                          on_lifecycle=lambda n, s, r: agent_ref[0].on_lifecycle(n, s, r) if agent_ref else None)


def _san_config(cfg: NodeConfig) -> SanConfig:
    overrides = {k: v for k, v in cfg.san.items() if k != "seed"}
    if cfg.state_dir and "decision_log" not in overrides:   # sampled decision logs next to the history
        os.makedirs(cfg.state_dir, exist_ok=True)
        overrides["decision_log"] = os.path.join(cfg.state_dir, "san-decisions.jsonl")
    return SanConfig.from_mapping(overrides)


def _seed(cfg: NodeConfig) -> int:
    """The agents' seed: the configured one, made distinct for every start of this daemon (a count
    kept in its state folder), so that a restarted daemon never draws a SAN or migration id it drew
    before (two records with one id, found by cellctl chaos); still reproducible per start."""
    seed = int(cfg.san.get("seed", 0))
    if not cfg.state_dir:
        return seed
    os.makedirs(cfg.state_dir, exist_ok=True)
    path = os.path.join(cfg.state_dir, "starts")
    try:
        with open(path) as f:
            starts = int(f.read().strip() or 0) + 1
    except (FileNotFoundError, ValueError):
        starts = 1
    with open(path + ".tmp", "w") as f:
        f.write(f"{starts}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    return seed if starts == 1 else seed * 1_000_003 + starts


async def serve(cfg: NodeConfig) -> None:
    ref: list = []
    clock = RealClock()
    brokers = cfg.broker_targets()
    peers = PeerDirectory(cfg.peers_file)
    security = security_from(cfg.cell, cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.insecure, f"node {cfg.host}")
    transport = GrpcTransport(lambda n: brokers.get(n) or peers.get(n).target, clock,
                              mqtt_host=cfg.mqtt_host if brokers else "", mqtt_port=cfg.mqtt_port, name=cfg.host,
                              security=security)
    explain = ExplainLog(cfg.explain, os.path.join(cfg.state_dir, "decisions.jsonl") if cfg.state_dir else "")
    env = assembly.real_env(clock, lambda name: transport, seed=_seed(cfg),
                            backend_for=lambda c: make_backend(c, ref), policies=cfg.policy_book(), explain=explain)
    env.policies.env.on_error = ErrorLog(cfg.host)
    agent, servicer = assembly.build_node(env, cfg)
    ref.append(agent)
    san = None
    services = [(npbg.add_NodeAgentServicer_to_server, servicer, SERVICE),
                policy_service.service_entry(cfg.host, env.policies)]
    if brokers:   # MASB: this node negotiates (SAN) with the brokers and its peers
        san, san_servicer = assembly.build_san(env, agent, _san_config(cfg), list(brokers), cfg.cell)
        services.append((masbpbg.add_SanServicer_to_server, san_servicer, SAN_SERVICE))
    if cfg.mqtt_host:
        agent.telemetry = MqttPublisher(cfg.mqtt_host, cfg.mqtt_port, node_topic(cfg.cell, cfg.host), clock,
                                        tls_params=mqtt_tls(security))
        agent.telemetry.start()
    names = [s[2] for s in services]
    server, port, health = rpc.create_server(f"{cfg.address}:{cfg.grpc_port}", services, security=security)
    await rpc.set_not_serving(health, names)   # until the inventory is rebuilt
    await server.start()
    await agent.start()
    if san is not None:
        san.start()
        san.publish_report()
    exporter = None
    if cfg.metrics_port:   # on the host's address; HTTPS for cell certificates, unless the node is insecure
        exporter = prom.Exporter(cfg.address, cfg.metrics_port,
                                 [NodeCollector(agent, san, prom.OnLoop(asyncio.get_running_loop())),
                                  PolicyCollector(cfg.host, env.policies.env.stats)],
                                 tls=security.tls)
        exporter.start()
    await rpc.set_serving(health, names)
    log.info("node %s serving NodeAgent on %s:%d", cfg.host, cfg.address, port)
    await rpc.wait_for_signal()
    log.info("node %s stopping", cfg.host)
    if exporter is not None:
        exporter.stop()
    await server.stop(grace=2)
    if san is not None:
        await san.stop()
    if agent.telemetry:
        await agent.telemetry.stop()
    await agent.stop()
    explain.close()


def main(argv: list[str] | None = None) -> None:
    rpc.daemon_main("cellbed-node", __doc__, serve, NodeConfig.load, argv)


if __name__ == "__main__":
    main()
