"""A fault-injection campaign's seeded schedule (issue 12), pure: which operation each step runs
(a live migration, a SAN round or a Megha launch), which fault it gets and at which phase.

With at least as many steps as fault kinds, every kind is drawn at least once: the kinds are
dealt round-robin from a seeded shuffle, the phases likewise, so a short campaign covers
everything and a long one covers each kind × phase pair evenly.
"""
from __future__ import annotations

import dataclasses
import random

from cellbed.domain.errors import FailedPrecondition, InvalidArgument

PHASES = ("before_transfer", "precopy", "switchover", "verification", "after_completion")
MIGRATION_FAULTS = ("kill_src_daemon", "kill_dst_daemon", "kill_src_libvirtd", "kill_dst_libvirtd",
                    "kill_incoming_qemu", "kill_outgoing_qemu", "link_cut", "throttle", "netem_loss", "netem_delay")
NETEM = ("netem_loss", "netem_delay")
SAN_FAULTS = ("kill_broker", "kill_mosquitto", "kill_dst_daemon")
MEGHA_FAULTS = ("kill_active_lm", "kill_gm")
FAULTS = {"migration": MIGRATION_FAULTS, "san": SAN_FAULTS, "megha": MEGHA_FAULTS}
# where in its operation a fault can land (a SAN round's and a launch's faults hit its start)
PHASES_OF = {"migration": PHASES, "san": ("negotiation", "precopy"), "megha": ("launch",)}
# a QEMU exists only in some phases: the incoming one from the transfer on (after completion it is
# the guest itself), the outgoing one until the switch-over
FAULT_PHASES = {"kill_incoming_qemu": ("precopy", "switchover", "after_completion"),
                "kill_outgoing_qemu": ("before_transfer", "precopy", "switchover")}
MAX_STEPS = 10_000


@dataclasses.dataclass(frozen=True)
class Step:
    index: int
    op: str            # migration | san | megha
    fault: str
    phase: str


def parse_faults(text: str, ops: list[str], missing: dict[str, str] | None = None) -> dict[str, tuple[str, ...]]:
    """``--faults a,b`` restricted to the chosen operations; "" = all of them, except those
    *missing* names (fault -> why this box cannot inject it), which are refused if asked for."""
    missing = missing or {}
    allowed = {f for op in ops for f in FAULTS[op]}
    if not text:
        return {op: tuple(f for f in FAULTS[op] if f not in missing) for op in ops}
    want = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in want if f not in allowed]
    if bad or not want:
        raise InvalidArgument(f"--faults {','.join(bad) or text!r}: allowed {', '.join(sorted(allowed))}")
    for f in want:
        if f in missing:
            raise FailedPrecondition(f"--faults {f}: {missing[f]}")
    out = {op: tuple(f for f in FAULTS[op] if f in want) for op in ops}
    return {op: fs for op, fs in out.items() if fs}


def schedule(counts: dict[str, int], faults: dict[str, tuple[str, ...]], seed: int) -> list[Step]:
    """*counts*: steps per operation ({"migration": 100, "san": 30, ...}). Steps of different
    operations are interleaved in a seeded order."""
    for op, n in counts.items():
        if op not in FAULTS:
            raise InvalidArgument(f"operation {op!r}: allowed {', '.join(FAULTS)}")
        if not 0 <= n <= MAX_STEPS:
            raise InvalidArgument(f"--{op}s={n}: allowed 0..{MAX_STEPS}")
    if sum(counts.values()) < 1:
        raise InvalidArgument("-n: allowed 1.." + str(MAX_STEPS) + " steps in all (got 0)")
    rng = random.Random(seed)
    ops: list[tuple[str, str, str]] = []
    for op, n in counts.items():
        kinds = list(faults.get(op, ()))
        if n and not kinds:
            raise InvalidArgument(f"--faults: none of the chosen faults applies to {op} steps")
        phases = list(PHASES_OF[op])
        rng.shuffle(kinds)
        rng.shuffle(phases)
        for i in range(n):
            # kinds cycle fastest; phases advance once per full cycle, so kind x phase pairs spread out
            kind = kinds[i % len(kinds)]
            ph = [p for p in phases if p in FAULT_PHASES.get(kind, phases)]
            ops.append((op, kind, ph[(i // len(kinds)) % len(ph)]))
    rng.shuffle(ops)
    return [Step(i, op, fault, phase) for i, (op, fault, phase) in enumerate(ops)]
