"""Choose the accelerator: KVM only where the CPU really offers vmx/svm.

On this project's own machines /dev/kvm is provided by kvm_pvm, a software nested
hypervisor on which stock kernels never finish booting; so the presence of the device
node proves nothing (reference/single-box-facts.md).
"""
from __future__ import annotations

import dataclasses
import os
import re
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.errors import FailedPrecondition


@dataclasses.dataclass(frozen=True)
class AccelChoice:
    accel: str  # "kvm" or "tcg"
    reason: str


def probe(requested: str = "auto", *, cpuinfo_path: str = "/proc/cpuinfo",
          kvm_dev: str = "/dev/kvm", sys_module: str = "/sys/module") -> AccelChoice:
    """Return the accelerator to use for *requested* in {"auto", "kvm", "tcg"}."""
    if requested not in ("auto", "kvm", "tcg"):
        raise InvalidArgument(f"accel={requested!r}: allowed auto, kvm, tcg")
    if requested == "tcg":
        return AccelChoice("tcg", "requested tcg")
    try:
        with open(cpuinfo_path) as f:
            flags = set()
            for line in f:
                if line.startswith("flags"):
                    flags.update(re.split(r"\s+", line.split(":", 1)[1].strip()))
    except OSError:
        flags = set()
    hw = bool(flags & {"vmx", "svm"})
    pvm = os.path.exists(os.path.join(sys_module, "kvm_pvm"))
    dev = os.path.exists(kvm_dev)
    if hw and dev and not pvm:
        return AccelChoice("kvm", "cpu has " + ("vmx" if "vmx" in flags else "svm") + " and /dev/kvm exists")
    why = []
    if not hw:
        why.append("no vmx/svm in cpuinfo")
    if pvm:
        why.append("/dev/kvm is kvm_pvm (software, cannot boot stock kernels)")
    if not dev:
        why.append("no /dev/kvm")
    if requested == "kvm":
        raise FailedPrecondition("accel=kvm requested but KVM is unusable: " + "; ".join(why))
    return AccelChoice("tcg", "fell back to TCG: " + "; ".join(why))
