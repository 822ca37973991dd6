"""Cellbed: a testbed for decentralised cloud scheduling with real VM live migration."""
