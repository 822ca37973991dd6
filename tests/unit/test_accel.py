"""Accelerator choice (cellbed/cell/accel.py): KVM only where the CPU really offers vmx/svm and
/dev/kvm is not the kvm_pvm software hypervisor. Fake /proc/cpuinfo, /dev/kvm and
/sys/module in tmp_path."""

from __future__ import annotations

import os

import pytest

from cellbed.cell.accel import probe
from cellbed.domain.errors import FailedPrecondition, InvalidArgument

INTEL = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov vmx ssse3 sse4_1 sse4_2 avx"
AMD = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov svm sse4a avx"
NONE = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov hypervisor ssse3 avx"


def fake_host(tmp_path, flags: str | None, dev: bool, modules: tuple[str, ...] = ("kvm",)) -> dict:
    """Write a two-CPU cpuinfo, optionally a /dev/kvm node, and /sys/module/<m> dirs."""
    cpuinfo = tmp_path / "cpuinfo"
    if flags is not None:
        cpuinfo.write_text("".join(
            f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Fake CPU\n"
            f"flags\t\t: {flags}\nbugs\t\t: spectre_v1\n\n" for i in range(2)))
    kvm_dev = tmp_path / "dev-kvm"
    if dev:
        kvm_dev.write_text("")
    sys_module = tmp_path / "sys-module"
    sys_module.mkdir()
    for m in modules:
        (sys_module / m).mkdir()
    return dict(cpuinfo_path=str(cpuinfo), kvm_dev=str(kvm_dev), sys_module=str(sys_module))


# name, cpu flags (None = unreadable cpuinfo), /dev/kvm, modules, requested -> accel, words in reason
AUTO_CASES = [
    ("vmx + dev, no pvm", INTEL, True, ("kvm", "kvm_intel"), "auto", "kvm", ["vmx", "/dev/kvm"]),
    ("svm + dev, no pvm", AMD, True, ("kvm", "kvm_amd"), "auto", "kvm", ["svm"]),
    ("vmx + dev + kvm_pvm", INTEL, True, ("kvm", "kvm_pvm"), "auto", "tcg", ["kvm_pvm"]),
    ("no vmx/svm, pvm dev", NONE, True, ("kvm", "kvm_pvm"), "auto", "tcg", ["no vmx/svm", "kvm_pvm"]),
    ("no vmx/svm, no dev", NONE, False, (), "auto", "tcg", ["no vmx/svm", "no /dev/kvm"]),
    ("vmx, no dev", INTEL, False, (), "auto", "tcg", ["no /dev/kvm"]),
    ("cpuinfo unreadable", None, True, ("kvm",), "auto", "tcg", ["no vmx/svm"]),
    ("requested tcg on kvm host", INTEL, True, ("kvm", "kvm_intel"), "tcg", "tcg", ["requested tcg"]),
    ("requested kvm, usable", INTEL, True, ("kvm", "kvm_intel"), "kvm", "kvm", ["vmx"]),
]


@pytest.mark.parametrize(("flags", "dev", "modules", "requested", "accel", "words"),
                         [c[1:] for c in AUTO_CASES], ids=[c[0] for c in AUTO_CASES])
def test_probe(tmp_path, flags, dev, modules, requested, accel, words):
    choice = probe(requested, **fake_host(tmp_path, flags, dev, modules))
    assert choice.accel == accel, choice.reason
    for w in words:
        assert w in choice.reason, choice.reason


def test_vmx_flags_line_alone_does_not_count(tmp_path):
    # Newer kernels print a separate "vmx flags" line; only the "flags" line lists CPU features.
    paths = fake_host(tmp_path, NONE, True)
    with open(paths["cpuinfo_path"], "a") as f:
        f.write("vmx flags\t: vnmi preemption_timer invvpid ept_x_only\n")
    assert probe("auto", **paths).accel == "tcg"


@pytest.mark.parametrize(("flags", "dev", "modules", "why"), [
    (INTEL, True, ("kvm", "kvm_pvm"), "kvm_pvm"),
    (NONE, True, ("kvm",), "no vmx/svm"),
    (INTEL, False, (), "no /dev/kvm"),
], ids=["pvm", "no vmx", "no dev"])
def test_requested_kvm_when_unusable_fails(tmp_path, flags, dev, modules, why):
    with pytest.raises(FailedPrecondition) as ei:
        probe("kvm", **fake_host(tmp_path, flags, dev, modules))
    assert "accel=kvm" in str(ei.value) and why in str(ei.value)


@pytest.mark.parametrize("requested", ["", "KVM", "qemu", "hvf", "auto "])
def test_invalid_request(tmp_path, requested):
    with pytest.raises(InvalidArgument, match="allowed auto, kvm, tcg"):
        probe(requested, **fake_host(tmp_path, INTEL, True))


def test_this_machine():
    """On this project's machines /dev/kvm is kvm_pvm: the default probe must choose TCG."""
    if not os.path.exists("/sys/module/kvm_pvm"):
        pytest.skip("no /sys/module/kvm_pvm on this machine: nothing to assert about kvm_pvm")
    choice = probe()
    assert choice.accel == "tcg", choice.reason
    assert "kvm_pvm" in choice.reason
