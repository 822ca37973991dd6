"""The node daemon's migration journal (issue 12): what a migration intends, written before the
fact, on both ends, through the crash-safe store (cellbed/runtime/jsonl.py).

The source writes ``intent`` before it asks the destination for a reservation and before
``migrateToURI3`` (id, VM, domain UUID, peer, the record so far with the options, the guest's
heartbeat and boot id), then ``transferred`` or ``failed`` when libvirt answers, then ``closed``
once the one final record is saved. The destination writes ``reserved`` when it admits a
PrepareIncoming (the lease: owner, expiry in Unix time), then ``verified``, ``released`` or
``adopted`` with the verification it answered, so that FinishIncoming is idempotent: asked
again after a crash, it gives the same answer.

After a restart the journal folds its lines into the entries still open; those are what
reconciliation (daemon/reconcile.py) finishes. ``state_dir=""`` disables it (the model cell's
thousands of agents, which have no process to crash).
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
from typing import Any

from google.protobuf import json_format

from cellbed.domain.wire import spec_from_pb, spec_pb
from cellbed.runtime.jsonl import JsonlStore
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)

RESULTS_KEPT = 512           # finished incoming verifications remembered for a repeated FinishIncoming


@dataclasses.dataclass
class Outgoing:
    """An open outgoing migration, as the journal knows it."""

    mid: str
    vm: str
    uuid: str
    peer: str
    peer_uri: str
    record: dict                    # MigrationRecord (json_format dict), updated at every step
    boot_id: str = ""
    phase: str = "intent"          # intent | transferred | failed
    aborted: bool = False
    postcopy_resumed: bool = False


@dataclasses.dataclass
class Incoming:
    """An open reservation (a lease) for an incoming migration."""

    mid: str
    spec: dict                      # VmSpec (wire dict)
    src: str
    expires_unix_s: float
    cpu_used: float = 0.0
    mem_used: float = 0.0


class MigrationJournal:
    def __init__(self, state_dir: str) -> None:
        self._store = JsonlStore(os.path.join(state_dir, "journal.jsonl")) if state_dir else None
        self.outgoing: dict[str, Outgoing] = {}
        self.incoming: dict[str, Incoming] = {}
        self.results: collections.OrderedDict[str, dict] = collections.OrderedDict()

    # --- recovery -----------------------------------------------------------------------
    def load(self) -> None:
        """Fold the file into the open entries, then compact it to just those (and the kept results)."""
        if self._store is None:
            return
        for line in self._store.read():
            self._apply(line)
        self._store.rewrite(self._lines())
        if self.outgoing or self.incoming:
            log.warning("journal: %d outgoing and %d incoming migration(s) open after restart: reconciling",
                        len(self.outgoing), len(self.incoming))

    def _lines(self) -> list[dict]:
        out: list[dict] = [{"mid": o.mid, "role": "out", "step": "intent", **_fields(o)} for o in self.outgoing.values()]
        out += [{"mid": i.mid, "role": "in", "step": "reserved", **_fields(i)} for i in self.incoming.values()]
        out += [{"mid": m, "role": "in", "step": "verified", "result": r} for m, r in self.results.items()]
        return out

    def _apply(self, line: dict) -> None:
        mid, role, step = line["mid"], line["role"], line["step"]
        body = {k: v for k, v in line.items() if k not in ("mid", "role")}
        if role == "out":
            if step == "closed":
                self.outgoing.pop(mid, None)
            elif step == "intent":
                self.outgoing[mid] = Outgoing(mid=mid, **{k: v for k, v in body.items() if k != "step"})
            elif mid in self.outgoing:
                o = self.outgoing[mid]
                o.phase = step if step in ("transferred", "failed") else o.phase
                if "record" in body:
                    o.record = body["record"]
                o.aborted = body.get("aborted", o.aborted)
                o.postcopy_resumed = body.get("postcopy_resumed", o.postcopy_resumed)
        else:
            if step == "reserved":
                self.incoming[mid] = Incoming(mid=mid, **{k: v for k, v in body.items() if k != "step"})
            else:
                self.incoming.pop(mid, None)
                if "result" in body:
                    self.results[mid] = body["result"]
                    while len(self.results) > RESULTS_KEPT:
                        self.results.popitem(last=False)

    @property
    def enabled(self) -> bool:
        return self._store is not None

    def _write(self, line: dict) -> None:
        if self._store is None:
            return                  # a model cell's agent: nothing survives a crash there anyway
        self._apply(line)
        self._store.append(line)

    # --- the source ----------------------------------------------------------------------
    def intent(self, o: Outgoing) -> None:
        self._write({"mid": o.mid, "role": "out", "step": "intent", **_fields(o)})

    def step(self, mid: str, step: str, **fields: Any) -> None:
        """An outgoing migration's next step: transferred, failed, postcopy_resumed..."""
        self._write({"mid": mid, "role": "out", "step": step, **fields})

    def close(self, mid: str, outcome: str) -> None:
        self._write({"mid": mid, "role": "out", "step": "closed", "outcome": outcome})

    # --- the destination -----------------------------------------------------------------
    def reserve(self, i: Incoming) -> None:
        self._write({"mid": i.mid, "role": "in", "step": "reserved", **_fields(i)})

    def finish(self, mid: str, how: str, result: dict | None = None) -> None:
        """*how*: verified | released | adopted. *result*: the verification answered."""
        line: dict = {"mid": mid, "role": "in", "step": how}
        if result is not None:
            line["result"] = result
        self._write(line)


def _fields(x) -> dict:
    return {k: v for k, v in dataclasses.asdict(x).items() if k != "mid"}


def record_dict(rec) -> dict:
    return json_format.MessageToDict(rec, preserving_proto_field_name=True)


def record_from(d: dict):
    return json_format.ParseDict(d, npb.MigrationRecord())


def spec_dict(spec) -> dict:
    return json_format.MessageToDict(spec_pb(spec), preserving_proto_field_name=True)


def spec_from(d: dict):
    return spec_from_pb(json_format.ParseDict(d, npb.VmSpec()))
