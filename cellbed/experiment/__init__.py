"""Experiment I/O: scenario files, the results folder, and the report (DESIGN §10.4, §12).

* :mod:`~cellbed.experiment.scenario` — the scenario TOML as typed, validated dataclasses,
  with ``--set key=value`` overrides and the resolved manifest;
* :mod:`~cellbed.experiment.results` — :class:`ResultsWriter` (streams manifest.json,
  events.jsonl, ticks.csv, migrations.csv, allocations.csv) and :func:`load_run`, which
  refuses runs without ``run_completed``;
* :mod:`~cellbed.experiment.report` — ``report.md`` with PNG plots for one run, or
  side-by-side tables for several (matplotlib is imported only when plotting).
"""

from cellbed.experiment.report import Summary, summarize, write_report
from cellbed.experiment.results import (
    ALLOCATION_COLUMNS,
    MIGRATION_COLUMNS,
    TICK_COLUMNS,
    AllocationRow,
    IncompleteRun,
    MigrationRow,
    ResultsWriter,
    Run,
    TickRow,
    build_manifest,
    git_revision,
    load_run,
    runtime_versions,
)
from cellbed.experiment.scenario import (
    FRONTENDS,
    Scenario,
    apply_overrides,
    load_scenario,
    parse_scenario,
    schema_docs,
)


__all__ = [
    "ALLOCATION_COLUMNS",
    "AllocationRow",
    "FRONTENDS",
    "IncompleteRun",
    "MIGRATION_COLUMNS",
    "MigrationRow",
    "ResultsWriter",
    "Run",
    "Scenario",
    "Summary",
    "TICK_COLUMNS",
    "TickRow",
    "apply_overrides",
    "build_manifest",
    "git_revision",
    "load_run",
    "load_scenario",
    "parse_scenario",
    "runtime_versions",
    "schema_docs",
    "summarize",
    "write_report",
]
