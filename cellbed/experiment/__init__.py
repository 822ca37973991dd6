"""Experiment I/O: scenario files, the results folder, and the report (DESIGN §10.4, §12).

* :mod:`~cellbed.experiment.scenario` — the scenario TOML as typed, validated dataclasses,
  with ``--set key=value`` overrides and the resolved manifest.
"""

from cellbed.experiment.scenario import (
    FRONTENDS,
    Scenario,
    apply_overrides,
    load_scenario,
    parse_scenario,
    schema_docs,
)

__all__ = [
    "FRONTENDS",
    "Scenario",
    "apply_overrides",
    "load_scenario",
    "parse_scenario",
    "schema_docs",
]
