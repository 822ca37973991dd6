"""cellbed-controller: Megha Global and Local Masters over gRPC + MQTT, from a TOML config
(controller/megha/config.py). Every server has health and reflection.

    cellbed-controller --config controller.toml                 # every GM and LM in the config
    cellbed-controller --config controller.toml --only gm1      # one agent (one process per agent)
    cellbed-controller --config controller.toml --check         # validate and exit

With a [model] table the LMs drive in-process model hosts (the NodeAgent on the model backend,
wall clock) instead of node daemons: the GM<->LM path is real gRPC, the nodes are simulated.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from cellbed import assembly
from cellbed.controller.megha.config import ControllerConfig
from cellbed.controller.megha.gm import GlobalMaster
from cellbed.controller.megha.lm import LocalMaster
from cellbed.controller.megha.prom import ControllerCollector, metrics_address
from cellbed.controller.megha.queues import FileQueueStore
from cellbed.domain.errors import CellbedError, FailedPrecondition, InvalidArgument
from cellbed.domain.identity import Role
from cellbed.runtime.explain import ExplainLog
from cellbed.runtime.plugins import service as policy_service
from cellbed.runtime.plugins.config import ErrorLog
from cellbed.runtime.plugins.prom import PolicyCollector
from cellbed.runtime.authz import Security, security_from
from cellbed.runtime.pki import identity_of
from cellbed.runtime import prom, rpc
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import megha_pb2 as meghapb, megha_pb2_grpc as meghapbg

log = logging.getLogger("cellbed.controller")
GM_SERVICE = meghapb.DESCRIPTOR.services_by_name["GlobalMaster"].full_name
LM_SERVICE = meghapb.DESCRIPTOR.services_by_name["LocalMaster"].full_name


class RoutingTransport:
    """Requests to in-process model hosts go to the in-process network; the rest over gRPC."""

    def __init__(self, remote: GrpcTransport, local, local_names: set[str]) -> None:
        self.remote, self.local, self.local_names = remote, local, local_names

    async def request(self, target: str, method: str, msg, timeout: float = 10.0):
        if target in self.local_names:
            return await self.local.request(target, method, msg, timeout)
        return await self.remote.request(target, method, msg, timeout)

    def publish(self, topic: str, msg) -> None:
        self.remote.publish(topic, msg)

    def subscribe(self, topic: str, fn, msg_type) -> None:
        self.remote.subscribe(topic, fn, msg_type)

    async def close(self) -> None:
        await self.remote.close()


class Controller:
    """The agents of one process. Servers bind first; a configured port 0 is replaced by the
    bound port in the shared address book, so an all-in-one process (tests) needs no fixed ports."""

    def __init__(self, cfg: ControllerConfig, only: set[str] | None = None) -> None:
        self.cfg = cfg
        names = set(cfg.gms) | {i for lm in cfg.lms for i in lm.instances}
        unknown = sorted((only or set()) - names)
        if unknown:
            raise InvalidArgument(f"--only {', '.join(unknown)}: not in the config; agents are {', '.join(sorted(names))}")
        self.only = only or names
        self.security = self._security(cfg)
        self.book = dict(cfg.agents)
        self.book.update(cfg.hosts)
        self.clock = RealClock()
        tag = "-".join(sorted(self.only))
        self.explain = ExplainLog(cfg.explain, os.path.join(cfg.state_dir, f"decisions-{tag}.jsonl")
                                  if any(g in self.only for g in cfg.gms) else "")
        self.env = assembly.real_env(self.clock, self._grpc, policies=cfg.policy_book(), explain=self.explain)
        self.env.policies.env.on_error = ErrorLog(", ".join(sorted(self.only)))
        self.gms: dict[str, GlobalMaster] = {}
        self.lms: dict[str, LocalMaster] = {}
        self.servers: list = []
        self.transports: list = []
        self.model_hosts = []
        self.store = None

    def _security(self, cfg: ControllerConfig) -> Security:
        """The process's identity. A certificate names one role, so under mTLS a process runs the
        agents of one role only (the cell runs one agent per process, with --only)."""
        cert, key = cfg.tls_cert, cfg.tls_key
        if "{agent}" in cert + key:   # one config for a cell's processes: each names its own files
            if len(self.only) != 1:
                raise FailedPrecondition(f"tls_cert {cert!r} names {{agent}}: run one agent per process (--only NAME)")
            (agent,) = self.only
            role = (Role.GM if agent in cfg.gms else Role.LM).value
            cert, key = (x.replace("{agent}", agent).replace("{role}", role) for x in (cert, key))
        sec = security_from(cfg.cell, cfg.tls_ca, cert, key, cfg.insecure,
                            f"controller ({', '.join(sorted(self.only))})")
        if sec.tls is not None:
            who = identity_of(sec.tls.read()[1])
            roles = {Role.GM if n in cfg.gms else Role.LM for n in self.only}
            if who is None or {who.role} != roles:
                raise FailedPrecondition(
                    f"tls_cert {cert}: identity {who} cannot act as {', '.join(sorted(r.value for r in roles))} "
                    f"for {', '.join(sorted(self.only))}: give each role its own process (--only) and certificate")
        return sec

    def _grpc(self, name: str) -> GrpcTransport:
        t = GrpcTransport(lambda n: self.book[n], self.clock, self.cfg.mqtt_host, self.cfg.mqtt_port, name=name,
                          security=self.security)
        self.transports.append(t)
        return t

    async def _model(self):
        m = self.cfg.model
        env = assembly.model_env(0, clock=self.clock)
        self.model_hosts = await asyncio.gather(*(assembly.model_host(env, assembly.model_config(
            h, m.cpu_cores, m.mem_mib, m.attributes_of(i), monitor_period_s=3600.0, admission="requested"))
            for i, h in enumerate(m.names())))
        return env.net, set(m.names())

    async def _serve(self, name: str, add, servicer, service: str):
        address = self.book[name]
        server, port, health = rpc.create_server(address, [(add, servicer, service),
                                                           policy_service.service_entry(name, self.env.policies)],
                                                 security=self.security)
        await server.start()
        host = address.rsplit(":", 1)[0]
        self.book[name] = f"{host}:{port}"
        self.servers.append((name, server, health, service))
        return health

    async def start(self) -> None:
        cfg = self.cfg
        lm_insts = [(lm, i, inst) for lm in cfg.lms for i, inst in enumerate(lm.instances) if inst in self.only]
        local = None
        if cfg.model is not None and lm_insts:
            local = await self._model()
        for lm, i, inst in lm_insts:
            remote = self._grpc(inst)
            transport = RoutingTransport(remote, local[0].transport(inst), local[1]) if local else remote
            a, servicer = assembly.build_lm(
                self.env, lm.name, inst, hosts=list(lm.hosts), gms=list(cfg.gms), standby=i > 0,
                peer=(lm.instances[1 - i] if len(lm.instances) > 1 else ""), cell=cfg.cell, params=cfg.lm_params,
                transport=transport)
            self.lms[inst] = a
            await self._serve(inst, meghapbg.add_LocalMasterServicer_to_server, servicer, LM_SERVICE)
        gm_names = [g for g in cfg.gms if g in self.only]
        if gm_names:
            self.store = FileQueueStore(os.path.join(cfg.state_dir, "queues"), fsync=cfg.queue_fsync)
        for g in gm_names:
            a, servicer = assembly.build_gm(self.env, g, lms=cfg.lm_instances(), queues=list(cfg.queues),
                                            store=self.store, cell=cfg.cell, params=cfg.gm_params,
                                            known_attributes=cfg.known_attributes)
            self.gms[g] = a
            await self._serve(g, meghapbg.add_GlobalMasterServicer_to_server, servicer, GM_SERVICE)
        await asyncio.gather(*(a.start() for a in self.lms.values()))
        await asyncio.gather(*(a.start(subscribe=bool(cfg.mqtt_host)) for a in self.gms.values()))
        for name, _, health, service in self.servers:
            await rpc.set_serving(health, [service])
            log.info("%s serving %s on %s", name, service.rsplit(".", 1)[-1], self.book[name])

    async def stop(self) -> None:
        for _, server, health, service in self.servers:
            await rpc.set_not_serving(health, [service])
        for _, server, _, _ in self.servers:
            await server.stop(grace=1)
        for a in list(self.gms.values()) + list(self.lms.values()):
            await a.stop()
        for mh in self.model_hosts:
            await mh.agent.stop()
        for t in self.transports:
            await t.close()
        if self.store is not None:
            self.store.close()
        self.explain.close()


async def run(cfg: ControllerConfig, only: set[str] | None) -> None:
    c = Controller(cfg, only)
    await c.start()
    exporter = None
    if cfg.metrics_port:   # one per process; HTTPS for cell certificates, unless the controller is insecure
        exporter = prom.Exporter(metrics_address(cfg.agents, [*c.gms, *c.lms]), cfg.metrics_port,
                                 [ControllerCollector(c.gms, c.lms, prom.OnLoop(asyncio.get_running_loop())),
                                  PolicyCollector(", ".join(sorted(c.only)), c.env.policies.env.stats)],
                                 tls=c.security.tls)
        exporter.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")
    if exporter is not None:
        exporter.stop()
    await c.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cellbed-controller", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="controller TOML (see controller/megha/config.py)")
    ap.add_argument("--only", default="", help="comma-separated GM / LM instance names to run (default: all)")
    ap.add_argument("--check", action="store_true", help="validate the config and exit")
    ap.add_argument("--log-level", default=os.environ.get("CELLBED_LOG", "INFO"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = ControllerConfig.load(args.config)
        if args.check:
            print(f"{args.config}: {len(cfg.gms)} GM(s), {len(cfg.lms)} LM(s), {len(cfg.queues)} queue(s): OK")
            return
        asyncio.run(run(cfg, set(filter(None, args.only.split(","))) or None))
    except CellbedError as e:
        raise SystemExit(f"cellbed-controller: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
