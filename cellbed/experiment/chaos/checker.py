"""The invariant checker of a fault-injection campaign (issue 12), in Jepsen's manner: a pure
function over what was observed, after each step and over the whole history.

An observation (`Snapshot`) is what the cell looked like at one instant, read from every source
that can disagree: each libvirtd's domains, each node daemon's listing, the guests' own checks,
the migration records, the reservations, and the processes, cgroups and namespaces found versus
those the cell recorded. `check(snapshot, expected_vms)` names every violation of:

- every VM runs in exactly one libvirt and is listed by exactly one daemon (the same host),
  and keeps its boot id;
- its heartbeat advanced since the previous snapshot, and no working-set page is bad;
- every migration has exactly one final record, whose outcome matches where the VM is;
- no reservation outlives its migration;
- nothing runs that the cell did not record.

`check_history(snapshots, expected_vms)` adds the checks that need two instants (heartbeats,
boot ids) and returns every violation, each naming the step, the VM or migration, and what was
seen. The campaign exits non-zero on any.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

SUCCEEDED = "succeeded"
ON_SOURCE = {"failed", "aborted", "verification_failed_on_source", "refused", "timeout"}


@dataclasses.dataclass(frozen=True)
class Domain:
    name: str
    uuid: str
    running: bool = True         # False: paused or shut off (a post-copy leftover, an incoming)


@dataclasses.dataclass(frozen=True)
class Guest:
    """The guest's own report: its boot id, heartbeat and pages that failed verification."""

    boot_id: str
    heartbeat: int
    bad_pages: int = 0


@dataclasses.dataclass(frozen=True)
class Record:
    id: str
    vm: str
    src: str
    dst: str
    outcome: str                 # "" while open; a MigrationOutcome name (lower case) when final
    final: bool = True
    start: float = 0.0           # when it was requested: only a VM's latest record says where it is now


@dataclasses.dataclass(frozen=True)
class Reservation:
    host: str
    vm: str
    migration_id: str


@dataclasses.dataclass
class Snapshot:
    step: str
    libvirt: dict[str, list[Domain]]                 # host -> domains libvirtd reports
    daemons: dict[str, list[str]]                    # host -> VM names the node daemon lists
    guests: dict[str, Guest] = dataclasses.field(default_factory=dict)
    records: list[Record] = dataclasses.field(default_factory=list)
    started: list[str] = dataclasses.field(default_factory=list)   # migration ids the campaign started
    reservations: list[Reservation] = dataclasses.field(default_factory=list)
    found: set[str] = dataclasses.field(default_factory=set)       # "qemu:<pid>", "cgroup:<path>", "netns:<n>"
    recorded: set[str] = dataclasses.field(default_factory=set)    # what the cell recorded of those kinds


@dataclasses.dataclass(frozen=True)
class Violation:
    step: str
    kind: str        # lost, duplicated, orphaned, unlisted, misplaced, missing_record, duplicate_record,
                     # outcome_contradicts_location, leaked_reservation, bad_pages, heartbeat_stalled,
                     # boot_id_changed, unrecorded_resource
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.step}] {self.kind}: {self.subject}: {self.detail}"


def _where(s: Snapshot) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    running: dict[str, list[str]] = {}
    for h, doms in s.libvirt.items():
        for d in doms:
            if d.running:
                running.setdefault(d.name, []).append(h)
    listed: dict[str, list[str]] = {}
    for h, vms in s.daemons.items():
        for v in vms:
            listed.setdefault(v, []).append(h)
    return running, listed


def outcome_unknown(call: str) -> bool:
    """A Megha submit whose answer did not come (``cellctl submit`` exit 1: UNAVAILABLE, a deadline,
    the GM killed mid-call): the GM may have passed the launch on, so its VM may appear later."""
    return str(call).startswith("rc 1:")


