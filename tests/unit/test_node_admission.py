"""The node's admission (daemon/admission.py) around the ``admission`` stage's built-ins
(``requested``, ``used``), as the assembly hands them to a NodeAgent: the host's constraints, then
the policy on the host's read-only view; a refusal carries the numbers."""
import pytest

from cellbed.daemon.admission import staged
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.host_view import HostView
from cellbed.daemon.inventory import Reservation, VmEntry
from cellbed.domain import errors
from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.domain.vm import VmSpec


def host(*, production: bool = False) -> HostView:
    """2 cores, 1024 MiB. Here: a VM requesting 1.5 cores and 512 MiB that uses 0.2 cores and 100
    MiB; arriving: one requesting 0.25 cores and 256 MiB that uses 0.1 cores and 50 MiB."""
    cfg = NodeConfig(host="h1", cpu_cores=2.0, mem_mib=1024, attributes={"rack": "r7"})
    vms = {"a": VmEntry(spec=VmSpec(name="a", mem_mib=512, vcpus=2, cpu_load=0.75, production=production),
                        cpu_used_cores=0.2, rss_mib=100.0)}
    incoming = {"m1": Reservation(VmSpec(name="b", mem_mib=256, vcpus=1, cpu_load=0.25), "h2", 99.0,
                                  cpu_used=0.1, mem_used=50.0)}
    return HostView(cfg, vms, incoming)


admit_requested = staged(PolicyBook().get("admission", "requested"))
admit_used = staged(PolicyBook().get("admission", "used"))


def refusal(rule, spec: VmSpec, view: HostView, force: bool = False) -> str:
    with pytest.raises(errors.FailedPrecondition) as ei:
        rule(spec, view, force)
    return str(ei.value)


def test_requested_counts_the_requests_here_and_arriving():
    view = host()
    admit_requested(VmSpec(name="c", mem_mib=256, vcpus=1, cpu_load=0.25), view)    # 1.75 + 0.25 cores, 1024 MiB
    assert refusal(admit_requested, VmSpec(name="c", mem_mib=256, vcpus=1, cpu_load=0.5), view) == (
        "h1: requested CPU 1.75 + 0.50 cores > capacity 2.00 cores")
    assert refusal(admit_requested, VmSpec(name="c", mem_mib=384, vcpus=1, cpu_load=0.1), view) == (
        "h1: memory 768 + 384 MiB > capacity 1024 MiB")


def test_used_counts_the_use_and_keeps_production_requests_within_capacity():
    spec = VmSpec(name="c", mem_mib=256, vcpus=1, cpu_load=1.0)                       # 1 core, 256 MiB
    admit_used(spec, host())                           # 0.3 + 1 cores, 150 + 256 MiB used: fits
    assert "requested CPU 1.75 + 1.00" in refusal(admit_requested, spec, host())      # by requests it does not
    assert refusal(admit_used, VmSpec(name="c", mem_mib=900, vcpus=1, cpu_load=0.5), host()) == (
        "h1: used 0.30 cores / 150 MiB + requested 0.50 cores / 900 MiB > capacity 2.00 cores / 1024 MiB")
    prod = VmSpec(name="c", mem_mib=256, vcpus=1, cpu_load=1.0, production=True)
    admit_used(prod, host(production=False))           # no other production VM here
    assert refusal(admit_used, prod, host(production=True)) == (
        "h1: production requests 1.50 cores / 512 MiB + 1.00 / 256 MiB > capacity 2.00 cores / 1024 MiB")


@pytest.mark.parametrize("rule", [admit_requested, admit_used])
def test_constraints_first_and_a_forced_migration_only_against_total_capacity(rule):
    view = host(production=True)
    wrong_rack = VmSpec(name="c", constraints=(Constraint("rack", ConstraintOp.EQUAL, "r1"),))
    assert refusal(rule, wrong_rack, view, force=True) == (
        "h1: VM c constraint(s) not met: rack EQUAL 'r1' (host has 'r7')")
    big = VmSpec(name="c", mem_mib=1024, vcpus=2, cpu_load=1.0, production=True)
    rule(big, view, True)                              # the host's total capacity holds it
    assert refusal(rule, VmSpec(name="c", mem_mib=2048, vcpus=1), view, force=True) == (
        "h1: VM c (2048 MiB, 0.10 cores) exceeds total capacity (1024 MiB, 2.00 cores)")


def test_a_plugin_that_fails_refuses_the_vm_with_one_line(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("def admit(node, vm, forced):\n    return 1 / 0\n")
    sp = PolicyBook().get("admission", f"{p}:admit")
    with pytest.raises(errors.FailedPrecondition) as ei:
        staged(sp)(VmSpec(name="c"), host(), False)
    assert "policy admission" in str(ei.value) and "ZeroDivisionError" in str(ei.value)
    assert sp.acc.errors == 1
