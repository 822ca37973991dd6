"""Kept for the modules that imported the clock from here; see cellbed.runtime.clock."""
from cellbed.runtime.clock import Clock, RealClock, VirtualClock

__all__ = ["Clock", "RealClock", "VirtualClock"]
