"""The controller's TOML configuration: which GMs and LMs exist, where they listen, which hosts
each LM owns, the users' queues and shares (DESIGN §13: typed, defaulted, validated; a bad
key fails at start-up naming the key).

    cell = "c1"                          # MQTT topic prefix cellbed/<cell>/...
    mqtt_host = "10.231.40.1"            # "" = no periodic updates (replies still carry state)
    state_dir = "/var/lib/cellbed/megha" # the GMs' queue journals
    queue_fsync = true                   # fsync every journal write (false: faster, a power cut may lose tasks)
    known_attributes = ["ssd", "gpu"]    # the cell's attribute vocabulary (besides what hosts report)
    metrics_port = 9466                  # Prometheus /metrics of this process (every GM/LM it runs, label
                                         # agent=<name>) on its first agent's address; 0 (default) = off
    tls_ca = "/etc/cellbed/pki/ca.crt"   # mTLS (the default): the cell CA, and this process's certificate;
    tls_cert = "/etc/cellbed/pki/{role}-{agent}.crt"   # {agent}/{role}: one file per process (--only NAME)
    tls_key = "/etc/cellbed/pki/{role}-{agent}.key"    # or insecure = true: plaintext, isolated boxes only

    [agents]                             # every GM and LM instance: where it listens
    gm1 = "10.231.40.1:50071"
    lm1a = "10.231.40.1:50081"

    [hosts]                              # node daemons
    h1 = "10.231.40.11:50051"

    [[gm]]
    name = "gm1"

    [[lm]]
    name = "lm1"
    instances = ["lm1a", "lm1b"]         # the first starts active, the second standby
    hosts = ["h1", "h2"]

    [[queue]]
    user = "alice"
    share = 0.5
    gm = "gm1"

    [gm_params]                          # GmParams fields
    [lm_params]                          # LmParams fields
    [model]                              # optional: in-process model hosts instead of [hosts]
    hosts = 100                          # named m0001..; split over the LMs in equal blocks
    cpu_cores = 4.0
    mem_mib = 16384
    attributes = [{ssd = 1}, {}]         # host i gets attributes[i mod len] (default none)
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from cellbed.policy.megha.fairness import QueueConfig
from cellbed.runtime.plugins.config import book_from_table
from cellbed.controller.megha.params import GmParams, LmParams
from cellbed.domain.vm import NAME_RE
from cellbed.domain.config import check_keys, field_names, load_toml
from cellbed.domain.errors import InvalidArgument, check_range


@dataclasses.dataclass(frozen=True)
class LmConfig:
    name: str
    instances: tuple[str, ...]
    hosts: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ModelHosts:
    hosts: int = 0
    cpu_cores: float = 4.0
    mem_mib: int = 16384
    attributes: tuple = ()          # of dicts; host i gets attributes[i mod len]

    def attributes_of(self, i: int) -> dict:
        return dict(self.attributes[i % len(self.attributes)]) if self.attributes else {}

    def names(self) -> list[str]:
        return [f"m{i:04d}" for i in range(1, self.hosts + 1)]


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    cell: str = "cell"
    mqtt_host: str = ""
    mqtt_port: int = 1883
    state_dir: str = "/var/lib/cellbed/megha"
    queue_fsync: bool = True
    known_attributes: tuple[str, ...] = ()
    metrics_port: int = 0
    tls_ca: str = ""                # the cell CA's certificate (mTLS for gRPC and MQTT)
    tls_cert: str = ""              # this process's identity: cellbed://<cell>/<gm|lm>/<agent>
    tls_key: str = ""
    insecure: bool = False          # plaintext: only by explicit choice
    agents: dict = dataclasses.field(default_factory=dict)
    hosts: dict = dataclasses.field(default_factory=dict)
    gms: tuple[str, ...] = ()
    lms: tuple[LmConfig, ...] = ()
    queues: tuple[QueueConfig, ...] = ()
    gm_params: GmParams = GmParams()
    lm_params: LmParams = LmParams()
    model: ModelHosts | None = None
    policy: dict = dataclasses.field(default_factory=dict)   # [policy]: the masters' stages (DESIGN §17)
    explain: float = 0.01           # share of the GMs' placements explained (decisions-<agent>.jsonl in state_dir)
    config_dir: str = ""            # where relative plugin files are taken from (the file's folder)

    def policy_book(self):
        """The masters' policies, every chosen plugin loaded and checked (real agents isolate errors)."""
        return book_from_table(self.policy, self.config_dir, "isolate")

    def lm_instances(self) -> dict[str, list[str]]:
        return {lm.name: list(lm.instances) for lm in self.lms}

    def address(self, name: str) -> str:
        a = self.agents.get(name) or self.hosts.get(name)
        if not a:
            raise InvalidArgument(f"no address for {name!r}: add it to [agents] or [hosts]")
        return a

    def gm_of(self, user: str) -> str:
        for q in self.queues:
            if q.user == user:
                return q.gm
        raise InvalidArgument(f"user {user!r} has no [[queue]]: users are {', '.join(q.user for q in self.queues)}")

    @classmethod
    def load(cls, path: str) -> "ControllerConfig":
        cfg = dataclasses.replace(cls.from_dict(load_toml(path), path),
                                  config_dir=os.path.dirname(os.path.abspath(path)))
        cfg.policy_book()
        return cfg

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "config") -> "ControllerConfig":
        top = {"cell", "mqtt_host", "mqtt_port", "state_dir", "queue_fsync", "known_attributes", "agents", "hosts", "gm", "lm",
               "queue", "gm_params", "lm_params", "model", "metrics_port", "tls_ca", "tls_cert", "tls_key", "insecure",
               "policy", "explain"}
        check_keys(d, top, where)
        r = _Reader(where)
        agents = {k: r.typed(f"agents.{k}", v, str, "a \"host:port\" string") for k, v in d.get("agents", {}).items()}
        hosts = {k: r.typed(f"hosts.{k}", v, str, "a \"host:port\" string") for k, v in d.get("hosts", {}).items()}
        gms = _gms(r, d)
        model = _model(r, d["model"]) if "model" in d else None
        lms = _lms(r, d, model)
        _check_addresses(r, lms, gms, agents, hosts, model)
        queues = _queues(r, d, gms)
        cfg = cls(cell=r.typed("cell", d.get("cell", "cell"), str, "a string"),
                  mqtt_host=r.typed("mqtt_host", d.get("mqtt_host", ""), str, "a string"),
                  mqtt_port=r.typed("mqtt_port", d.get("mqtt_port", 1883), int, "an integer"),
                  state_dir=r.typed("state_dir", d.get("state_dir", cls.state_dir), str, "a string"),
                  queue_fsync=r.typed("queue_fsync", d.get("queue_fsync", True), bool, "true or false"),
                  metrics_port=r.typed("metrics_port", d.get("metrics_port", 0), int, "an integer"),
                  tls_ca=r.typed("tls_ca", d.get("tls_ca", ""), str, "a path"),
                  tls_cert=r.typed("tls_cert", d.get("tls_cert", ""), str, "a path"),
                  tls_key=r.typed("tls_key", d.get("tls_key", ""), str, "a path"),
                  insecure=r.typed("insecure", d.get("insecure", False), bool, "true or false"),
                  known_attributes=tuple(d.get("known_attributes", ())), agents=agents, hosts=hosts,
                  gms=tuple(gms), lms=tuple(lms), queues=tuple(queues),
                  gm_params=r.table("gm_params", d.get("gm_params", {}), GmParams).validate(),
                  lm_params=r.table("lm_params", d.get("lm_params", {}), LmParams).validate(), model=model,
                  policy=dict(r.typed("policy", d.get("policy", {}), dict, "a table")),
                  explain=float(r.typed("explain", d.get("explain", 0.01), (int, float), "a share 0..1")))
        check_range("mqtt_port", cfg.mqtt_port, 1, 65535)
        check_range("metrics_port", cfg.metrics_port, 0, 65535)
        check_range("explain", cfg.explain, 0.0, 1.0)
        return cfg


