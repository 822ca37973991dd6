"""The single-box cell: emulated hosts in Linux namespaces on one machine (DESIGN §4).

`up` records every resource in the cell's state file *before* creating it, and `down`
(cellbed/cell/record.py, re-exported here) removes exactly those, in reverse order; it is
idempotent and works after a crash (the processes are recorded with their start times; the
QEMU processes are whatever is left in the host cgroups that `up` created). Nothing is ever
swept by name or pattern.
"""
from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.domain import errors
from cellbed.cell.accel import probe
from cellbed.cell import megha as meghamod
from cellbed.cell import agents, cell_pki, libvirt_conf, mqtt_conf, procs
from cellbed.cell.mqtt_conf import MQTT_PLAIN_PORT, MQTT_TLS_PORT
from cellbed.cell import prom_sd
from cellbed.cell import ssh as sshmod
from cellbed.cell.iproute import check_subnet_free, ip
from cellbed.cell.record import DEFAULT_STATE_ROOT, Recorder, down, load_state, state_dir
from cellbed.domain.identity import Role
from cellbed.runtime.authz import Security
from cellbed.runtime.cgroups import HostCgroup
from cellbed.daemon.config import NodeConfig, to_toml, toml_value
from cellbed.runtime.plugins.config import absolute_files, book_from_table

__all__ = ["BROKER_PORT", "DEFAULT_GUEST_DIR", "DEFAULT_STATE_ROOT", "GRPC_PORT", "MQTT_PORT", "CellPlan", "HostPlan",
           "Recorder", "down", "health_ok", "load_state", "state_dir", "up"]

log = logging.getLogger(__name__)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_GUEST_DIR = os.environ.get("CELLBED_GUEST_DIR", os.path.join(REPO, "build", "guest"))
GRPC_PORT = 50051
MQTT_PORT = MQTT_PLAIN_PORT   # an insecure cell's; a secure cell's broker listens on MQTT_TLS_PORT (8883)
BROKER_PORT = 50061   # cellbed-broker on the bridge address (cells started with san=...)


@dataclasses.dataclass(frozen=True)
class HostPlan:
    name: str
    index: int
    address: str
    netns: str
    veth: str
    cpu_cores: float
    mem_mib: int


@dataclasses.dataclass(frozen=True)
class CellPlan:
    """Pure description of a cell: names and addresses, no side effects (Mininet's Topo)."""

    name: str
    subnet: str
    hosts: tuple[HostPlan, ...]

    @property
    def bridge(self) -> str:
        return f"cb{self.name}br"

    @property
    def bridge_address(self) -> str:
        return str(ipaddress.ip_network(self.subnet)[1])

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @classmethod
    def build(cls, name: str, n_hosts: int, subnet: str, cpu_cores: list[float], mem_mib: list[int]) -> "CellPlan":
        # Interface names hold at most 15 characters: the veth "cb<name>h<i>" (i up to 32) leaves 10.
        if not re.fullmatch(r"[a-z0-9]{1,10}", name):
            raise errors.InvalidArgument(f"cell name {name!r}: allowed 1..10 lowercase letters or digits")
        errors.check_range("hosts", n_hosts, 1, 32)
        try:
            net = ipaddress.ip_network(subnet)
        except ValueError as e:
            raise errors.InvalidArgument(f"subnet {subnet!r}: {e}") from None
        if (not net.is_private or net.version != 4 or net.is_loopback or net.is_link_local
                or net.num_addresses < n_hosts + 16):
            raise errors.InvalidArgument(f"subnet {subnet}: must be a private IPv4 range with room for {n_hosts} hosts")
        cpus = (cpu_cores * n_hosts)[:n_hosts] if len(cpu_cores) == 1 else cpu_cores
        mems = (mem_mib * n_hosts)[:n_hosts] if len(mem_mib) == 1 else mem_mib
        if len(cpus) != n_hosts or len(mems) != n_hosts:
            raise errors.InvalidArgument(f"host-cpus/host-mem-mib: give 1 or {n_hosts} values")
        for c in cpus:
            errors.check_range("host-cpus", c, 0.05, 64, "cores")
        for m in mems:
            errors.check_range("host-mem-mib", m, 128, 1 << 20, "MiB")
        hosts = tuple(HostPlan(name=f"h{i}", index=i, address=str(net[10 + i]), netns=f"cb-{name}-h{i}",
                               veth=f"cb{name}h{i}", cpu_cores=cpus[i - 1], mem_mib=mems[i - 1])
                      for i in range(1, n_hosts + 1))
        return cls(name, str(net), hosts)


