"""The one place that builds agents (issue 11): node, SAN, broker, GM, LM and the sampling
baseline, each from an :class:`Env`. The three entry points (``daemon/main.py``,
``broker/main.py``, ``controller/main.py``), the model cell and the experiment drivers call
these functions and never an agent's constructor.

A real cell and a model cell differ only in their Env:

=================  =====================================  ========================================
                   real cell (:func:`real_env`)            model cell (:func:`model_env`)
=================  =====================================  ========================================
clock              RealClock (charges nothing)            VirtualClock (+ processing-cost model)
transport          GrpcTransport per agent (gRPC + MQTT)  InProcNetwork (seeded latency, pub/sub)
RNG                one stream per agent from (seed, name)  the same
hypervisor         LibvirtBackend (real VMs)              ModelFabric backends (pre-copy cost model)
=================  =====================================  ========================================

Nothing here has a default that quietly builds a real network part: a real Env is asked for
by name. The RNG has one form: an agent receives a ready generator derived from the run seed
and its own name (``random.Random`` for the protocol agents, a numpy Generator where the
agent draws vectors), never a bare seed.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable

import numpy as np

from cellbed.broker.agent import BrokerAgent, BrokerServicer
from cellbed.broker.policies import BrokerPolicies
from cellbed.controller.megha.gm import GlobalMaster
from cellbed.controller.megha.gm_servicer import GlobalMasterServicer
from cellbed.controller.megha.policies import GmPolicies
from cellbed.controller.megha.lm import LocalMaster
from cellbed.controller.megha.lm_servicer import LocalMasterServicer
from cellbed.controller.megha.sampling import (LocalTransport, SamplingScheduler, SamplingSchedulerServicer,
                                               SamplingWorker, SamplingWorkerServicer)
from cellbed.daemon.admission import staged as staged_admission
from cellbed.daemon.agent import NodeAgent
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.hv_model import ModelFabric
from cellbed.daemon.san import SanAgent, SanConfig, SanPolicies, SanServicer, san_policies
from cellbed.daemon.servicer import NodeAgentServicer
from cellbed.domain.overhead import GuestOverhead
from cellbed.domain.vm import Hypervisor
from cellbed.policy.migration.cost import PrecopyParams
from cellbed.runtime.clock import Clock, CostFn, RealClock, VirtualClock
from cellbed.runtime.decisions import DecisionLog
from cellbed.runtime.explain import OFF, ExplainLog
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.rng import agent_rng
from cellbed.runtime.transport import InProcNetwork, Transport

__all__ = ["Env", "ModelHost", "build_broker", "build_gm", "build_lm", "build_node", "build_san",
           "build_sampling_scheduler", "build_sampling_worker", "model_config", "model_env", "model_host",
           "real_env"]


@dataclasses.dataclass
class Env:
    """What an agent is built from. *transport_for* gives each agent its own endpoint;
    *backend_for* gives each node its hypervisor; *serve* registers a servicer on the in-process
    network (model cells; None on a real cell, where the entry point owns the gRPC server)."""

    clock: Clock
    transport_for: Callable[[str], Transport]
    seed: int = 0
    backend_for: Callable[[NodeConfig], Hypervisor] | None = None
    serve: Callable[[str, str, object], None] | None = None
    net: InProcNetwork | None = None
    fabric: ModelFabric | None = None
    policies: PolicyBook = dataclasses.field(default_factory=PolicyBook)
    explain: ExplainLog = OFF           # where sampled decisions are explained (decisions.jsonl)

    def rng(self, name: str) -> random.Random:
        """The agent's own stream: the same (seed, name) gives the same draws on any cell."""
        return agent_rng(self.seed, name)

    def np_rng(self, *key: int) -> np.random.Generator:
        """A numpy stream from the run seed and *key* (agents that draw vectors)."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, *key]))

    def register(self, name: str, service: str, servicer: object) -> None:
        if self.serve is not None:
            self.serve(name, service, servicer)


def real_env(clock: RealClock, transport_for: Callable[[str], Transport], seed: int = 0,
             backend_for: Callable[[NodeConfig], Hypervisor] | None = None,
             policies: PolicyBook | None = None, explain: ExplainLog = OFF) -> Env:
    """A real cell's Env: the entry point passes the wall clock, its gRPC/MQTT transports, the
    libvirt backend factory, the policy book of its configuration's ``[policy]`` table and where
    its explanations go."""
    return Env(clock=clock, transport_for=transport_for, seed=seed, backend_for=backend_for,
               policies=policies if policies is not None else PolicyBook(), explain=explain)


def model_env(seed: int, latency_s: float = 0.0, jitter_s: float = 0.0, *, cost: CostFn | None = None,
              migration_cost: PrecopyParams = PrecopyParams(), migration_failure_prob: float = 0.0,
              clock: Clock | None = None, guest: GuestOverhead | None = None,
              policies: PolicyBook | None = None, explain: ExplainLog = OFF) -> Env:
    """A model cell's Env: virtual time (with *cost*, the processing-cost model, charged by the
    clock), an in-process network with seeded latency, and model backends sharing one fabric.
    Build it inside the virtual-time loop that will run the cell. *clock* replaces the virtual
    clock (``cellbed-controller`` with a ``[model]`` table: model hosts on the wall clock)."""
    if clock is None:
        clock = VirtualClock(cost=cost)
    net = InProcNetwork(clock, latency_s, jitter_s, seed=seed)
    fabric = ModelFabric(clock, migration_cost, migration_failure_prob, seed=seed, guest=guest or GuestOverhead())
    return Env(clock=clock, transport_for=net.transport, seed=seed,
               backend_for=lambda cfg: fabric.backend(cfg.host, cfg.cpu_cores), serve=net.serve, net=net, fabric=fabric,
               policies=policies if policies is not None else PolicyBook(), explain=explain)


# --- the node daemon -------------------------------------------------------------------------------

def build_node(env: Env, cfg: NodeConfig, transport: Transport | None = None,
               backend: Hypervisor | None = None) -> tuple[NodeAgent, NodeAgentServicer]:
    """A NodeAgent and its servicer (registered on the in-process network of a model cell). Its
    admission rule is the policy ``cfg.admission`` names (daemon/admission.py)."""
    if backend is None:
        if env.backend_for is None:
            raise ValueError("build_node: this Env has no hypervisor backend")
        backend = env.backend_for(cfg)
    agent = NodeAgent(cfg, backend, env.clock, transport if transport is not None else env.transport_for(cfg.host),
                      admit=staged_admission(env.policies.get("admission", cfg.admission)))
    servicer = NodeAgentServicer(agent)
    env.register(cfg.host, "NodeAgent", servicer)
    return agent, servicer


def build_san(env: Env, node: NodeAgent, cfg: SanConfig, brokers: list[str], cell: str, *,
              transport: Transport | None = None, rng: random.Random | None = None,
              policies: SanPolicies | None = None,
              on_migration: Callable | None = None, on_refused: Callable | None = None
              ) -> tuple[SanAgent, SanServicer]:
    """The node's SAN agent (MASB) and its servicer. *policies*: the SAN's policies (overload,
    SCS, target order, accept rule), by default those *cfg* names (:func:`san_policies`).
    *on_migration* / *on_refused* are the hooks a model cell records migrations with."""
    name = node.cfg.host
    if policies is None:
        policies = san_policies(cfg, env.policies)
    san = SanAgent(node, transport if transport is not None else env.transport_for(name), env.clock,
                   rng if rng is not None else env.rng(name), cfg, policies, brokers, cell,
                   on_migration=on_migration, on_refused=on_refused, explain=env.explain)
    servicer = SanServicer(san)
    env.register(name, "San", servicer)
    return san, servicer


@dataclasses.dataclass
class ModelHost:
    name: str
    agent: NodeAgent
    servicer: NodeAgentServicer


def model_config(host: str, cpu_cores: float, mem_mib: int, attributes: dict | None = None,
                 monitor_period_s: float = 60.0, admission: str = "used", boot_timeout_s: float = 60.0,
                 **kw) -> NodeConfig:
    """A model host's NodeConfig: no address, no state folder, no guest to poll."""
    return NodeConfig(host=host, address="", grpc_port=0, migration_uri_template="model://{host}",
                      cpu_cores=cpu_cores, mem_mib=mem_mib, accel="tcg", state_dir="", peers_file="",
                      monitor_period_s=monitor_period_s, boot_timeout_s=boot_timeout_s, verify_timeout_s=10,
                      measure_dirty_rate=False, measure_daemon=False, poll_guests=False,
                      admission=admission, attributes=dict(attributes or {}), **kw).validate()


