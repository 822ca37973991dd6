"""Reconciliation of an open migration (issue 12): where the domain is decides how the journal
entry ends. Pure: the daemon (daemon/reconcile.py) observes both libvirts and acts.

The source owns the one final record. For each open outgoing entry it looks up the domain by
UUID on its own libvirt and on the destination's, and ``decide`` says what happened:

========================  =============================  ==================================
source domain             destination domain             decision
========================  =============================  ==================================
a job still running       any                            WAIT (libvirt is still migrating)
libvirtd unreachable      any                            WAIT
running                   running                        DUPLICATED (the copy there is destroyed)
running                   absent, paused, shut off       ON_SOURCE (FAILED or ABORTED)
running                   libvirtd unreachable           WAIT (it may have resumed the guest)
paused: post-copy (failed) paused: post-copy (failed)    POSTCOPY_RECOVER, once; then POSTCOPY_FAILED
paused (other)            running                        ON_DEST (verify there)
paused (other)            absent, paused, shut off       ON_SOURCE, resume the guest here
paused (other)            libvirtd unreachable           WAIT
absent or shut off        running or paused              ON_DEST (verify there)
absent or shut off        absent or shut off             LOST (named; operator hint)
absent or shut off        libvirtd unreachable           WAIT
========================  =============================  ==================================

ON_DEST asks the destination daemon to verify the guest (FinishIncoming, idempotent): the
record says SUCCEEDED only if the guest is alive and intact there.

The guest runs on both ends when the destination's libvirtd dies after it resumed the guest but
before its answer reached the source, whose libvirt then resumes its own copy (libvirt's
peer-to-peer handshake cannot tell the two apart). The source's copy is kept (libvirt's verdict:
the migration failed), the destination's is destroyed, and the record says FAILED with both
copies named; only if that destroy fails is the outcome DUPLICATED, with the operator's hint. So a
running source never concludes while the destination's libvirtd does not answer.
"""
from __future__ import annotations

import dataclasses
import enum


class Where(enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"
    POSTCOPY = "post-copy"          # paused or running in post-copy, or post-copy failed
    ABSENT = "absent"               # no such domain, or defined but shut off
    UNKNOWN = "unknown"             # that libvirtd does not answer


@dataclasses.dataclass(frozen=True)
class Seen:
    where: Where
    job: bool = False               # an outgoing migration job is still running (source only)
    detail: str = ""


class Decision(enum.Enum):
    WAIT = "wait"
    ON_SOURCE = "on_source"
    ON_DEST = "on_dest"
    POSTCOPY_RECOVER = "postcopy_recover"
    POSTCOPY_FAILED = "postcopy_failed"
    DUPLICATED = "duplicated"
    LOST = "lost"


HINTS = {
    Decision.POSTCOPY_FAILED: "post-copy was interrupted: the guest is paused on {src} and {dst}, and neither holds "
                              "all of its memory; recover with `virsh migrate --postcopy --postcopy-resume` from "
                              "{src}, or destroy both and restart the VM",
    Decision.DUPLICATED: "the guest runs on both {src} and {dst}: destroy the copy on {dst} (the source's state is "
                         "the one Cellbed kept) and check the guest",
    Decision.LOST: "the guest runs in neither libvirt ({src}: {src_detail}; {dst}: {dst_detail}): its QEMU died; "
                   "restart the VM from its spec",
    Decision.WAIT: "libvirtd on {who} does not answer; the migration is reconciled when it is back",
}


def decide(src: Seen, dst: Seen, postcopy_resume_tried: bool = False) -> Decision:
    if src.job or src.where is Where.UNKNOWN:
        return Decision.WAIT
    if src.where is Where.RUNNING:
        if dst.where is Where.UNKNOWN:
            return Decision.WAIT
        return Decision.DUPLICATED if dst.where is Where.RUNNING else Decision.ON_SOURCE
    if src.where is Where.POSTCOPY or dst.where is Where.POSTCOPY:
        if dst.where is Where.RUNNING:
            return Decision.ON_DEST
        if dst.where is Where.UNKNOWN:
            return Decision.WAIT
        if src.where is Where.ABSENT and dst.where is Where.ABSENT:
            return Decision.LOST
        return Decision.POSTCOPY_FAILED if postcopy_resume_tried else Decision.POSTCOPY_RECOVER
    if dst.where is Where.UNKNOWN:
        return Decision.WAIT
    if src.where is Where.PAUSED:
        return Decision.ON_DEST if dst.where is Where.RUNNING else Decision.ON_SOURCE
    # the source has no live domain
    if dst.where in (Where.RUNNING, Where.PAUSED):
        return Decision.ON_DEST
    return Decision.LOST


def hint(d: Decision, src: str, dst: str, s: Seen, t: Seen) -> str:
    if d is Decision.WAIT:
        who = [h for h, x in ((src, s), (dst, t)) if x.where is Where.UNKNOWN]
        return HINTS[d].format(who=" and ".join(who)) if who else ""
    tmpl = HINTS.get(d)
    return tmpl.format(src=src, dst=dst, src_detail=s.detail or s.where.value,
                       dst_detail=t.detail or t.where.value) if tmpl else ""


@dataclasses.dataclass(frozen=True)
class LeaseDecision:
    release: bool = False
    adopt: bool = False
    why: str = ""


def decide_lease(here: Seen, expired: bool, source_has_it: bool | None) -> LeaseDecision:
    """The destination's side, for an open reservation: *here* is the domain on this host,
    *source_has_it* whether the source daemon answered without listing the VM as migrating out
    (it has it back, or the guest is gone; None: it does not answer). The source owns the record; the destination only releases a lease whose migration
    cannot be in flight, and adopts a guest that landed here once the lease expires."""
    if here.where in (Where.ABSENT,):
        if source_has_it:
            return LeaseDecision(release=True, why="its source is not migrating the VM any more; the migration ended "
                                                   "without this host")
        if expired:
            return LeaseDecision(release=True, why="lease expired and no domain arrived")
        return LeaseDecision()
    if here.where is Where.RUNNING and expired:
        return LeaseDecision(adopt=True, why="lease expired with the guest running here: adopted")
    return LeaseDecision()