class _Reader:
    """Typed reads from one config file, errors prefixed with where it came from."""

    def __init__(self, where: str) -> None:
        self.where = where

    def typed(self, key, v, t, tname):
        if not isinstance(v, t) or (t in (int, float, (int, float)) and isinstance(v, bool)):
            raise InvalidArgument(f"{self.where}: {key}={v!r} must be {tname}")
        return v

    def table(self, key, v, ctor):
        self.typed(key, v, dict, "a table")
        check_keys(v, field_names(ctor), f"{self.where}: [{key}]")
        try:
            return ctor(**v)
        except TypeError as e:
            raise InvalidArgument(f"{self.where}: [{key}]: {e}") from None


def _gms(r: _Reader, d: dict) -> list[str]:
    gms = []
    for i, g in enumerate(d.get("gm", [])):
        name = r.typed(f"gm[{i}].name", g.get("name", ""), str, "a string")
        check_keys(g, {"name"}, f"{r.where}: gm[{i}]")
        if not NAME_RE.fullmatch(name) or len(name) > 12:
            raise InvalidArgument(f"{r.where}: gm[{i}].name={name!r}: allowed [a-z0-9][a-z0-9-]{{0,11}}")
        gms.append(name)
    if not gms:
        raise InvalidArgument(f"{r.where}: at least one [[gm]] is required")
    return gms


