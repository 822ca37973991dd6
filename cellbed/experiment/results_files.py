"""The files of a results folder (DESIGN §12) and the error for a run that did not complete."""
from __future__ import annotations

from cellbed.domain.errors import FailedPrecondition


RESULTS_FORMAT = "cellbed-results/1"
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
TICKS = "ticks.csv"
MIGRATIONS = "migrations.csv"
ALLOCATIONS = "allocations.csv"
RUN_COMPLETED = "run_completed"


class IncompleteRun(FailedPrecondition):
    """A results folder without ``run_completed`` at the end of events.jsonl."""
