"""NodeConfig (daemon/config.py): TOML into a typed, validated dataclass; bad config fails
with a message naming the key (DESIGN §13)."""

from __future__ import annotations

import dataclasses

import pytest

from cellbed.daemon.config import NodeConfig, to_toml
from cellbed.domain.errors import InvalidArgument

FULL = NodeConfig(
    host="h2", address="10.231.0.12", grpc_port=50051, libvirt_uri="qemu:///system",
    migration_uri_template="qemu+tcp://{address}/system", cpu_cores=0.5, mem_mib=1536, cpu_norm=0.25,
    mem_norm=0.75, accel="kvm", cpu_model="Skylake-Client", guest_dir="/srv/guest",
    state_dir="/var/lib/cellbed/cells/c1/h2/node", peers_file="/var/lib/cellbed/cells/c1/peers.json",
    cgroup="cellbed/c1/h2", monitor_period_s=2.5, boot_timeout_s=60.0, verify_timeout_s=15.0,
    migration_timeout_s=0.0, measure_dirty_rate=False, mqtt_host="10.231.0.1", mqtt_port=1884, cell="c1",
    admission="used", measure_daemon=False, poll_guests=False, attributes={"attr03": 1, "rack": "r7"},
    policy={"overload": "masb", "errors": "isolate", "params": {"overload": {"max_util": 0.8}}},
)


def write(tmp_path, text: str) -> str:
    p = tmp_path / "node.toml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("cfg", [FULL, NodeConfig(host="h1")], ids=["every key set", "defaults"])
def test_toml_round_trip(tmp_path, cfg):
    text = to_toml(cfg)
    # every field is written, once
    keys = [line.split(" = ", 1)[0] for line in text.splitlines()]
    assert keys == [f.name for f in dataclasses.fields(NodeConfig) if not f.metadata.get("derived")]
    assert NodeConfig.load(write(tmp_path, text)) == cfg


def test_load_minimal_file_uses_defaults(tmp_path):
    cfg = NodeConfig.load(write(tmp_path, 'host = "h7"\nmem_mib = 2048\n'))
    assert cfg == NodeConfig(host="h7", mem_mib=2048)


@pytest.mark.parametrize("keys", [["grpc_prot"], ["colour", "mem_mb"]])
def test_unknown_key_is_named(tmp_path, keys):
    path = write(tmp_path, 'host = "h1"\n' + "".join(f"{k} = 1\n" for k in keys))
    with pytest.raises(InvalidArgument) as ei:
        NodeConfig.load(path)
    msg = str(ei.value)
    assert f"unknown key(s) {', '.join(sorted(keys))}" in msg, msg
    assert path in msg
    assert "grpc_port" in msg  # the allowed keys are listed


# key, value in TOML, range text that must appear; everything else at its default
RANGES = [
    ("grpc_port", "-1", "0..65535"),
    ("grpc_port", "65536", "0..65535"),
    ("cpu_cores", "0.005", "0.01..1024"),
    ("cpu_cores", "1025.0", "0.01..1024"),
    ("mem_mib", "63", "64..16777216"),            # 16 × 1024 × 1024 MiB = 16 TiB
    ("monitor_period_s", "0.05", "0.1..3600"),
    ("boot_timeout_s", "0.5", "1..3600"),
    ("verify_timeout_s", "3601.0", "1..3600"),
    ("migration_timeout_s", "-1.0", "0..3600"),
    ("migration_timeout_s", "nan", "0..3600"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), RANGES)
def test_out_of_range_names_key(tmp_path, key, value, allowed):
    with pytest.raises(InvalidArgument) as ei:
        NodeConfig.load(write(tmp_path, f'host = "h1"\n{key} = {value}\n'))
    msg = str(ei.value)
    assert msg.startswith(f"{key}="), msg
    assert f"allowed {allowed}" in msg, msg


BOUNDS_OK = [
    ("grpc_port", "0"), ("grpc_port", "65535"), ("cpu_cores", "0.01"), ("cpu_cores", "1024"),
    ("mem_mib", "64"), ("monitor_period_s", "0.1"), ("migration_timeout_s", "0"), ("verify_timeout_s", "3600"),
]


@pytest.mark.parametrize(("key", "value"), BOUNDS_OK)
def test_bounds_are_inclusive(tmp_path, key, value):
    cfg = NodeConfig.load(write(tmp_path, f'host = "h1"\n{key} = {value}\n'))
    assert getattr(cfg, key) == float(value)


def test_accel_is_named(tmp_path):
    with pytest.raises(InvalidArgument, match=r"accel='auto': allowed tcg, kvm"):
        NodeConfig.load(write(tmp_path, 'host = "h1"\naccel = "auto"\n'))


def test_empty_host_is_named(tmp_path):
    with pytest.raises(InvalidArgument, match="host must be set"):
        NodeConfig.load(write(tmp_path, 'host = ""\n'))


def test_missing_host_is_invalid_argument(tmp_path):
    with pytest.raises(InvalidArgument, match="host"):
        NodeConfig.load(write(tmp_path, "mem_mib = 1024\n"))


def test_wrong_type_names_key(tmp_path):
    with pytest.raises(InvalidArgument, match="grpc_port"):
        NodeConfig.load(write(tmp_path, 'host = "h1"\ngrpc_port = "50051"\n'))


def test_toml_round_trip_escapes_strings(tmp_path):
    cfg = NodeConfig(host="h1", guest_dir='/srv/odd "dir"\\guest')
    assert NodeConfig.load(write(tmp_path, to_toml(cfg))) == cfg
