"""Where the other hosts of the cell are: a small JSON file written by whoever built the
cell (cellctl cell up, or the Ansible role). Re-read when it changes."""
from __future__ import annotations

import dataclasses
import json
import os

from cellbed.domain.errors import NotFound


@dataclasses.dataclass(frozen=True)
class Peer:
    name: str
    address: str
    grpc_port: int

    @property
    def target(self) -> str:
        return f"{self.address}:{self.grpc_port}"


class PeerDirectory:
    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime = -1.0
        self._peers: dict[str, Peer] = {}

    def _load(self) -> None:
        if not self.path:
            return
        try:
            m = os.stat(self.path).st_mtime
        except FileNotFoundError:
            return
        if m != self._mtime:
            with open(self.path) as f:
                data = json.load(f)
            self._peers = {n: Peer(n, d["address"], int(d["grpc_port"])) for n, d in data.get("hosts", {}).items()}
            self._mtime = m

    def get(self, name: str) -> Peer:
        self._load()
        try:
            return self._peers[name]
        except KeyError:
            raise NotFound(f"host {name!r} is not in the cell; known hosts: {', '.join(sorted(self._peers)) or 'none'}")

    def all(self) -> list[Peer]:
        self._load()
        return list(self._peers.values())
