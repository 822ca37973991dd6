"""The guest running on both ends after a failed migration (chaos seeds 4 and 5, kill_dst_libvirtd
at verification): the destination's libvirtd died after it resumed the guest and before its
answer reached the source, whose libvirt then resumed its own copy. Before, the source decided
while that libvirtd was down (FAILED, "VM still on source"), the destination refused to release
a lease whose guest ran there, and the two copies stayed: a duplicated VM and a leaked lease.
Now the source waits for that libvirtd, destroys the copy there and keeps its own; only if the
destroy fails is the record DUPLICATED, with the operator's hint. Fakes for libvirt and the peers."""
import asyncio
import types

from cellbed.daemon.journal import MigrationJournal, Outgoing, record_dict
from cellbed.daemon.reconcile import Reconciler
from cellbed.domain import errors
from cellbed.domain.vm import DomState
from cellbed.v1 import node_pb2 as npb

DEST_URI = "qemu+tls://10.231.26.11/system"


class Libvirts:
    """Both hosts' libvirts as the source sees them: *dest* is the destination's answers in turn
    (a state, or an error while its libvirtd restarts)."""

    def __init__(self, dest, destroy_fails: bool = False) -> None:
        self.dest, self.destroy_fails, self.destroyed = list(dest), destroy_fails, []

    async def ensure_open(self):
        return None

    async def locate(self, uuid, uri=""):
        if not uri:
            return DomState.RUNNING, "unpaused", False      # libvirt resumed the source's copy
        a = self.dest.pop(0) if len(self.dest) > 1 else self.dest[0]
        if isinstance(a, Exception):
            raise a
        return a, "migrated", False

    async def destroy_on(self, uuid, uri):
        if self.destroy_fails:
            raise errors.Unavailable(f"{uri}: connection refused")
        self.destroyed.append((uuid, uri))


class Peers:
    def __init__(self) -> None:
        self.released, self.records = [], []

    async def release_remote(self, dest, mid, name):
        self.released.append((dest, mid, name))

    def find(self, mid):
        return None

    def final(self, rec):
        self.records.append(rec)


def reconcile(tmp_path, hv) -> tuple[list, Peers, dict]:
    j = MigrationJournal(str(tmp_path))
    rec = npb.MigrationRecord(id="m1", vm="cv1", src="h2", dst="h1")
    j.intent(Outgoing(mid="m1", vm="cv1", uuid="u-1", peer="h1", peer_uri=DEST_URI, record=record_dict(rec),
                      boot_id="b1", phase="failed"))
    vm = types.SimpleNamespace(migrating_out="m1")
    state = types.SimpleNamespace(journal=j, unresolved={}, cfg=types.SimpleNamespace(host="h2"), vms={"cv1": vm})
    peers = Peers()
    r = Reconciler(state, hv, clock=None, transport=None, guests=None, history=peers, handover=peers, dest=None)

    async def rounds():
        out = []
        for _ in range(3):                     # as the source's settle loop asks again
            out.append(await r.reconcile_one("m1", budget_s=0.0))
            if out[-1] is not None:
                break
        return out
    return asyncio.run(rounds()), peers, {"vm": vm, "unresolved": state.unresolved}


def test_while_the_destinations_libvirtd_is_down_the_source_waits_then_destroys_the_copy_there(tmp_path):
    hv = Libvirts([errors.Unavailable("libvirtd restarting"), DomState.RUNNING])
    results, peers, st = reconcile(tmp_path, hv)
    assert results[0] is None and "cv1 -> h1" in st["unresolved"]["m1"]          # no verdict while down
    rec = results[-1]
    assert rec.outcome == npb.MIGRATION_OUTCOME_FAILED and not rec.hint
    assert "ran on h1 too" in rec.detail and "that copy was destroyed" in rec.detail and "VM still on source" in rec.detail
    assert hv.destroyed == [("u-1", DEST_URI)]
    assert peers.released == [("h1", "m1", "cv1")] and peers.records == [rec]
    assert st["vm"].migrating_out == ""


def test_if_the_copy_cannot_be_destroyed_the_record_is_duplicated_with_the_hint(tmp_path):
    hv = Libvirts([DomState.RUNNING], destroy_fails=True)
    results, peers, _ = reconcile(tmp_path, hv)
    rec = results[-1]
    assert rec.outcome == npb.MIGRATION_OUTCOME_DUPLICATED and "destroy the copy on h1" in rec.hint
    assert peers.records == [rec]


def test_a_stale_paused_copy_is_left_to_libvirt_and_the_guest_stays_here(tmp_path):
    hv = Libvirts([DomState.PAUSED])
    results, peers, _ = reconcile(tmp_path, hv)
    assert results[-1].outcome == npb.MIGRATION_OUTCOME_FAILED and hv.destroyed == []