async def model_host(env: Env, cfg: NodeConfig, start: bool = True) -> ModelHost:
    """Host *cfg.host* of a model cell: its model backend, NodeAgent and NodeAgent service."""
    agent, servicer = build_node(env, cfg)
    if start:
        await agent.start()
    return ModelHost(cfg.host, agent, servicer)


# --- MASB broker ---------------------------------------------------------------------------------------

def broker_policies(book: PolicyBook, params) -> BrokerPolicies:
    """The broker's stages: the scores its parameters name (or the chosen plugins), and the
    candidates and forced-candidate policies with its candidate count."""
    count = {"count": params.candidate_count}
    return BrokerPolicies(book.get("realloc_score", params.realloc_score), book.get("initial_score", params.initial_score),
                          book.get("candidates", defaults=count), book.get("forced", defaults=count))


def build_broker(env: Env, name: str, *, params, peers: list[str], cell: str, sync_period_s: float = 30.0,
                 decisions: DecisionLog | None = None, transport: Transport | None = None
                 ) -> tuple[BrokerAgent, BrokerServicer]:
    agent = BrokerAgent(name, transport if transport is not None else env.transport_for(name), env.clock,
                        env.np_rng(*name.encode()), broker_policies(env.policies, params), params=params,
                        peers=peers, cell=cell,
                        sync_period_s=sync_period_s, decisions=decisions)
    servicer = BrokerServicer(agent)
    env.register(name, "BrokerAgent", servicer)
    return agent, servicer


