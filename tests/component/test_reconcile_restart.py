"""A node daemon restarted with open journal entries finishes them before it serves (README, "When
something crashes mid-migration"): an outgoing migration whose guest is still running here ends
in one FAILED record marked reconciled, with the VM kept and no longer migrating; a lease whose
guest never arrived, and whose source no longer migrates it, is released and journaled so. Real
node daemon over in-process gRPC, with a fake hypervisor that can say where the domain is (its
peer, h2, is this same daemon)."""
from __future__ import annotations

import time

from cellbed.daemon.journal import Incoming, MigrationJournal, Outgoing, record_dict, spec_dict
from cellbed.domain.vm import DomainSample, DomState, VmSpec
from cellbed.v1 import node_pb2 as npb
from tests.component.test_node_servicer import host_state, make_node  # noqa: F401 (fixture)
from tests.component.test_unresolved_name import LocatingHypervisor

V = VmSpec(name="v", mem_mib=256, vcpus=1, cpu_load=0.2)
W = VmSpec(name="w", mem_mib=128, vcpus=1, cpu_load=0.1)


class BothAnswer(LocatingHypervisor):
    peer_answers = True          # the peer's libvirtd answers: v is not there


async def test_a_restart_finishes_the_open_migration_on_its_source_and_releases_a_stale_lease(make_node, tmp_path):
    state = tmp_path / "node0" / "state"           # make_node's first daemon keeps its journal here
    state.mkdir(parents=True)
    j = MigrationJournal(str(state))
    j.intent(Outgoing(mid="m1", vm="v", uuid="6f1b0000-0000-4000-8000-000000000001", peer="h2",
                      peer_uri="qemu+tls://h2/system", record=record_dict(npb.MigrationRecord(
                          id="m1", vm="v", src="h1", dst="h2", detail="interrupted")), phase="intent"))
    j.reserve(Incoming(mid="m2", spec=spec_dict(W), src="h2", expires_unix_s=time.time() + 600))
    node = await make_node(domains=[DomainSample("v", DomState.RUNNING, "booted", V)], hv_class=BothAnswer)

    recs = [(r.id, npb.MigrationOutcome.Name(r.outcome), r.reconciled) for r in node.agent.records]
    assert recs == [("m1", "MIGRATION_OUTCOME_FAILED", True)]
    assert "interrupted; reconciled from where the domain was found (journal at intent)" in node.agent.records[0].detail
    assert "VM still on source (running (booted))" in node.agent.records[0].detail
    vms = (await node.client.call("ListVms", npb.ListVmsRequest())).vms
    assert [(v.spec.name, npb.VmState.Name(v.state)) for v in vms] == [("v", "VM_STATE_RUNNING")]
    hs = await host_state(node)
    assert (list(hs.leases), list(hs.unresolved), hs.migrations_in) == ([], [], 0)
    again = MigrationJournal(str(state))
    again.load()
    assert (again.outgoing, again.incoming) == ({}, {})
    assert again.results["m2"]["verified"] is False
    assert "source is not migrating the VM any more" in again.results["m2"]["detail"]
    assert ("stop", "v") not in node.hv.calls        # the VM that did not leave is kept
