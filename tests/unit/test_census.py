"""The end-of-run census of a real run (cellbed/experiment/real/census.py): each row plants what the
hosts listed and leased, and names what must be found. A VM that its source has let go and its
destination has not yet been asked to verify is listed by no host but leased by one: in flight,
never lost."""
import pytest

from cellbed.experiment.real.census import Census, Reading, census, settled

LIVE = ("a", "b")

# name, listed per host, leased per host, what the census must say
ROWS = [
    ("each VM once", {"h1": ("a",), "h2": ("b",)}, {}, Census()),
    ("a lost", {"h1": (), "h2": ("b",)}, {}, Census(lost=("a",))),
    ("a let go by h1, not yet verifying on h2", {"h1": (), "h2": ("b",)}, {"h2": ("a",)}, Census(in_flight=("a",))),
    ("a verifying on h2", {"h1": (), "h2": ("b", "a")}, {"h2": ("a",)}, Census()),
    # a lease while the source still lists it (the transfer): one holder, nothing to say
    ("a leaving h1 for h2", {"h1": ("a",), "h2": ("b",)}, {"h2": ("a",)}, Census()),
    ("b twice", {"h1": ("a", "b"), "h2": ("b",)}, {}, Census(duplicated=("b",))),
    ("c never started", {"h1": ("a", "c"), "h2": ("b",)}, {}, Census(stray=("c",))),
    ("everything at once", {"h1": ("b", "c"), "h2": ("b",)}, {"h1": ("x",)},
     Census(lost=("a",), duplicated=("b",), stray=("c",))),
]


@pytest.mark.parametrize(("listed", "leased", "want"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_census_table(listed, leased, want):
    assert census(Reading(listed, leased, quiet=True), LIVE) == want


def test_a_lease_on_a_vm_the_run_does_not_know_is_not_in_flight():
    c = census(Reading({"h1": ("a", "b")}, {"h2": ("zz",)}, True), LIVE)
    assert c.clean and c.in_flight == ()


LOST = Census(lost=("a",))
# prev, now, quiet reading, may it be reported
SETTLED = [
    ("clean and quiet", None, Census(), True, True),
    ("clean while a migration ran", None, Census(), False, False),
    ("a fault seen once", None, LOST, True, False),          # maybe a read skew: read again
    ("the same fault twice", LOST, LOST, True, True),         # a real loss stays
    ("another fault the second time", Census(duplicated=("b",)), LOST, True, False),
    ("the same fault, but not quiet", LOST, LOST, False, False),
    ("in flight is not settled", None, Census(in_flight=("a",)), True, False),
]


@pytest.mark.parametrize(("prev", "now", "quiet", "want"), [r[1:] for r in SETTLED], ids=[r[0] for r in SETTLED])
def test_settled_table(prev, now, quiet, want):
    assert settled(prev, now, quiet) is want
