"""The chaos campaign's schedule (issue 12): seeded, every kind at least once, phases that exist."""
import collections

import pytest

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.experiment.chaos.plan import FAULT_PHASES, FAULTS, parse_faults, schedule


def test_every_kind_is_drawn_once_the_campaign_is_long_enough_and_the_schedule_is_seeded():
    counts = {"migration": len(FAULTS["migration"]), "san": 3, "megha": 2}
    steps = schedule(counts, parse_faults("", list(counts)), seed=5)
    assert collections.Counter(s.op for s in steps) == collections.Counter(counts)
    assert {s.fault for s in steps} == {f for op in counts for f in FAULTS[op]}
    assert steps == schedule(counts, parse_faults("", list(counts)), seed=5)
    assert steps != schedule(counts, parse_faults("", list(counts)), seed=6)


def test_a_qemu_is_killed_only_in_a_phase_where_it_exists():
    steps = schedule({"migration": 200}, parse_faults("", ["migration"]), seed=1)
    for s in steps:
        assert s.phase in FAULT_PHASES.get(s.fault, (s.phase,)), s
    pairs = collections.Counter((s.fault, s.phase) for s in steps if s.fault == "link_cut")
    assert len(pairs) == 5                  # a long campaign covers every phase of a kind


@pytest.mark.parametrize("text,ops,err,match", [
    ("bogus", ["migration"], InvalidArgument, "allowed kill_dst_daemon"),
    ("kill_broker", ["migration"], InvalidArgument, "allowed"),          # a SAN fault without SAN steps
    (",", ["migration"], InvalidArgument, "allowed"),
])
def test_bad_fault_lists_are_refused_naming_the_allowed_values(text, ops, err, match):
    with pytest.raises(err, match=match):
        parse_faults(text, ops)


def test_a_fault_this_kernel_cannot_inject_is_skipped_by_default_and_refused_when_asked():
    missing = {"netem_loss": "no netem", "netem_delay": "no netem"}
    assert "netem_loss" not in parse_faults("", ["migration"], missing)["migration"]
    with pytest.raises(FailedPrecondition, match="netem_loss: no netem"):
        parse_faults("netem_loss", ["migration"], missing)


def test_step_counts_are_checked():
    with pytest.raises(InvalidArgument, match="allowed 1"):
        schedule({"migration": 0}, parse_faults("", ["migration"]), 1)
    with pytest.raises(InvalidArgument, match="allowed 0..10000"):
        schedule({"migration": 10_001}, parse_faults("", ["migration"]), 1)