# --- Megha ----------------------------------------------------------------------------------------------

def build_lm(env: Env, lm: str, instance: str, *, hosts: list[str], gms: list[str], standby: bool, peer: str,
             cell: str, params, transport: Transport | None = None) -> tuple[LocalMaster, LocalMasterServicer]:
    agent = LocalMaster(lm, instance, transport if transport is not None else env.transport_for(instance),
                        env.clock, hosts=hosts, gms=gms, standby=standby, peer=peer, cell=cell, params=params,
                        validation=env.policies.get("validation"))
    servicer = LocalMasterServicer(agent)
    env.register(instance, "LocalMaster", servicer)
    return agent, servicer


def build_gm(env: Env, name: str, *, lms, queues, store, cell: str, params, known_attributes=(),
             frontend: str = "megha", transport: Transport | None = None
             ) -> tuple[GlobalMaster, GlobalMasterServicer]:
    book = env.policies
    agent = GlobalMaster(name, transport if transport is not None else env.transport_for(name), env.clock, lms=lms,
                         queues=queues, store=store, cell=cell, params=params, known_attributes=known_attributes,
                         frontend=frontend, rng=env.rng(name), explain=env.explain,
                         policies=GmPolicies(book.get("allocation"), book.get("task_order"), book.get("preemption")))
    servicer = GlobalMasterServicer(agent)
    env.register(name, "GlobalMaster", servicer)
    return agent, servicer


def build_sampling_worker(env: Env, host: ModelHost) -> tuple[SamplingWorker, SamplingWorkerServicer]:
    """Sparrow-style worker co-located with its node (it calls the NodeAgent directly)."""
    worker = SamplingWorker(host.name, env.transport_for(host.name), env.clock,
                            node=LocalTransport({"NodeAgent": host.servicer}, host.name))
    servicer = SamplingWorkerServicer(worker)
    env.register(host.name, "SamplingWorker", servicer)
    return worker, servicer


def build_sampling_scheduler(env: Env, name: str, index: int, *, hosts: list[str], cap_cpu, cap_mem, attributes,
                             probes: int) -> tuple[SamplingScheduler, SamplingSchedulerServicer]:
    sched = SamplingScheduler(name, env.transport_for(name), env.clock, env.np_rng(2, index), hosts=hosts,
                              cap_cpu=cap_cpu, cap_mem=cap_mem, attributes=attributes, probes=probes,
                              probe=env.policies.get("probe"))
    servicer = SamplingSchedulerServicer(sched)
    env.register(name, "SamplingScheduler", servicer)
    return sched, servicer
