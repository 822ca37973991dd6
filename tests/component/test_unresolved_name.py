"""A VM whose migration from this host has no final record yet (its journal entry is open: the
destination did not answer, or a crash came between the steps) may be running on the
destination. Until reconciliation writes the record, the source says so for calls about the
VM (FAILED_PRECONDITION, not NOT_FOUND) and starts no second VM of that name. Real node daemon
over in-process gRPC, with a fake hypervisor that can say where the domain is."""
from __future__ import annotations

from cellbed.daemon.journal import MigrationJournal, Outgoing, record_dict
from cellbed.domain import errors
from cellbed.v1 import node_pb2 as npb
from tests.component.test_node_servicer import FakeHypervisor, host_state, make_node, raises, vm_pb  # noqa: F401 (fixture)


class LocatingHypervisor(FakeHypervisor):
    """Answers reconciliation's "where is this domain": here from its domains, on the peer
    UNAVAILABLE (its libvirtd does not answer) until ``peer_answers``, then absent."""

    peer_answers = False

    async def ensure_open(self) -> None:
        pass

    async def locate(self, uuid: str, uri: str = ""):
        if uri and not self.peer_answers:
            raise errors.Unavailable(f"libvirtd at {uri} does not answer")
        d = None if uri else next((d for d in self.domains.values() if d.name == "v"), None)
        return (None, "no domain with that uuid", False) if d is None else (d.state, d.reason, False)


async def starts(node, name: str) -> bool:
    """StartVm *name* reached the hypervisor (no guest listens behind this fake, so the start
    then times out waiting for its workload and is undone, as a failed boot is)."""
    try:
        await node.client.call("StartVm", npb.StartVmRequest(spec=vm_pb(name)))
    except errors.DeadlineExceeded as e:
        assert "did not answer" in str(e), e
    return ("start", name) in node.hv.calls


async def test_a_vm_whose_migration_is_unresolved_cannot_start_again_and_is_not_called_absent(make_node, tmp_path):
    state = tmp_path / "node0" / "state"           # make_node's first daemon keeps its journal here
    state.mkdir(parents=True)
    MigrationJournal(str(state)).intent(Outgoing(
        mid="m1", vm="v", uuid="6f1b0000-0000-4000-8000-000000000001", peer="h2", peer_uri="qemu+tls://h2/system",
        record=record_dict(npb.MigrationRecord(id="m1", vm="v", src="h1", dst="h2")), phase="transferred"))
    node = await make_node(hv_class=LocatingHypervisor)

    stop = await raises(node, errors.FailedPrecondition, "StopVm", npb.StopVmRequest(name="v"))
    start = await raises(node, errors.FailedPrecondition, "StartVm", npb.StartVmRequest(spec=vm_pb("v")))
    assert "migration m1 from host h1 to h2 is not resolved" in stop and "does not answer" in stop, stop
    assert "cannot start here until then" in start, start
    assert node.hv.calls == []                     # nothing was started, nothing stopped
    assert [u.split(":")[0] for u in (await host_state(node)).unresolved] == ["m1"]
    assert await starts(node, "w")                 # other names are started as before

    node.hv.peer_answers = True                    # absent on both ends: reconciliation writes LOST
    await node.agent.reconcile()
    assert [(r.id, npb.MigrationOutcome.Name(r.outcome)) for r in node.agent.records] == [
        ("m1", "MIGRATION_OUTCOME_LOST")]
    assert "not on host h1" in await raises(node, errors.NotFound, "StopVm", npb.StopVmRequest(name="v"))
    assert await starts(node, "v")                 # the record is written: the name is free
