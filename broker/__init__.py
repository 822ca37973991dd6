"""Broker agents (MASB BA)."""
