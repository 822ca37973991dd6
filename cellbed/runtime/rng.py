"""Seeded randomness: every agent gets its own stream, derived from the run seed and its name,
so that adding an agent does not shift the draws of the others."""
from __future__ import annotations

import hashlib
import random


def agent_rng(seed: int, name: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))
