"""Scenario files (DESIGN §10.4, §13): ``file`` (the typed, validated scenario, ``--set``
overrides, the manifest's stage policies), ``sections`` (every key of every table), ``schema``
(the typed-dataclass machinery) and ``keys`` (dotted keys, their parsing and documentation)."""
