"""The files of a results folder (DESIGN §12) and the error for a run that did not complete."""
from __future__ import annotations

from cellbed.domain.errors import FailedPrecondition


RESULTS_FORMAT = "cellbed-results/1"
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
TICKS = "ticks.csv"
MIGRATIONS = "migrations.csv"
ALLOCATIONS = "allocations.csv"
VMS = "vms.csv"
SANS = "san.csv"
"""A real cell's finished SAN rounds, with the time of each step after the overload (cellbed/metrics/san_timing.py)."""
"""A real cell's per-VM samples, one row per VM per tick (what the model twin's guest overhead is
fitted from: cellbed/experiment/twin/fit.py)."""
RUN_COMPLETED = "run_completed"


class IncompleteRun(FailedPrecondition):
    """A results folder without ``run_completed`` at the end of events.jsonl."""
