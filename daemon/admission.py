"""A node's admission: does a VM fit on this host (a start, or an incoming migration)?

The rule is the ``admission`` stage's policy (DESIGN §17; built-ins ``requested`` and ``used`` in
cellbed/policy/builtin/node.py, or a plugin), resolved by the assembly from the policy book and
handed to the agent. This module is the mechanism around it: the host's constraints first (R3,
always the node's own check), then the policy on the host's numbers (R4); a refusal is
FailedPrecondition with the policy's numbers, and so is a failing plugin (the VM is not admitted).

- ``requested``: the requests of the VMs here and on their way in, plus *spec*'s, fit the capacity;
- ``used`` (overcommitted cells, MASB): their measured use plus *spec*'s request fits, and
  production VMs' requests fit on their own (production is not overcommitted).

A forced migration (MASB) is held against total capacity only.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from cellbed.daemon.host_view import HostView
from cellbed.domain import errors
from cellbed.domain.constraints import constraints_match
from cellbed.domain.vm import VmSpec
from cellbed.policy.api import NodeUse, VmDemand

AdmissionPolicy = Callable[[VmSpec, HostView, bool], None]
"""(spec, host view, force) -> None, or FailedPrecondition saying why the VM does not fit."""


def check_constraints(spec: VmSpec, view: HostView) -> None:
    attributes = view.attributes
    if spec.constraints and not constraints_match(spec.constraints, attributes):
        bad = [c for c in spec.constraints if not c.matches(attributes)]
        raise errors.FailedPrecondition(
            f"{view.host}: VM {spec.name} constraint(s) not met: "
            + ", ".join(f"{c.attribute} {c.op.name} {c.value!r} (host has "
                        f"{attributes.get(c.attribute)!r})" for c in bad))


def node_use(view: HostView) -> NodeUse:
    """The host's numbers as the admission stage reads them (one pass for use and requests)."""
    _, _, cu, mu, cr, mr = view.totals()
    pc, pm = 0.0, 0
    for e in view.vms.values():
        if e.spec.production:
            pc += e.spec.requested_cpu
            pm += e.spec.mem_mib
    for r in view.incoming.values():
        if r.spec.production:
            pc += r.spec.requested_cpu
            pm += r.spec.mem_mib
    return NodeUse(view.host, view.capacity, (cr, mr), (cu, mu), (pc, pm), view.attributes)


def staged(policy: Callable) -> AdmissionPolicy:
    """The node's admission around the stage's *policy*: constraints, then the policy's answer."""
    def admit(spec: VmSpec, view: HostView, force: bool = False) -> None:
        check_constraints(spec, view)
        vm = VmDemand(spec.name, (spec.requested_cpu, spec.mem_mib), spec.production, tuple(spec.constraints))
        ans = policy(node_use(view), vm, force)
        if not ans.accepted:
            raise errors.FailedPrecondition(ans.detail or f"{view.host}: VM {spec.name} refused ({ans.reason})")
    return admit


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