def check(s: Snapshot, expected_vms: Iterable[str], may_appear: Iterable[str] = ()) -> list[Violation]:
    """Every invariant that one observation can break. *may_appear*: VMs whose start was asked for
    with no answer (a submit cut off by a fault): absent, they are no violation; present (running
    or listed), they are checked like expected ones, never called orphans."""
    out: list[Violation] = []
    running, listed = _where(s)
    appeared = {vm for vm in may_appear if vm in running or vm in listed}
    expected_vms = set(expected_vms) | appeared

    def v(kind: str, subject: str, detail: str) -> None:
        out.append(Violation(s.step, kind, subject, detail))
    for vm in sorted(set(expected_vms)):
        r, ls = running.get(vm, []), listed.get(vm, [])
        if not r and not ls:
            v("lost", vm, "runs in no libvirt and no daemon lists it")
        if len(r) > 1:
            v("duplicated", vm, f"runs in the libvirt of {', '.join(sorted(r))}")
        if len(ls) > 1:
            v("duplicated", vm, f"listed by the daemons of {', '.join(sorted(ls))}")
        if len(r) == 1 and not ls:
            v("orphaned", vm, f"runs on {r[0]} but no daemon lists it")
        if len(ls) == 1 and not r:
            v("unlisted", vm, f"listed by {ls[0]} but runs in no libvirt")
        if len(r) == 1 and len(ls) == 1 and r != ls:
            v("misplaced", vm, f"runs on {r[0]}, listed by {ls[0]}")
        g = s.guests.get(vm)
        if g is not None and g.bad_pages:
            v("bad_pages", vm, f"{g.bad_pages} working-set page(s) lost their last generation")
    for vm in sorted(set(running) - set(expected_vms)):
        v("orphaned", vm, f"runs on {', '.join(sorted(running[vm]))} but the campaign never started it")
    out += _records(s, running)
    finals = {r.id for r in s.records if r.final}
    for res in s.reservations:
        if res.migration_id in finals:
            v("leaked_reservation", f"{res.host}/{res.vm}",
              f"reservation of migration {res.migration_id}, which has ended")
    for x in sorted(s.found - s.recorded):
        v("unrecorded_resource", x, "found, but the cell never recorded it")
    return out


def _records(s: Snapshot, running: dict[str, list[str]]) -> list[Violation]:
    out: list[Violation] = []
    by_id: dict[str, list[Record]] = {}
    for r in s.records:
        by_id.setdefault(r.id, []).append(r)
    latest: dict[str, Record] = {}
    for r in s.records:
        if r.final and (r.vm not in latest or r.start >= latest[r.vm].start):
            latest[r.vm] = r
    for mid in s.started:
        finals = [r for r in by_id.get(mid, []) if r.final]
        if not finals:
            out.append(Violation(s.step, "missing_record", mid, "the migration has no final record"))
        elif len(finals) > 1:
            out.append(Violation(s.step, "duplicate_record", mid,
                                 f"{len(finals)} final records: {', '.join(r.outcome for r in finals)}"))
        else:
            r = finals[0]
            at = running.get(r.vm, [])
            if latest.get(r.vm) is not r:
                continue     # a later migration moved the VM since: this record was true when written
            if r.outcome == "lost" and at:
                out.append(Violation(s.step, "outcome_contradicts_location", mid,
                                     f"record says lost but {r.vm} runs on {', '.join(sorted(at))}"))
            if len(at) != 1:
                continue     # lost or duplicated: reported once, by check()
            want = r.dst if r.outcome == SUCCEEDED else r.src if r.outcome in ON_SOURCE else None
            if want is not None and at[0] != want:
                out.append(Violation(s.step, "outcome_contradicts_location", mid,
                                     f"record says {r.outcome} ({r.src} -> {r.dst}) but {r.vm} runs on {at[0]}"))
    return out


def check_history(snapshots: list[Snapshot], expected_vms: Iterable[str],
                  may_appear: Iterable[str] = ()) -> list[Violation]:
    """check() at every step, plus what two consecutive steps reveal: a heartbeat that did not
    advance, a boot id that changed (the guest was restarted, not migrated)."""
    vms = list(expected_vms)
    maybe = list(may_appear)
    out: list[Violation] = []
    prev: Snapshot | None = None
    for s in snapshots:
        out += check(s, vms, maybe)
        if prev is not None:
            for vm in vms:
                a, b = prev.guests.get(vm), s.guests.get(vm)
                if a is None or b is None:
                    continue
                if a.boot_id != b.boot_id:
                    out.append(Violation(s.step, "boot_id_changed", vm, f"{a.boot_id} -> {b.boot_id}"))
                elif b.heartbeat <= a.heartbeat:
                    out.append(Violation(s.step, "heartbeat_stalled", vm,
                                         f"heartbeat {a.heartbeat} -> {b.heartbeat}"))
        prev = s
    return out
