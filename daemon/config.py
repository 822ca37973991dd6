"""Node daemon configuration: TOML into a typed, validated dataclass."""
from __future__ import annotations

import dataclasses
import json
import os

from cellbed.domain.config import check_keys, load_toml
from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.plugins.config import book_from_table


@dataclasses.dataclass(frozen=True)
class NodeConfig:
    host: str                                # host name in the cell, e.g. "h1"
    address: str = "127.0.0.1"               # address the gRPC server binds and peers use
    grpc_port: int = 50051                   # 0 = pick a free port (tests)
    metrics_port: int = 0                    # Prometheus /metrics on address:metrics_port; 0 = off
    libvirt_uri: str = "qemu:///system"      # local libvirtd
    migration_uri_template: str = ""         # peers' libvirtd (p2p); "" = qemu+tls, or qemu+tcp if insecure
    cpu_cores: float = 1.0                   # host CPU capacity, cores
    mem_mib: int = 1024                      # host memory capacity for guests, MiB
    cpu_norm: float = 1.0                    # capacity normalised to the cell's largest host
    mem_norm: float = 1.0
    accel: str = "tcg"                       # "tcg" or "kvm" (already probed by the caller)
    cpu_model: str = ""                      # "" = qemu64 under TCG, host-model under KVM
    guest_dir: str = "build/guest"           # vmlinuz + initrd.img
    state_dir: str = "/var/lib/cellbed/node"  # migration history
    peers_file: str = ""                     # JSON {host: {address, grpc_port}}
    cgroup: str = ""                         # host cgroup relative path ("" = none)
    monitor_period_s: float = 10.0           # sampling period, s
    boot_timeout_s: float = 120.0            # StartVm waits this long for the workload, s
    verify_timeout_s: float = 20.0           # post-migration verification deadline, s
    migration_timeout_s: float = 120.0       # default completion timeout, s
    measure_dirty_rate: bool = True          # libvirt page-sampling dirty rate per VM
    mqtt_host: str = ""                      # "" = no telemetry
    mqtt_port: int = 1883
    cell: str = "cell"                       # topic prefix: cellbed/<cell>/...
    admission: str = "requested"             # "requested": Σ requests ≤ capacity; "used": Σ use + request ≤ capacity
    measure_daemon: bool = True              # sample the daemon's own RSS/CPU (off in model cells)
    poll_guests: bool = True                 # ask every guest for its status at each sample
    skip_quiet_samples: bool = False         # event-driven sampling (model backend): skip a sample when nothing changed
    attributes: dict = dataclasses.field(default_factory=dict)  # machine properties for constraints
    brokers: str = ""                        # MASB: "name=host:port,..." of broker agents; "" = no SAN
    san: dict = dataclasses.field(default_factory=dict)  # SanConfig overrides (daemon/san.py)
    tls_ca: str = ""                         # the cell CA's certificate (mTLS for gRPC and MQTT)
    tls_cert: str = ""                       # this node's certificate (identity cellbed://<cell>/node/<host>)
    tls_key: str = ""                        # its key (mode 0600)
    insecure: bool = False                   # plaintext gRPC/MQTT/libvirt: only by explicit choice
    policy: dict = dataclasses.field(default_factory=dict)  # [policy]: the node's and its SAN's stages (DESIGN §17)
    explain: float = 0.01                    # share of its SAN rounds explained (decisions.jsonl in state_dir)
    config_dir: str = dataclasses.field(default="", compare=False, metadata={"derived": True})
    """Where relative plugin files are taken from: the loaded file's folder (not written by to_toml)."""

    def validate(self) -> "NodeConfig":
        if not self.host:
            raise InvalidArgument("host must be set (the host's name in the cell)")
        check_range("grpc_port", self.grpc_port, 0, 65535)
        check_range("metrics_port", self.metrics_port, 0, 65535)
        if self.metrics_port and self.metrics_port == self.grpc_port:
            raise InvalidArgument(f"metrics_port={self.metrics_port} is the gRPC port: give another (or 0 = off)")
        check_range("cpu_cores", self.cpu_cores, 0.01, 1024, "cores")
        check_range("mem_mib", self.mem_mib, 64, 16 * 1024 * 1024, "MiB")
        check_range("monitor_period_s", self.monitor_period_s, 0.1, 3600, "s")
        check_range("boot_timeout_s", self.boot_timeout_s, 1, 3600, "s")
        check_range("verify_timeout_s", self.verify_timeout_s, 1, 3600, "s")
        check_range("explain", self.explain, 0.0, 1.0)
        check_range("migration_timeout_s", self.migration_timeout_s, 0, 3600, "s")
        if self.accel not in ("tcg", "kvm"):
            raise InvalidArgument(f"accel={self.accel!r}: allowed tcg, kvm")
        if self.admission not in ("requested", "used"):
            raise InvalidArgument(f"admission={self.admission!r}: allowed requested, used")
        for item in filter(None, self.brokers.split(",")):
            name, _, target = item.partition("=")
            if not name or ":" not in target:
                raise InvalidArgument(f"brokers={self.brokers!r}: each item must be name=host:port")
        for k, v in self.attributes.items():
            if not isinstance(v, (str, int)) or isinstance(v, bool):
                raise InvalidArgument(f"attributes.{k}={v!r}: allowed a string or an integer")
        return self

    def broker_targets(self) -> dict[str, str]:
        return dict(item.partition("=")[::2] for item in filter(None, self.brokers.split(",")))

    @classmethod
    def load(cls, path: str) -> "NodeConfig":
        data = load_toml(path)
        check_keys(data, [f.name for f in dataclasses.fields(cls) if not f.metadata.get("derived")], path)
        for f in dataclasses.fields(cls):
            if f.name in data:
                want = {"str": str, "int": int, "float": (int, float), "bool": bool, "dict": dict}[f.type]
                v = data[f.name]
                if not isinstance(v, want) or (f.type in ("int", "float") and isinstance(v, bool)):
                    raise InvalidArgument(f"{path}: {f.name}={v!r} must be of type {f.type}")
        if "host" not in data:
            raise InvalidArgument(f"{path}: host is required (the host's name in the cell)")
        cfg = cls(**data, config_dir=os.path.dirname(os.path.abspath(path))).validate()
        cfg.policy_book()                    # every chosen plugin loaded and checked before anything starts
        return cfg

    def policy_book(self) -> PolicyBook:
        """The node's policies from its ``[policy]`` table (a real agent isolates a plugin's errors)."""
        return book_from_table(self.policy, self.config_dir, "isolate")


def toml_value(v) -> str:
    """*v* as a TOML value: nested tables inline, strings as JSON strings (valid TOML basic strings)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in sorted(v.items())) + "}"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(v)


def to_toml(cfg: NodeConfig) -> str:
    return "".join(f"{f.name} = {toml_value(getattr(cfg, f.name))}\n" for f in dataclasses.fields(cfg)
                   if not f.metadata.get("derived"))
