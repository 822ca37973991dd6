"""Which folder a run may write into (`cellctl run --out`), checked before anything is written.

- a new folder, or an empty one: yes;
- a previous run (it holds a results manifest or events.jsonl): only with ``overwrite``, and then
  every file that a run, its report or its profile wrote is removed first, so no old report or
  plot is left beside the new data; anything else the user put there stays;
- a file, or a folder that holds other things (say, a ``ticks.csv`` of somebody else's): never.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from cellbed.domain.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from cellbed.experiment.results.files import ALLOCATIONS, EVENTS, MANIFEST, MIGRATIONS, RESULTS_FORMAT, SANS, TICKS, VMS

# Every file a run writes into its folder: the results (DESIGN §12), the report of one run
# (cellbed/experiment/report/write.py) and a profile window (cellbed/experiment/profiling.py).
RUN_FILES = (MANIFEST, MANIFEST + ".tmp", EVENTS, TICKS, MIGRATIONS, ALLOCATIONS, VMS, SANS,
             "report.md", "summary.json", "asr.png", "overloaded.png", "migrations.png", "alloc_cdf.png",
             "profile.pstats", "profile.txt", "profile.json")


def is_previous_run(path: Path) -> bool:
    """A folder that `cellctl run` wrote: its manifest names the results format, or (a run that
    died before its manifest was complete) it has events.jsonl beside a manifest."""
    m = path / MANIFEST
    if m.is_file():
        try:
            return json.loads(m.read_text()).get("format") == RESULTS_FORMAT
        except (OSError, ValueError, AttributeError):
            return (path / EVENTS).is_file()
    return False


def prepare(out: str | Path, overwrite: bool) -> Path:
    """Check *out* as a results folder (see the module docstring) and, for an allowed overwrite,
    clear the previous run's files. Returns the folder as a Path; creates nothing."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InvalidArgument(f"--out {path}: is a file; give a new or empty folder")
    if not path.exists():
        parent = path.resolve().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise FailedPrecondition(f"--out {path}: cannot create it ({parent} is not a writable folder)")
        return path
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        return path
    if not is_previous_run(path):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise FailedPrecondition(f"--out {path}: holds files that are not a Cellbed run ({shown}); "
                                 "give a new or empty folder")
    if not overwrite:
        raise AlreadyExists(f"--out {path}: already holds a run ({MANIFEST}); choose another --out, "
                            "or give --overwrite to replace it")
    for name in RUN_FILES:
        f = path / name
        if f.is_file() or f.is_symlink():
            f.unlink()
    return path
