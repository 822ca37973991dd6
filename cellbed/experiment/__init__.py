"""Experiments: scenarios in, runs on a cell, results folders and reports out (DESIGN §10.4, §12).

The house has one room per capability, and the shared base beside them:

* ``runner`` (``cellctl run``: a scenario on a model, real or twin cell, dispatched to its
  driver), ``model`` (the model-cell driver and the workload sources a twin shares), ``progress``
  (its progress bar), ``profiling`` (``--profile``) — the base;
* ``scenario/`` — the scenario TOML as typed, validated dataclasses, with ``--set key=value``
  overrides and the resolved manifest;
* ``results/`` — :class:`ResultsWriter` (streams manifest.json, events.jsonl, ticks.csv,
  migrations.csv, allocations.csv) and :func:`load_run`, which refuses runs without
  ``run_completed``;
* ``report/`` — ``report.md`` with PNG plots for one run, or side-by-side tables for several
  (matplotlib is imported only when plotting);
* ``real/`` (the real-cell driver), ``twin/`` (its model twin), ``compare/`` (``cellctl compare``),
  ``sweep/`` (``cellctl sweep``) and ``chaos/`` (``cellctl chaos``).

This module re-exports the scenario, results and report API that outside users import from
``cellbed.experiment``; Cellbed's own code imports each name from its room.
"""

from cellbed.experiment.report.write import Summary, summarize, write_report
from cellbed.experiment.results.writer import (
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
from cellbed.experiment.scenario.file import (
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
