"""The broker's stages (DESIGN §17): the score in its two slots (``realloc_score`` for SAN step
2's candidates, over used resources; ``initial_score`` for initial placement, over requests), the
recommendation of candidates, and forced candidates when none has room. Built by the assembly
from the cell's policy book; the broker only calls them."""
from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class BrokerPolicies:
    realloc_score: Callable
    initial_score: Callable
    candidates: Callable
    forced: Callable

    SLOTS = ("realloc_score", "initial_score", "candidates", "forced")