def _preflight(guest_dir: str) -> None:
    missing = [t for t in ("ip", "unshare", "libvirtd", "virsh", "mosquitto", "mount") if not shutil.which(t)]
    if missing:
        raise errors.FailedPrecondition(f"missing tools {', '.join(missing)}: run ./cellbed.sh setup")
    for f in ("vmlinuz", "initrd.img"):
        if not os.path.exists(os.path.join(guest_dir, f)):
            raise errors.FailedPrecondition(f"guest image {guest_dir}/{f} is missing: run ./cellbed.sh setup")


def health_ok(target: str, timeout: float = 2.0, service: str = "cellbed.v1.NodeAgent",
              security: Security | None = None) -> bool:
    """*security*: the caller's identity (the cell's admin certificate); None: plaintext."""
    try:
        with (security or Security.insecure("")).sync_channel(target) as ch:
            r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
            return r.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def up(name: str = "default", n_hosts: int = 3, *, accel: str = "auto", subnet: str = "10.231.0.0/24",
       host_cpus: list[float] = (0.5,), host_mem_mib: list[int] = (1024,), root: str = DEFAULT_STATE_ROOT,
       guest_dir: str = DEFAULT_GUEST_DIR, monitor_period_s: float = 5.0, ready_timeout_s: float = 120.0,
       ssh: bool = False, bare: bool = False, san: dict | None = None,
       host_attributes: list[dict] | None = None, megha: dict | None = None, insecure: bool = False,
       policy: dict | None = None, broker_params: dict | None = None, explain: float = 0.01) -> dict:
    """*ssh*: an sshd on every host (cellbed/cell/ssh.py); *bare* (needs *ssh*): hosts without
    libvirtd, node daemon or mosquitto, for a playbook to provision. *san*: run MASB — a broker
    agent (cellbed-broker) on the bridge and a SAN agent in every node daemon, with these
    SanConfig overrides. *host_attributes*: machine properties per host (constraints match them).
    *megha*: {"gms", "lms", "standby"}: GMs and LMs under a supervisor (cellbed/cell/megha.py).
    *insecure*: plaintext gRPC, MQTT and libvirt, anonymous and unauthenticated (isolated boxes
    only); by default the cell gets a CA and every agent a certificate (cellbed/cell/cell_pki.py).
    *policy*: the ``[policy]`` table every agent loads (stages to plugins, their parameters; DESIGN
    §17), relative files taken from the working folder and checked before anything is built;
    *broker_params*: the broker's BrokerParams overrides (scores, candidate count, scan limits);
    *explain*: the share of decisions the agents explain (their decisions*.jsonl)."""
    plan = CellPlan.build(name, n_hosts, subnet, list(host_cpus), list(host_mem_mib))
    if host_attributes is not None and len(host_attributes) != n_hosts:
        raise errors.InvalidArgument(f"host_attributes has {len(host_attributes)} entries: give one per host ({n_hosts})")
    if bare and not ssh:
        raise errors.InvalidArgument("bare hosts are only reachable over SSH: give ssh=True (--ssh) with bare")
    mplan = meghamod.plan(megha, [h.name for h in plan.hosts], bare=bare) if megha is not None else None
    policy = absolute_files(policy or {}, os.getcwd())
    book_from_table(policy, "", "isolate")       # refused here, not by every agent at start
    choice = probe(accel)
    sdir = state_dir(name, root)
    if load_state(name, root) is not None:
        raise errors.AlreadyExists(f"cell {name!r} already exists ({sdir}); run `cellctl --cell {name} cell down` first")
    if not bare:
        _preflight(guest_dir)
    if ssh and sshmod.preflight():
        raise errors.FailedPrecondition(f"missing {', '.join(sshmod.preflight())}: run ./cellbed.sh setup")
    check_subnet_free(plan.subnet)
    os.makedirs(sdir, exist_ok=True)
    rec = Recorder(os.path.join(sdir, "cell.json"), {
        "name": name, "subnet": plan.subnet, "bridge": plan.bridge, "bridge_address": plan.bridge_address,
        "accel": choice.accel, "accel_reason": choice.reason, "created_unix_s": time.time(),
        "mqtt": f"{plan.bridge_address}:{MQTT_PLAIN_PORT if insecure else MQTT_TLS_PORT}", "insecure": insecure,
        "hosts": {h.name: {"address": h.address, "grpc_port": GRPC_PORT, "netns": h.netns,
                           "cpu_cores": h.cpu_cores, "mem_mib": h.mem_mib} for h in plan.hosts},
        "resources": [{"kind": "dir", "path": sdir}], "policy": policy, "broker_params": dict(broker_params or {}),
        "explain": explain})
    if bare:
        rec.state.update(bare=True, mqtt="")
    t0 = time.monotonic()
    if not bare and not insecure:   # recorded first: down removes the keys whatever happens next
        rec.add(kind="dir", path=os.path.join(sdir, "pki"))
        rec.state["pki"] = cell_pki.issue(
            sdir, name, hosts={h.name: h.address for h in plan.hosts}, bridge_address=plan.bridge_address,
            brokers=["ba1"] if san is not None else [], gms=list(mplan.gms) if mplan else [],
            lm_instances=[i for lm in mplan.lms for i in lm.instances] if mplan else [])
        rec.flush()
    admin = cell_pki.security(rec.state, Role.ADMIN, "admin")
    health = functools.partial(health_ok, security=admin)
    try:
        brokers = _create(rec, sdir, plan, choice.accel, guest_dir, monitor_period_s, ssh=ssh, bare=bare, san=san,
                          host_attributes=host_attributes or [{}] * n_hosts,
                          lm_of={i: lm.name for lm in mplan.lms for i in lm.instances} if mplan else {})
        if ssh:
            sshmod.write_client_files(rec.state["ssh"], rec.state["hosts"])
            late = sshmod.wait_sshd([h.address for h in plan.hosts], ready_timeout_s)
            if late:
                raise errors.DeadlineExceeded(f"sshd not listening after {ready_timeout_s:.0f} s on "
                                              f"{', '.join(late)} (logs in {sdir}/<host>/logs/sshd.log)")
        _wait_serving(sdir, plan, ready_timeout_s, bare=bare, brokers=brokers, health=health)
        if mplan is not None:   # after the node daemons serve: the LMs discover their hosts at start
            meghamod.wait_serving(meghamod.start(rec, sdir, mplan, name, plan.bridge_address, rec.state["hosts"],
                                                 sorted({"host", *(k for a in host_attributes or [] for k in a)}),
                                                 rec.state.get("policy") or None, rec.state.get("explain", 0.01)),
                                  ready_timeout_s, health, security=admin)
    except BaseException:
        log.error("cell up failed; the recorded resources stay for `cellctl --cell %s cell down`", name)
        raise
    # every agent's /metrics, for Prometheus' file_sd_configs (cellbed/cell/prom_sd.py)
    rec.state["prometheus_file_sd"] = prom_sd.write_file_sd(sdir, rec.state.setdefault("metrics_targets", []),
                                                            "https" if "pki" in rec.state else "http")
    rec.state["prometheus_scrape"] = prom_sd.write_scrape_config(
        sdir, rec.state["prometheus_file_sd"], rec.state.get("pki", {}).get("certs", {}).get(cell_pki.PROMETHEUS))
    rec.state["up_seconds"] = round(time.monotonic() - t0, 2)
    rec.flush()
    return rec.state


