"""The mechanism behind the public policy API (``cellbed.policy.api``): references and their
loading (entry points, ``module:attr``, ``file.py:attr``), identity, the guarded call of a
stage's policy (contracts, time budget, errors), per-stage timing, and a policy set per agent."""
