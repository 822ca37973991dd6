"""Pure builder of the libvirt domain XML for a Cellbed guest (no libvirt import).

Direct kernel boot with no disk, so a live migration needs no storage migration; a
virtio-serial control channel for the workload program; pvpanic with on_crash=preserve
so a panicked guest shows as "crashed (panicked)".
"""
from __future__ import annotations

import dataclasses
import math
import os
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

from cellbed.domain.vm import VmSpec

METADATA_NS = "urn:cellbed:vm:1"
METADATA_PREFIX = "cb"
CHANNEL_NAME = "org.cellbed.ctl"


@dataclasses.dataclass(frozen=True)
class GuestImage:
    kernel: str
    initrd: str


@dataclasses.dataclass(frozen=True)
class DomainLayout:
    """Where a host keeps per-domain files; identical paths on every host, so that a
    migrated domain's XML is valid on the destination too."""

    channel_dir: str = "/var/lib/libvirt/qemu/channel/cellbed"
    console_dir: str = "/var/log/libvirt/qemu"

    def channel_path(self, name: str) -> str:
        return os.path.join(self.channel_dir, f"{name}.ctl")

    def console_path(self, name: str) -> str:
        return os.path.join(self.console_dir, f"{name}.console.log")


def kernel_cmdline(spec: VmSpec) -> str:
    dirty = "max" if math.isinf(spec.dirty_mib_s) else f"{spec.dirty_mib_s:g}"
    return (f"console=ttyS0 quiet panic=0 cb.cpu={spec.cpu_load:g} cb.wss={spec.wss_mib} "
            f"cb.dirty={dirty}")


def metadata_xml(spec: VmSpec) -> str:
    return f'<vm xmlns="{METADATA_NS}">{escape(spec.to_json())}</vm>'


def domain_xml(spec: VmSpec, *, accel: str, image: GuestImage, layout: DomainLayout,
               cpu_model: str | None = None, tb_cache_mib: int = 64,
               emulator: str = "/usr/bin/qemu-system-x86_64") -> str:
    """Return the domain XML. accel "tcg" -> type='qemu' (CPU qemu64 by default, small
    translation-block cache); "kvm" -> type='kvm' with host-model unless cpu_model is set."""
    if accel not in ("tcg", "kvm"):
        raise ValueError(f"accel={accel!r}: allowed tcg, kvm")
    dtype = "qemu" if accel == "tcg" else "kvm"
    if accel == "tcg":
        cpu = (f"<cpu mode='custom' match='exact' check='none'>"
               f"<model fallback='forbid'>{escape(cpu_model or 'qemu64')}</model></cpu>")
        tcg = f"<tcg><tb-cache unit='MiB'>{int(tb_cache_mib)}</tb-cache></tcg>"
    else:
        cpu = ("<cpu mode='host-model' check='partial'/>" if not cpu_model else
               f"<cpu mode='custom' match='exact'><model fallback='forbid'>{escape(cpu_model)}</model></cpu>")
        tcg = ""
    return f"""<domain type='{dtype}'>
  <name>{escape(spec.name)}</name>
  <memory unit='MiB'>{int(spec.mem_mib)}</memory>
  <vcpu>{int(spec.vcpus)}</vcpu>
  <metadata>
    <{METADATA_PREFIX}:vm xmlns:{METADATA_PREFIX}="{METADATA_NS}">{escape(spec.to_json())}</{METADATA_PREFIX}:vm>
  </metadata>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{escape(image.kernel)}</kernel>
    <initrd>{escape(image.initrd)}</initrd>
    <cmdline>{escape(kernel_cmdline(spec))}</cmdline>
  </os>
  <features><acpi/>{tcg}</features>
  {cpu}
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>preserve</on_crash>
  <devices>
    <emulator>{escape(emulator)}</emulator>
    <serial type='file'>
      <source path='{escape(layout.console_path(spec.name))}' append='on'/>
      <target port='0'/>
    </serial>
    <channel type='unix'>
      <source mode='bind' path='{escape(layout.channel_path(spec.name))}'/>
      <target type='virtio' name='{CHANNEL_NAME}'/>
    </channel>
    <panic model='isa'/>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def spec_from_metadata(xml: str) -> VmSpec:
    """The VmSpec in a domain's Cellbed metadata element (ValueError, TypeError or ParseError if unreadable)."""
    return VmSpec.from_json(ET.fromstring(xml).text or "")
