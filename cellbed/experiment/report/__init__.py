"""A run's report (DESIGN §12): ``summary`` (its numbers, pure), ``plots`` (the PNGs) and
``write`` (``report.md`` for one run, or side by side for several)."""
