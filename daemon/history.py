"""A node agent's migration history: the one final record of each migration from this host,
kept in memory and (with a state folder) in ``migrations.jsonl``, and the step that writes it:
saved (fsync), then the journal entry closed, then announced."""
from __future__ import annotations

import logging
import os

from google.protobuf import json_format

from cellbed.daemon.events import EventHub
from cellbed.daemon.journal import MigrationJournal
from cellbed.runtime.jsonl import JsonlStore
from cellbed.v1 import node_pb2 as npb

log = logging.getLogger(__name__)


class MigrationHistory:
    """*unresolved* is the agent's table of open migrations (id -> why): a final record ends its entry."""

    def __init__(self, state_dir: str, journal: MigrationJournal, unresolved: dict[str, str],
                 events: EventHub) -> None:
        self.records: list[npb.MigrationRecord] = []
        # "" = keep records in memory only (model cells: thousands of agents, no files)
        self._store = JsonlStore(os.path.join(state_dir, "migrations.jsonl")) if state_dir else None
        self._journal = journal
        self._unresolved = unresolved
        self._events = events

    def load(self) -> None:
        if self._store is not None:
            self.records.extend(self._store.read(lambda line: json_format.Parse(line, npb.MigrationRecord())))

    def find(self, mid: str) -> npb.MigrationRecord | None:
        return next((r for r in self.records if r.id == mid), None)

    def _save(self, rec: npb.MigrationRecord) -> None:
        """One final record per migration, on disk (fsync) before anyone is told."""
        self.records.append(rec)
        if self._store is not None:
            self._store.append(rec, lambda r: json_format.MessageToJson(r, indent=None))

    def final(self, rec: npb.MigrationRecord) -> None:
        """The one final record: saved (fsync), then the journal entry closed, then announced."""
        self._save(rec)
        self._journal.close(rec.id, npb.MigrationOutcome.Name(rec.outcome))
        self._unresolved.pop(rec.id, None)
        level = logging.INFO if rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED else logging.WARNING
        log.log(level, "migration %s of %s %s->%s: %s in %.0f ms, downtime %.0f ms, %d B; %s%s", rec.id, rec.vm,
                rec.src, rec.dst, npb.MigrationOutcome.Name(rec.outcome), rec.wall_ms, rec.downtime_ms,
                rec.data_total_bytes, rec.detail, f"; hint: {rec.hint}" if rec.hint else "")
        self._events.emit(npb.EVENT_KIND_MIGRATION_FINISHED, rec.vm, npb.MigrationOutcome.Name(rec.outcome), record=rec)
