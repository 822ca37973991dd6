"""What every front-end family of the model cell shares: the cell it runs in, and the cell's Env
(clock, in-process network, model fabric) and hosts, read through it."""
from __future__ import annotations


class Front:
    """A front-end family (masb.py, megha.py) placed in one model cell."""

    def __init__(self, cell) -> None:
        self.cell = cell
        self.p = cell.p

    @property
    def clock(self):
        return self.cell.clock

    @property
    def net(self):
        return self.cell.net

    @property
    def fabric(self):
        return self.cell.fabric

    @property
    def hosts(self) -> dict:
        return self.cell.hosts

    @property
    def host_list(self) -> list:
        return list(self.cell.hosts.values())
