"""Model cells: hosts without VMs, in virtual time, running the unchanged agents (DESIGN §6, §11)."""
