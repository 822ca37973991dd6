"""The libvirt domain XML of a Cellbed guest (DESIGN §5, §6): parsed back with
xml.etree so every assertion is about structure, not string layout."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from cellbed.daemon.domxml import (
    CHANNEL_NAME,
    METADATA_NS,
    DomainLayout,
    GuestImage,
    domain_xml,
)
from cellbed.domain.vm import VmSpec

IMAGE = GuestImage(kernel="/srv/guest/vmlinuz", initrd="/srv/guest/initrd.img")
LAYOUT = DomainLayout(channel_dir="/run/cb/channel", console_dir="/run/cb/console")
SPEC = VmSpec(name="vm-1", mem_mib=256, vcpus=2, cpu_load=0.25, wss_mib=100, dirty_mib_s=12.5,
              production=True, priority=9, req_cpu_cores=1.5, created_unix_s=1700000000.5)


def build(spec: VmSpec = SPEC, accel: str = "tcg", **kw) -> ET.Element:
    return ET.fromstring(domain_xml(spec, accel=accel, image=IMAGE, layout=LAYOUT, **kw))


def cmdline_params(root: ET.Element) -> dict[str, str]:
    words = root.findtext("os/cmdline").split()
    return dict(w.split("=", 1) for w in words if "=" in w)


@pytest.mark.parametrize(("accel", "dtype"), [("tcg", "qemu"), ("kvm", "kvm")])
def test_domain_type_follows_accel(accel, dtype):
    assert build(accel=accel).get("type") == dtype


@pytest.mark.parametrize("accel", ["", "auto", "KVM", "hvf", "xen"])
def test_invalid_accel_raises_value_error_naming_allowed(accel):
    with pytest.raises(ValueError, match="allowed tcg, kvm"):
        domain_xml(SPEC, accel=accel, image=IMAGE, layout=LAYOUT)


def test_name_memory_vcpus():
    root = build()
    assert root.findtext("name") == "vm-1"
    mem = root.find("memory")
    assert mem.get("unit") == "MiB"
    assert int(mem.text) == 256
    assert int(root.findtext("vcpu")) == 2


def test_direct_kernel_boot_and_no_disk():
    root = build()
    assert root.findtext("os/kernel") == IMAGE.kernel
    assert root.findtext("os/initrd") == IMAGE.initrd
    # no storage at all: a live migration never needs storage migration
    assert root.findall("devices/disk") == []
    assert root.findall("devices/filesystem") == []
    assert root.findall(".//boot") == []


# Kubernetes-style table: what the guest's workload program reads from the command line.
CMDLINE = [
    # name, spec workload (cpu, wss, dirty), expected cb.* values
    ("idle", (0.0, 0, 0.0), {"cb.cpu": "0", "cb.wss": "0", "cb.dirty": "0"}),
    ("fractional", (0.25, 100, 12.5), {"cb.cpu": "0.25", "cb.wss": "100", "cb.dirty": "12.5"}),
    ("full cpu", (1.0, 48, 1.0), {"cb.cpu": "1", "cb.wss": "48", "cb.dirty": "1"}),
    ("dirty max", (0.5, 32, math.inf), {"cb.cpu": "0.5", "cb.wss": "32", "cb.dirty": "max"}),
    ("upper dirty bound", (0.5, 32, 65536.0), {"cb.cpu": "0.5", "cb.wss": "32", "cb.dirty": "65536"}),
]


@pytest.mark.parametrize(("cpu", "wss", "dirty", "want"), [c[1] + (c[2],) for c in CMDLINE],
                         ids=[c[0] for c in CMDLINE])
def test_cmdline_carries_workload(cpu, wss, dirty, want):
    spec = VmSpec(name="w", mem_mib=256, cpu_load=cpu, wss_mib=wss, dirty_mib_s=dirty).validate()
    params = cmdline_params(build(spec))
    for k, v in want.items():
        assert params[k] == v, (k, params)
    # the serial console is the only console
    assert params["console"] == "ttyS0"


def test_crash_is_preserved_with_isa_pvpanic():
    root = build()
    assert root.findtext("on_crash") == "preserve"
    panics = root.findall("devices/panic")
    assert [p.get("model") for p in panics] == ["isa"]


def test_control_channel_is_virtio_named_and_at_layout_path():
    root = build()
    channels = root.findall("devices/channel")
    assert len(channels) == 1
    ch = channels[0]
    assert ch.get("type") == "unix"
    assert ch.find("target").get("type") == "virtio"
    assert ch.find("target").get("name") == CHANNEL_NAME == "org.cellbed.ctl"
    src = ch.find("source")
    assert src.get("mode") == "bind"
    assert src.get("path") == LAYOUT.channel_path("vm-1") == "/run/cb/channel/vm-1.ctl"


def test_metadata_round_trips_spec():
    root = build()
    md = root.find("metadata")
    children = list(md)
    assert len(children) == 1
    vm = children[0]
    assert vm.tag == f"{{{METADATA_NS}}}vm"
    assert METADATA_NS == "urn:cellbed:vm:1"
    assert VmSpec.from_json(vm.text) == SPEC


def test_metadata_round_trips_infinite_dirty_rate():
    spec = VmSpec(name="hot", dirty_mib_s=math.inf)
    vm = build(spec).find(f"metadata/{{{METADATA_NS}}}vm")
    back = VmSpec.from_json(vm.text)
    assert math.isinf(back.dirty_mib_s) and back.dirty_mib_s > 0
    assert back == spec


@pytest.mark.parametrize(("accel", "tb_cache"), [("tcg", "64"), ("kvm", None)])
def test_tb_cache_only_under_tcg(accel, tb_cache):
    root = build(accel=accel)
    el = root.find("features/tcg/tb-cache")
    if tb_cache is None:
        assert el is None
        assert root.find(".//tb-cache") is None
    else:
        assert el is not None and el.text == tb_cache and el.get("unit") == "MiB"


def test_tb_cache_size_is_configurable():
    assert build(tb_cache_mib=256).findtext("features/tcg/tb-cache") == "256"


CPU = [
    # accel, cpu_model, expected cpu mode, expected model text
    ("tcg", None, "custom", "qemu64"),
    ("tcg", "Skylake-Client", "custom", "Skylake-Client"),
    ("kvm", None, "host-model", None),
    ("kvm", "Skylake-Client", "custom", "Skylake-Client"),
]


@pytest.mark.parametrize(("accel", "model", "mode", "text"), CPU)
def test_cpu_model(accel, model, mode, text):
    cpu = build(accel=accel, cpu_model=model).find("cpu")
    assert cpu.get("mode") == mode
    assert cpu.findtext("model") == text


def test_serial_console_goes_to_layout_console_path():
    root = build()
    serial = root.find("devices/serial")
    assert serial.find("source").get("path") == LAYOUT.console_path("vm-1")
