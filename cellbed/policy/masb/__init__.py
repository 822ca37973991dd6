"""MASB policy (seed 000 §§4–6): pure functions over snapshots, one policy per module.

* overload — is a host overloaded (capacity, max_util, the RUS rule)? is this a spike?
* scs      — Service Candidate Selection: compulsory tasks, then Tabu Search over subsets
* accept   — a target's answer to TaskMigrationRequest, and its final check
* choose   — SAN step 4: re-score acceptors with SRAS, score-weighted random order

The agents call these (the SAN, daemon/san/, through its SanPolicies bundle; the broker, broker/);
nothing here does I/O or reads a clock.
"""
