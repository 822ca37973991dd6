"""cellbed-broker: a MASB Broker Agent over gRPC (+ MQTT for node reports)."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os

from cellbed import assembly
from cellbed.broker.prom import BrokerCollector
from cellbed.domain.config import check_keys, field_names, load_toml
from cellbed.domain.errors import check_range
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime import prom, rpc
from cellbed.runtime.authz import security_from
from cellbed.runtime.clock import RealClock
from cellbed.runtime.decisions import DecisionLog
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.runtime.peers import PeerDirectory
from cellbed.runtime.plugins import service as policy_service
from cellbed.runtime.plugins.config import ErrorLog, book_from_table
from cellbed.runtime.plugins.prom import PolicyCollector
from cellbed.v1 import masb_pb2 as masbpb, masb_pb2_grpc as masbpbg

log = logging.getLogger("cellbed.broker")
SERVICE = masbpb.DESCRIPTOR.services_by_name["BrokerAgent"].full_name


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    name: str = "ba1"
    address: str = "127.0.0.1"
    grpc_port: int = 50061                 # 0 = pick a free port
    metrics_port: int = 0                  # Prometheus /metrics on address:metrics_port; 0 = off
    cell: str = "cell"
    mqtt_host: str = ""                    # node reports arrive over MQTT; "" = gRPC reports only
    mqtt_port: int = 1883
    peers: str = ""                        # other brokers: "name=host:port,..."
    peers_file: str = ""                   # the cell's hosts (AllocateTask launches on them)
    sync_period_s: float = 30.0
    seed: int = 0
    decision_log: str = ""
    params: dict = dataclasses.field(default_factory=dict)   # BrokerParams overrides
    tls_ca: str = ""                       # the cell CA's certificate (mTLS for gRPC and MQTT)
    tls_cert: str = ""                     # this broker's certificate (cellbed://<cell>/broker/<name>)
    tls_key: str = ""
    insecure: bool = False                 # plaintext: only by explicit choice
    policy: dict = dataclasses.field(default_factory=dict)   # [policy]: the broker's stages (DESIGN §17)
    config_dir: str = dataclasses.field(default="", compare=False, metadata={"derived": True})
    """Where relative plugin files are taken from: the loaded file's folder."""

    @classmethod
    def load(cls, path: str) -> "BrokerConfig":
        data = load_toml(path)
        check_keys(data, [f.name for f in dataclasses.fields(cls) if not f.metadata.get("derived")], path)
        cfg = cls(**data, config_dir=os.path.dirname(os.path.abspath(path)))
        cfg.policy_book()
        check_range("grpc_port", cfg.grpc_port, 0, 65535)
        check_range("metrics_port", cfg.metrics_port, 0, 65535)
        check_range("sync_period_s", cfg.sync_period_s, 0.01, 86400, "s")
        cfg.broker_params()
        return cfg

    def broker_params(self) -> BrokerParams:
        check_keys(self.params, field_names(BrokerParams), "params")
        p = BrokerParams(**self.params)
        check_range("params.candidate_count", p.candidate_count, 1, 10_000)
        check_range("params.realloc_scan_limit", p.realloc_scan_limit, 1, 10_000_000)
        check_range("params.initial_scan_limit", p.initial_scan_limit, 1, 10_000_000)
        check_range("params.node_expiry_s", p.node_expiry_s, 0.01, 86400 * 30, "s")
        return p

    def policy_book(self):
        """The broker's policies, each chosen plugin loaded and checked (a real agent isolates errors)."""
        return book_from_table(self.policy, self.config_dir, "isolate")

    def peer_targets(self) -> dict[str, str]:
        return dict(item.partition("=")[::2] for item in filter(None, self.peers.split(",")))


async def serve(cfg: BrokerConfig) -> None:
    clock = RealClock()
    peers = cfg.peer_targets()
    hosts = PeerDirectory(cfg.peers_file)
    security = security_from(cfg.cell, cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.insecure, f"broker {cfg.name}")
    transport = GrpcTransport(lambda n: peers.get(n) or hosts.get(n).target, clock, cfg.mqtt_host, cfg.mqtt_port,
                              name=cfg.name, security=security)
    env = assembly.real_env(clock, lambda name: transport, seed=cfg.seed, policies=cfg.policy_book())
    env.policies.env.on_error = ErrorLog(cfg.name)
    agent, servicer = assembly.build_broker(env, cfg.name, params=cfg.broker_params(), peers=list(peers),
                                            cell=cfg.cell, sync_period_s=cfg.sync_period_s,
                                            decisions=DecisionLog(cfg.decision_log, clock=clock, who=cfg.name))
    server, port, health = rpc.create_server(f"{cfg.address}:{cfg.grpc_port}", [
        (masbpbg.add_BrokerAgentServicer_to_server, servicer, SERVICE),
        policy_service.service_entry(cfg.name, env.policies)], security=security)
    await server.start()
    await agent.start(subscribe=bool(cfg.mqtt_host))
    exporter = None
    if cfg.metrics_port:   # on the broker's address; HTTPS for cell certificates, unless the broker is insecure
        exporter = prom.Exporter(cfg.address, cfg.metrics_port,
                                 [BrokerCollector(agent, prom.OnLoop(asyncio.get_running_loop())),
                                  PolicyCollector(cfg.name, env.policies.env.stats)], tls=security.tls)
        exporter.start()
    await rpc.set_serving(health, [SERVICE, policy_service.SERVICE])
    log.info("broker %s serving on %s:%d", cfg.name, cfg.address, port)
    await rpc.wait_for_signal()
    if exporter is not None:
        exporter.stop()
    await server.stop(grace=2)
    await agent.stop()
    await transport.close()


def main(argv: list[str] | None = None) -> None:
    rpc.daemon_main("cellbed-broker", __doc__, serve, BrokerConfig.load, argv)


if __name__ == "__main__":
    main()
