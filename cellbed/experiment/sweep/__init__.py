"""``cellctl sweep``: ``plan`` (specs and their plan, pure), ``run`` (the plan on Dask), ``worker``
(what a Dask worker runs: one ``cellctl run`` child), ``progress`` (the progress line) and
``report`` (a whole sweep's report)."""
