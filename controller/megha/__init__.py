"""Megha (seed 001; DESIGN §9): Global Masters place tasks on an eventually consistent view of
every Local Master; Local Masters validate against their true state and launch through the
NodeAgent. Also the ``central`` (1 GM × 1 LM) and ``sampling`` (Sparrow-style) baselines.

Pure policy: :mod:`.match` (constraint bit-vectors, first fit), :mod:`.cluster` (an LM's true
state: partitions, logical nodes, validation), :mod:`.view` (a GM's view), :mod:`.fairness`,
:mod:`.alloc` (allocation-time parts), :mod:`.queues` (user queues and the queue store).
Agents: :mod:`.gm`, :mod:`.lm`, :mod:`.sampling`; front-ends: :mod:`.frontend`;
model cell: :mod:`.modelcell`.
"""
