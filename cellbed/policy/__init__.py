"""Pure policy: every decision rule of the papers, with no I/O, no clock and no global RNG.
One sub-package per family:

* :mod:`~cellbed.policy.scores` — SIAS, SRAS, GAIN, the ASR classes, GPA and the sum fit;
* :mod:`~cellbed.policy.masb` — overload and RUS, SCS (Tabu Search), the accept rule, the
  target order and the broker's candidate selection (seed 000);
* :mod:`~cellbed.policy.megha` — constraint matching, the LM's validation of a GM's placement,
  the GM's view and fairness (seed 001);
* :mod:`~cellbed.policy.migration` — the pre-copy cost model and the migration timeout policy.

The agents (daemon, broker, controller) call these; the table tests in tests/unit show the arithmetic.
"""
