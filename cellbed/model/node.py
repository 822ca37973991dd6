"""A model host: the unchanged NodeAgent (and its servicer) on the model backend, reachable
through an InProcNetwork. The model cell and the Megha/MASB model experiments build hosts
with :func:`model_host`."""
from __future__ import annotations

import dataclasses

from cellbed.daemon.agent import NodeAgent
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.servicer import NodeAgentServicer
from cellbed.daemon.hv_model import ModelFabric
from cellbed.runtime.transport import InProcNetwork


@dataclasses.dataclass
class ModelHost:
    name: str
    agent: NodeAgent
    servicer: NodeAgentServicer


def model_config(host: str, cpu_cores: float, mem_mib: int, attributes: dict | None = None,
                 monitor_period_s: float = 60.0, admission: str = "used", **kw) -> NodeConfig:
    return NodeConfig(host=host, address="", grpc_port=0, migration_uri_template="model://{host}",
                      cpu_cores=cpu_cores, mem_mib=mem_mib, accel="tcg", state_dir="", peers_file="",
                      monitor_period_s=monitor_period_s, boot_timeout_s=60, verify_timeout_s=10,
                      measure_dirty_rate=False, measure_daemon=False, poll_guests=False,
                      admission=admission, attributes=dict(attributes or {}), **kw).validate()


async def model_host(net: InProcNetwork, fabric: ModelFabric, cfg: NodeConfig, start: bool = True) -> ModelHost:
    """Build host *cfg.host*: its model backend, NodeAgent and NodeAgent service on *net*."""
    agent = NodeAgent(cfg, fabric.backend(cfg.host), clock=fabric.clock, transport=net.transport(cfg.host))
    servicer = NodeAgentServicer(agent)
    net.serve(cfg.host, "NodeAgent", servicer)
    if start:
        await agent.start()
    return ModelHost(cfg.host, agent, servicer)