def _create(rec: Recorder, sdir: str, plan: CellPlan, accel: str, guest_dir: str, monitor_period_s: float, *,
            ssh: bool, bare: bool, san: dict | None, host_attributes: list[dict], lm_of: dict[str, str]) -> str:
    """The bridge, the cell's files, mosquitto, the broker and the hosts, each recorded before it
    is made. Returns the node daemons' ``brokers`` setting."""
    rec.add(kind="link", name=plan.bridge)
    ip("link", "add", plan.bridge, "type", "bridge")
    ip("addr", "add", f"{plan.bridge_address}/{plan.prefixlen}", "dev", plan.bridge)
    ip("link", "set", plan.bridge, "up")
    hosts_file = os.path.join(sdir, "hosts")
    with open(hosts_file, "w") as f:
        f.write("127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in plan.hosts))
    peers_file = os.path.join(sdir, "peers.json")
    with open(peers_file, "w") as f:
        json.dump({"hosts": {h.name: {"address": h.address, "grpc_port": GRPC_PORT} for h in plan.hosts}}, f)
    if ssh:
        rec.add(kind="dir", path=sshmod.ssh_dir(sdir))
        rec.state["ssh"] = sshmod.make_cell_keys(sdir, plan.name)
        for hs in rec.state["hosts"].values():
            hs["ssh_port"] = sshmod.SSH_PORT
    if not bare:
        _start_mosquitto(rec, sdir, plan, san is not None, lm_of)
    brokers = ""
    if san is not None and not bare:
        brokers = _start_broker(rec, sdir, plan, peers_file, rec.state["policy"], rec.state["broker_params"])
    max_cpu = max(h.cpu_cores for h in plan.hosts)
    max_mem = max(h.mem_mib for h in plan.hosts)
    for h in plan.hosts:
        _up_host(rec, sdir, plan, h, accel, hosts_file, peers_file, guest_dir, monitor_period_s,
                 h.cpu_cores / max_cpu, h.mem_mib / max_mem, ssh=ssh, bare=bare, brokers=brokers,
                 san=san or {}, attributes=host_attributes[h.index - 1])
    return brokers


def _wait_serving(sdir: str, plan: CellPlan, ready_timeout_s: float, *, bare: bool, brokers: str,
                  health: Callable[..., bool]) -> None:
    """Until every node daemon (and the broker) answers its health check as SERVING."""
    deadline = time.monotonic() + ready_timeout_s
    pending = {} if bare else {h.name: f"{h.address}:{GRPC_PORT}" for h in plan.hosts}
    if brokers:
        pending["broker ba1"] = f"{plan.bridge_address}:{BROKER_PORT}"
    while pending:
        for hn, target in list(pending.items()):
            if health(target, service="cellbed.v1.BrokerAgent" if hn.startswith("broker") else
                      "cellbed.v1.NodeAgent"):
                del pending[hn]
        if pending and time.monotonic() > deadline:
            raise errors.DeadlineExceeded(f"node daemons not SERVING after {ready_timeout_s:.0f} s: "
                                          f"{', '.join(pending)} (logs in {sdir}/<host>/logs)")
        if pending:
            time.sleep(0.2)


def _start_mosquitto(rec: Recorder, sdir: str, plan: CellPlan, san: bool, lm_of: dict[str, str]) -> None:
    """mosquitto on the bridge: TLS with client certificates and per-identity ACLs
    (cellbed/cell/mqtt_conf.py), or plaintext in an insecure cell."""
    conf, acl = os.path.join(sdir, "mosquitto.conf"), os.path.join(sdir, "mosquitto.acl")   # acl: agents.write_acl
    pki = rec.state.get("pki", {}).get("certs", {})
    rec.state["mqtt_acl"] = {"nodes": [h.name for h in plan.hosts], "brokers": ["ba1"] if san else [],
                             "gms": [k.split("/")[1] for k in pki if k.startswith("gm/")], "lm_of": lm_of}
    agents.write_acl(sdir, plan.name, rec.state["mqtt_acl"])
    with open(conf, "w") as f:
        f.write(mqtt_conf.mosquitto_conf(plan.bridge_address, cell_pki.files(rec.state, cell_pki.MQTT_SERVER), acl))
    argv, logf = ["mosquitto", "-c", conf], os.path.join(sdir, "mosquitto.log")
    res = rec.add(kind="process", name="mosquitto", argv=argv, log=logf)    # argv: cellbed/cell/restart.py
    p = subprocess.Popen(argv, stdout=open(logf, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    res.update(procs.proc_identity(p.pid))
    rec.flush()


def _start_broker(rec: Recorder, sdir: str, plan: CellPlan, peers_file: str, policy: dict, params: dict) -> str:
    """cellbed-broker on the bridge address, fed by the nodes' MQTT reports, with the cell's
    policies and the broker's parameters. Returns the node daemons' ``brokers`` setting."""
    conf = os.path.join(sdir, "broker.toml")
    with open(conf, "w") as f:
        f.write(f'name = "ba1"\naddress = "{plan.bridge_address}"\ngrpc_port = {BROKER_PORT}\ncell = "{plan.name}"\n'
                f'mqtt_host = "{plan.bridge_address}"\nmqtt_port = {_mqtt_port(rec.state)}\npeers_file = "{peers_file}"\n'
                f'decision_log = "{os.path.join(sdir, "broker-decisions.jsonl")}"\n'
                f'metrics_port = {prom_sd.BROKER_METRICS_PORT}\n'
                f'params = {toml_value(params)}\npolicy = {toml_value(policy)}\n'
                + "".join(f"{k} = {json.dumps(v)}\n" for k, v in
                          cell_pki.config_lines(cell_pki.files(rec.state, Role.BROKER, "ba1")).items()))
    argv, logf = [sys.executable, "-m", "cellbed.broker.main", "--config", conf], os.path.join(sdir, "broker.log")
    res = rec.add(kind="process", name="broker", argv=argv, log=logf)
    p = subprocess.Popen(argv, stdout=open(logf, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    res.update(procs.proc_identity(p.pid))
    rec.state["broker"] = f"{plan.bridge_address}:{BROKER_PORT}"
    prom_sd.add_target(rec.state, "broker", plan.bridge_address, prom_sd.BROKER_METRICS_PORT, agent="ba1",
                       cell=plan.name)
    rec.flush()
    return f"ba1={plan.bridge_address}:{BROKER_PORT}"


def _mqtt_port(state: dict) -> int:
    return MQTT_PLAIN_PORT if state.get("insecure") else MQTT_TLS_PORT


def _up_host(rec: Recorder, sdir: str, plan: CellPlan, h: HostPlan, accel: str, hosts_file: str,
             peers_file: str, guest_dir: str, monitor_period_s: float, cpu_norm: float, mem_norm: float,
             ssh: bool = False, bare: bool = False, brokers: str = "", san: dict | None = None,
             attributes: dict | None = None) -> None:
    hdir = os.path.join(sdir, h.name)
    os.makedirs(hdir, exist_ok=True)
    tls = cell_pki.files(rec.state, Role.NODE, h.name)
    libvirt_conf.write_host_files(hdir, h.name, h.address, tls=tls)
    rec.add(kind="netns", name=h.netns)
    ip("netns", "add", h.netns)
    rec.add(kind="link", name=h.veth)
    ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
    ip("link", "set", h.veth, "master", plan.bridge, "up")
    ip("-n", h.netns, "addr", "add", f"{h.address}/{plan.prefixlen}", "dev", "eth0")
    ip("-n", h.netns, "link", "set", "eth0", "up")
    ip("-n", h.netns, "link", "set", "lo", "up")
    cg_rel = f"cellbed/{plan.name}/{h.name}"
    rec.add(kind="cgroup", rel=cg_rel)
    cg = HostCgroup(cg_rel)
    # CPU quota = the host's capacity; memory: guests' RAM plus QEMU/TCG overhead per MiB.
    cg.create(h.cpu_cores, int(h.mem_mib * 2.5) + 256)
    cfg = NodeConfig(host=h.name, address=h.address, grpc_port=GRPC_PORT, cpu_cores=h.cpu_cores,
                     mem_mib=h.mem_mib, cpu_norm=round(cpu_norm, 4), mem_norm=round(mem_norm, 4), accel=accel,
                     guest_dir=guest_dir, state_dir=os.path.join(hdir, "node"), peers_file=peers_file,
                     cgroup=cg_rel, monitor_period_s=monitor_period_s, mqtt_host=plan.bridge_address,
                     mqtt_port=_mqtt_port(rec.state), cell=plan.name, brokers=brokers, san=dict(san or {}),
                     **cell_pki.config_lines(tls),
                     attributes={"host": h.name, **(attributes or {})}, policy=rec.state.get("policy", {}),
                     explain=rec.state.get("explain", 0.01),
                     metrics_port=prom_sd.NODE_METRICS_PORT).validate()
    with open(os.path.join(hdir, "node.toml"), "w") as f:
        f.write(to_toml(cfg))
    if not bare:
        prom_sd.add_target(rec.state, "node", h.address, prom_sd.NODE_METRICS_PORT, host=h.name, cell=plan.name)
    procs_files = [os.path.join(p, "cgroup.procs") for p in dict.fromkeys(cg.paths.values())]
    extra = sshmod.prepare_host(sdir, hdir, h.name, h.address, bare) if ssh else {}
    with open(os.path.join(hdir, "host.json"), "w") as f:
        json.dump({"name": h.name, "dir": hdir, "hosts_file": hosts_file, "cgroup_procs": procs_files, **extra}, f)
    res = rec.add(kind="process", name=f"{h.name}-namespace", host_dir=hdir)
    p = subprocess.Popen(["nsenter", f"--net=/run/netns/{h.netns}", "unshare", "--mount", "--uts", "--propagation", "private",
                          "--fork", "--kill-child=SIGTERM", "--", sys.executable, "-m", "cellbed.cell.hostinit", hdir],
                         stdout=open(os.path.join(hdir, "logs", "hostinit.log"), "ab"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    res.update(procs.proc_identity(p.pid))
    rec.flush()
