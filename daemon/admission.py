"""A node's admission: does a VM fit on this host (a start, or an incoming migration)?

The rule is a policy, ``AdmissionPolicy(spec, view, force)``: it reads the host's read-only view
(daemon/host_view.py) and raises FailedPrecondition, with the numbers, unless *spec* fits. The
assembly (cellbed/assembly.py) picks it from ``NodeConfig.admission`` with
:func:`admission_policy` and hands it to the agent; the agent's :class:`Admission` applies it,
one decision at a time.

- ``requested``: the requests of the VMs here and on their way in, plus *spec*'s, fit the capacity;
- ``used`` (overcommitted cells, MASB): their measured use plus *spec*'s request fits, and
  production VMs' requests fit on their own (production is not overcommitted).

Either way a VM's constraints must match the host's attributes first, and a forced migration
(MASB) is held against total capacity only.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from cellbed.daemon.host_view import HostView
from cellbed.domain import errors
from cellbed.domain.constraints import constraints_match
from cellbed.domain.vm import VmSpec

AdmissionPolicy = Callable[[VmSpec, HostView, bool], None]
"""(spec, host view, force) -> None, or FailedPrecondition saying why the VM does not fit."""


def _constraints_and_force(spec: VmSpec, view: HostView, force: bool) -> bool:
    """The checks every rule starts with; True when they decided (a forced migration that fits)."""
    cap_cpu, cap_mem = view.capacity
    attributes = view.attributes
    if spec.constraints and not constraints_match(spec.constraints, attributes):
        bad = [c for c in spec.constraints if not c.matches(attributes)]
        raise errors.FailedPrecondition(
            f"{view.host}: VM {spec.name} constraint(s) not met: "
            + ", ".join(f"{c.attribute} {c.op.name} {c.value!r} (host has "
                        f"{attributes.get(c.attribute)!r})" for c in bad))
    if force:  # MASB forced migration: against total capacity only
        if spec.mem_mib > cap_mem or spec.requested_cpu > cap_cpu + 1e-9:
            raise errors.FailedPrecondition(
                f"{view.host}: VM {spec.name} ({spec.mem_mib} MiB, {spec.requested_cpu:.2f} cores) "
                f"exceeds total capacity ({cap_mem} MiB, {cap_cpu:.2f} cores)")
        return True
    return False


def admit_requested(spec: VmSpec, view: HostView, force: bool = False) -> None:
    """Σ requests (here and incoming) + *spec*'s request ≤ capacity."""
    if _constraints_and_force(spec, view, force):
        return
    cap_cpu, cap_mem = view.capacity
    cpu, mem = view.allocated()
    if mem + spec.mem_mib > cap_mem:
        raise errors.FailedPrecondition(
            f"{view.host}: memory {mem} + {spec.mem_mib} MiB > capacity {cap_mem} MiB")
    if cpu + spec.requested_cpu > cap_cpu + 1e-9:
        raise errors.FailedPrecondition(
            f"{view.host}: requested CPU {cpu:.2f} + {spec.requested_cpu:.2f} cores > capacity {cap_cpu:.2f} cores")


def admit_used(spec: VmSpec, view: HostView, force: bool = False) -> None:
    """Σ measured use (here and incoming) + *spec*'s request ≤ capacity; production requests fit."""
    if _constraints_and_force(spec, view, force):
        return
    cap_cpu, cap_mem = view.capacity
    cpu_u, mem_u = view.used()
    if mem_u + spec.mem_mib > cap_mem or cpu_u + spec.requested_cpu > cap_cpu + 1e-9:
        raise errors.FailedPrecondition(
            f"{view.host}: used {cpu_u:.2f} cores / {mem_u:.0f} MiB + requested "
            f"{spec.requested_cpu:.2f} cores / {spec.mem_mib} MiB > capacity {cap_cpu:.2f} cores / "
            f"{cap_mem} MiB")
    if spec.production:   # production is not overcommitted: its requests must fit
        vms, incoming = view.vms.values(), view.incoming.values()
        pc = sum(e.spec.requested_cpu for e in vms if e.spec.production)
        pm = sum(e.spec.mem_mib for e in vms if e.spec.production)
        pc += sum(r.spec.requested_cpu for r in incoming if r.spec.production)
        pm += sum(r.spec.mem_mib for r in incoming if r.spec.production)
        if pm + spec.mem_mib > cap_mem or pc + spec.requested_cpu > cap_cpu + 1e-9:
            raise errors.FailedPrecondition(
                f"{view.host}: production requests {pc:.2f} cores / {pm} MiB + {spec.requested_cpu:.2f} / "
                f"{spec.mem_mib} MiB > capacity {cap_cpu:.2f} cores / {cap_mem} MiB")


POLICIES: dict[str, AdmissionPolicy] = {"requested": admit_requested, "used": admit_used}


def admission_policy(mode: str) -> AdmissionPolicy:
    """The rule named by ``NodeConfig.admission``."""
    try:
        return POLICIES[mode]
    except KeyError:
        raise errors.InvalidArgument(f"admission={mode!r}: allowed {', '.join(POLICIES)}") from None


class Admission:
    """The door every VM comes in by (a start, a reservation for an incoming migration): one
    decision at a time. A caller holds :attr:`lock` across its own checks, :meth:`admit` and the
    change to the inventory that follows, with no await between, so that the first request wins."""

    def __init__(self, view: HostView, policy: AdmissionPolicy) -> None:
        self._view = view
        self._policy = policy
        self.lock = asyncio.Lock()

    def admit(self, spec: VmSpec, force: bool = False) -> None:
        self._policy(spec, self._view, force)
