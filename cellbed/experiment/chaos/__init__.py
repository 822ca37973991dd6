"""``cellctl chaos``, a seeded fault-injection campaign on a real cell (issue 12): ``plan`` (the
schedule, pure), ``steps`` (one operation with its fault), ``faults`` (the injection), ``observe``
(what the cell looks like), ``checker`` (the invariants, pure), ``report`` and ``campaign`` (the
loop)."""
