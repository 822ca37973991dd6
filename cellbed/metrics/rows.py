"""TEMPORARY shim until the row types move here (issue 11)."""
from cellbed.experiment.results import AllocationRow, MigrationRow, TickRow  # noqa: F401