def _model(r: _Reader, v) -> "ModelHosts":
    model = r.table("model", v, ModelHosts)
    attrs = model.attributes
    if not isinstance(attrs, (list, tuple)) or not all(
            isinstance(a, dict) and all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in a.values())
            for a in attrs):
        raise InvalidArgument(f"{r.where}: model.attributes={attrs!r} must be a list of tables of strings or integers")
    model = dataclasses.replace(model, attributes=tuple(attrs))
    check_range("model.hosts", model.hosts, 1, 100_000)
    check_range("model.cpu_cores", model.cpu_cores, 0.01, 1024, "cores")
    check_range("model.mem_mib", model.mem_mib, 64, 1 << 24, "MiB")
    return model


def _lms(r: _Reader, d: dict, model) -> list["LmConfig"]:
    lms = []
    for i, lm in enumerate(d.get("lm", [])):
        check_keys(lm, {"name", "instances", "hosts"}, f"{r.where}: lm[{i}]")
        name = r.typed(f"lm[{i}].name", lm.get("name", ""), str, "a string")
        inst = tuple(lm.get("instances", [name]))
        if not 1 <= len(inst) <= 2:
            raise InvalidArgument(f"{r.where}: lm[{i}].instances has {len(inst)} entries: allowed 1 (no standby) or 2")
        lms.append(LmConfig(name, inst, tuple(lm.get("hosts", []))))
    if not lms:
        raise InvalidArgument(f"{r.where}: at least one [[lm]] is required")
    names = model.names() if model else []
    if model is not None and all(not lm.hosts for lm in lms):   # split the model hosts in blocks
        n = len(lms)
        lms = [LmConfig(lm.name, lm.instances, tuple(names[j * len(names) // n:(j + 1) * len(names) // n]))
               for j, lm in enumerate(lms)]
    return lms


def _check_addresses(r: _Reader, lms, gms, agents, hosts, model) -> None:
    names = model.names() if model else []
    for lm in lms:
        if not lm.hosts:
            raise InvalidArgument(f"{r.where}: lm {lm.name} has no hosts")
        for h in lm.hosts:
            if h not in hosts and h not in names:
                raise InvalidArgument(f"{r.where}: lm {lm.name}: host {h!r} is not in [hosts]"
                                      + (" or the model hosts" if model else ""))
        for inst in lm.instances:
            if inst not in agents:
                raise InvalidArgument(f"{r.where}: LM instance {inst!r} has no address in [agents]")
    for g in gms:
        if g not in agents:
            raise InvalidArgument(f"{r.where}: GM {g!r} has no address in [agents]")


def _queues(r: _Reader, d: dict, gms: list[str]) -> list[QueueConfig]:
    queues = []
    for i, q in enumerate(d.get("queue", [])):
        check_keys(q, {"user", "share", "gm"}, f"{r.where}: queue[{i}]")
        share = float(r.typed(f"queue[{i}].share", q.get("share", 0.0), (int, float), "a number"))
        check_range(f"queue[{i}].share", share, 0.0, 1.0)
        gm = q.get("gm", gms[i % len(gms)])
        if gm not in gms:
            raise InvalidArgument(f"{r.where}: queue[{i}].gm={gm!r}: allowed {', '.join(gms)}")
        queues.append(QueueConfig(r.typed(f"queue[{i}].user", q.get("user", ""), str, "a string"), share, gm))
    if not queues:
        raise InvalidArgument(f"{r.where}: at least one [[queue]] is required (users and their shares)")
    total = sum(q.share for q in queues)
    if abs(total - 1.0) > 1e-6:
        raise InvalidArgument(f"{r.where}: queue shares sum to {total:g}: they must sum to 1")
    return queues
