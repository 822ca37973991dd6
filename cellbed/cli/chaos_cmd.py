"""``cellctl chaos``: a seeded fault-injection campaign on a real cell (cellbed/experiment/chaos/campaign.py)."""
from __future__ import annotations

import fcntl
import os
import time

from cellbed.cell import cell as cellmod
from cellbed.domain import errors
from cellbed.experiment.chaos import report as chaos_report
from cellbed.experiment.chaos.campaign import Campaign
from cellbed.experiment.chaos import faults
from cellbed.experiment.chaos.plan import NETEM, parse_faults, schedule

OWN_FILES = ("chaos.jsonl", "summary.txt", "manifest.json", "timeline.png")


def _out(args) -> str:
    out = args.out or os.path.join("results", f"chaos-{args.cell}-{args.seed}")
    if os.path.isfile(out):
        raise errors.InvalidArgument(f"--out {out}: is a file; give a folder")
    if os.path.isdir(out) and os.listdir(out):
        mine = os.path.exists(os.path.join(out, "chaos.jsonl"))
        if not mine:
            raise errors.InvalidArgument(f"--out {out}: holds files that are not a chaos campaign's; give another folder")
        if not args.overwrite:
            raise errors.AlreadyExists(f"--out {out}: a previous campaign is there; give --overwrite to replace it")
        for f in OWN_FILES:
            if os.path.exists(os.path.join(out, f)):
                os.remove(os.path.join(out, f))
    return out


async def cmd_chaos(args) -> None:
    counts = {"migration": args.migrations, "san": args.san, "megha": args.megha}
    ops = [op for op, n in counts.items() if n]
    if not ops:
        raise errors.InvalidArgument("-n/--san/--megha: allowed 1..10000 steps in all (got 0)")
    parse_faults(args.faults, ops)                      # bad names are refused before the cell is looked at
    st = cellmod.load_state(args.cell, args.state_root)
    if st is None:
        raise errors.FailedPrecondition(f"cell {args.cell!r} is not up (nothing under {args.state_root}): "
                                        f"run `cellctl --cell {args.cell} cell up` first")
    why = faults.netem_missing(st) if "migration" in ops else ""
    missing = {f: why for f in NETEM} if why else {}
    steps = schedule({op: counts[op] for op in ops}, parse_faults(args.faults, ops, missing), args.seed)
    if missing and not args.faults:
        print(f"cellctl chaos: skipping {', '.join(NETEM)}: {why}")
    if args.san and "broker" not in st:
        raise errors.FailedPrecondition(f"--san {args.san}: cell {args.cell!r} runs no broker (cell up --san)")
    if args.megha and "megha" not in st:
        raise errors.FailedPrecondition(f"--megha {args.megha}: cell {args.cell!r} runs no Megha (cell up --megha)")
    lock = open(os.path.join(cellmod.state_dir(args.cell, args.state_root), "chaos.lock"), "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        raise errors.FailedPrecondition(f"another chaos campaign runs on cell {args.cell!r} "
                                        f"({lock.read().strip() or 'pid unknown'}): wait for it or stop it") from None
    lock.truncate(0)
    lock.write(f"pid {os.getpid()}\n")
    lock.flush()
    out = _out(args)
    camp = Campaign(args.cell, args.state_root, out, args.seed, vms=args.vms)
    manifest = {"cell": args.cell, "seed": args.seed, "counts": counts, "faults": args.faults or "all",
                "skipped": missing,
                "started_unix_s": time.time()}
    rows = await camp.run(steps)
    manifest["finished_unix_s"] = time.time()
    manifest["steps_run"] = len(rows)
    if camp.stopped_after:
        manifest["stopped_after_step"] = camp.stopped_after   # the cell did not settle after it
    print(chaos_report.write(out, rows, manifest))
    print(f"results in {out}")
    if camp.violations:
        raise SystemExit(1)
