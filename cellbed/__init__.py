"""Cellbed: a testbed for decentralised cloud scheduling with real VM live migration.

Layers (docs/architecture.md): domain, runtime, policy, metrics and workload at the floor; the
agents (cellbed.daemon, cellbed.broker, cellbed.controller) above them; cellbed.assembly, the
model cell, the single-box cell and the experiment runner above those; cellctl on top."""
