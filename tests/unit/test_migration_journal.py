"""The crash-safe store, the migration journal and the reconciliation table (issue 12)."""
import json

import pytest

from cellbed.daemon.journal import Incoming, MigrationJournal, Outgoing
from cellbed.policy.migration.reconcile import Decision, Seen, Where, decide, decide_lease, hint
from cellbed.runtime.jsonl import JsonlStore, StoreCorrupt

R, P, PC, A, U = Where.RUNNING, Where.PAUSED, Where.POSTCOPY, Where.ABSENT, Where.UNKNOWN


# --- the store ------------------------------------------------------------------------------
def test_torn_last_line_is_dropped_and_the_next_append_starts_a_fresh_line(tmp_path):
    p = tmp_path / "s.jsonl"
    s = JsonlStore(str(p))
    s.append({"a": 1})
    with open(p, "ab") as f:
        f.write(b'{"a": 2, "b"')            # a crash in the middle of an append
    assert s.read() == [{"a": 1}] and s.torn == 1
    s.append({"a": 3})
    assert JsonlStore(str(p)).read() == [{"a": 1}, {"a": 3}]


def test_a_bad_line_that_is_not_the_last_is_corruption_and_named(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    with pytest.raises(StoreCorrupt, match=r"s.jsonl:2"):
        JsonlStore(str(p)).read()


def test_a_last_line_that_lost_only_its_newline_is_kept_and_ended(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}')
    s = JsonlStore(str(p))
    assert s.read() == [{"a": 1}, {"a": 2}] and s.torn == 0
    s.append({"a": 3})
    assert s.read() == [{"a": 1}, {"a": 2}, {"a": 3}]


# --- the journal ----------------------------------------------------------------------------
def out(mid="m1", vm="v1"):
    return Outgoing(mid=mid, vm=vm, uuid="u-" + mid, peer="h2", peer_uri="qemu+tls://h2/system",
                    record={"id": mid, "vm": vm}, boot_id="b1")


def test_journal_keeps_open_entries_across_a_restart_and_compacts_the_closed_ones(tmp_path):
    j = MigrationJournal(str(tmp_path))
    j.intent(out("m1"))
    j.step("m1", "transferred", record={"id": "m1", "vm": "v1", "data_total_bytes": "5"})
    j.intent(out("m2", "v2"))
    j.close("m2", "MIGRATION_OUTCOME_FAILED")
    j.reserve(Incoming(mid="m3", spec={"name": "v3"}, src="h1", expires_unix_s=100.0))
    j.reserve(Incoming(mid="m4", spec={"name": "v4"}, src="h1", expires_unix_s=100.0))
    j.finish("m4", "verified", {"verified": True, "detail": "ok", "heartbeat_after": 7,
                                "integrity_pages": 1, "integrity_bad": 0})
    k = MigrationJournal(str(tmp_path))
    k.load()                                          # a restarted daemon
    assert list(k.outgoing) == ["m1"] and k.outgoing["m1"].phase == "transferred"
    assert k.outgoing["m1"].record["data_total_bytes"] == "5"
    assert list(k.incoming) == ["m3"] and k.incoming["m3"].src == "h1"
    assert k.results["m4"]["heartbeat_after"] == 7    # a repeated FinishIncoming gets the same answer
    lines = [json.loads(x) for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert len(lines) == 3                             # compacted: m1, m3 and m4's result
    again = MigrationJournal(str(tmp_path))
    again.load()
    assert (list(again.outgoing), list(again.incoming), list(again.results)) == (["m1"], ["m3"], ["m4"])


def test_a_journal_without_a_folder_is_disabled(tmp_path):
    j = MigrationJournal("")
    j.intent(out())
    assert not j.enabled and not j.outgoing


# --- reconciliation: where the domain is decides ----------------------------------------------
@pytest.mark.parametrize("src,dst,tried,want", [
    (Seen(R, job=True), Seen(P), False, Decision.WAIT),          # libvirt still migrating it
    (Seen(U), Seen(R), False, Decision.WAIT),                    # our libvirtd is down
    (Seen(R), Seen(A), False, Decision.ON_SOURCE),
    (Seen(R), Seen(P), False, Decision.ON_SOURCE),               # a stale incoming copy: libvirt drops it
    (Seen(R), Seen(U), False, Decision.WAIT),                    # it may have resumed the guest too (seed 4)
    (Seen(R), Seen(R), False, Decision.DUPLICATED),
    (Seen(P), Seen(R), False, Decision.ON_DEST),                 # switched over; our paused copy is stale
    (Seen(P), Seen(A), False, Decision.ON_SOURCE),               # resume it here
    (Seen(P), Seen(U), False, Decision.WAIT),
    (Seen(A), Seen(R), False, Decision.ON_DEST),
    (Seen(A), Seen(P), False, Decision.ON_DEST),                 # verification says whether it lives
    (Seen(A), Seen(A), False, Decision.LOST),
    (Seen(A), Seen(U), False, Decision.WAIT),
    (Seen(PC), Seen(PC), False, Decision.POSTCOPY_RECOVER),
    (Seen(PC), Seen(PC), True, Decision.POSTCOPY_FAILED),
    (Seen(PC), Seen(R), False, Decision.ON_DEST),
    (Seen(A), Seen(PC), True, Decision.POSTCOPY_FAILED),
])
def test_decision_table(src, dst, tried, want):
    assert decide(src, dst, tried) is want


def test_unrepairable_outcomes_carry_a_hint_naming_the_hosts():
    h = hint(Decision.LOST, "h1", "h2", Seen(A, detail="shut off (crashed)"), Seen(A, detail="no such domain"))
    assert "h1: shut off (crashed)" in h and "h2: no such domain" in h
    assert "h1 and h2" in hint(Decision.WAIT, "h1", "h2", Seen(U), Seen(U))
    assert "postcopy-resume" in hint(Decision.POSTCOPY_FAILED, "h1", "h2", Seen(PC), Seen(PC))


@pytest.mark.parametrize("here,expired,source_has_it,release,adopt", [
    (Seen(A), False, True, True, False),      # the VM is back on its source: the lease goes
    (Seen(A), False, None, False, False),     # the source does not answer: keep it until expiry
    (Seen(A), False, False, False, False),    # the source is still migrating it
    (Seen(A), True, None, True, False),
    (Seen(P), True, None, False, False),      # an incoming copy: libvirt is still at it
    (Seen(R), False, None, False, False),     # landed: the source's FinishIncoming verifies it
    (Seen(R), True, None, False, True),       # landed and nobody came: verify and adopt
])
def test_lease_table(here, expired, source_has_it, release, adopt):
    d = decide_lease(here, expired, source_has_it)
    assert (d.release, d.adopt) == (release, adopt)
