"""Where every VM of a real run is at its end, read from the hosts' own listings and leases:
lost, duplicated, stray, or in flight (a pure reading; poll.py takes the readings).

A live migration hands a VM over in steps. The source lists it (as migrating out) until the
guest has left; the destination, which took a lease on it before the transfer, lists it as
migrating in once the source has let it go and asks it to verify the guest. Between the two
(the source's FinishIncoming on its way) no host lists the VM, but one holds its lease: it is in
flight, not lost. Hosts are read one after the other, so a migration that ends between two reads
can also show a VM twice or nowhere; only a reading taken while no host had a migration under
way is evidence (`Reading.quiet`), and poll.py asks for two alike before it calls a VM lost or
duplicated.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, Mapping


@dataclasses.dataclass(frozen=True)
class Census:
    lost: tuple[str, ...] = ()          # live, listed by no host and leased by none
    duplicated: tuple[str, ...] = ()    # listed by more than one host
    stray: tuple[str, ...] = ()         # listed, but the run never started it or stopped it
    in_flight: tuple[str, ...] = ()     # live, listed by no host, held by a lease (being verified)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.stray or self.in_flight)


@dataclasses.dataclass(frozen=True)
class Reading:
    """One pass over the hosts: each host's leases (read first) and listing, and whether any
    host had a migration leaving or arriving while it was read."""
    listed: Mapping[str, tuple[str, ...]]
    leased: Mapping[str, tuple[str, ...]]
    quiet: bool


def census(r: Reading, live: Iterable[str]) -> Census:
    live = set(live)
    holders = collections.Counter(n for names in r.listed.values() for n in names)
    held = {n for names in r.leased.values() for n in names}
    unlisted = sorted(n for n in live if holders[n] == 0)
    return Census(lost=tuple(n for n in unlisted if n not in held),
                  duplicated=tuple(sorted(n for n, k in holders.items() if k > 1)),
                  stray=tuple(sorted(n for n in holders if n not in live)),
                  in_flight=tuple(n for n in unlisted if n in held))


def settled(prev: Census | None, now: Census, quiet: bool) -> bool:
    """Whether *now* may be reported: a quiet reading that is clean, or that found the same
    faults as the quiet reading before it (a real loss stays; a read skew does not)."""
    return quiet and (now.clean or now == prev)
