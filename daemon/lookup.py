"""The node agent's answer for a VM by name: the VM listed here, or why it is not (arriving,
leased for an incoming migration, left for a destination that verifies it, or in a migration
from here that has no final record yet) as FAILED_PRECONDITION that names the migration and the
host to ask; NOT_FOUND only when this host has nothing to do with it. (Mixed into NodeAgent;
reads its inventory, leases, hand-overs and journal.)"""
from __future__ import annotations

from cellbed.daemon.inventory import Reservation, VmEntry
from cellbed.domain import errors


class LookupMixin:
    def _get(self, name: str) -> VmEntry:
        e = self.vms.get(name)
        if e is not None:
            return e
        lease = self._lease_of(name)
        if lease is not None:
            mid, r = lease
            if mid in self._finishing:
                raise errors.FailedPrecondition(
                    f"VM {name!r} is arriving on host {self.cfg.host} (migration {mid} is being verified); "
                    "ask again once it is listed as running")
            raise errors.FailedPrecondition(   # its source still has it, or its FinishIncoming is on its way
                f"VM {name!r} is migrating to host {self.cfg.host} from {r.src} (migration {mid}); "
                f"ask {r.src} while it lists it, or here once it is listed here")
        away = self._away(name)
        if away is not None:
            raise errors.FailedPrecondition(away)
        raise errors.NotFound(f"VM {name!r} is not on host {self.cfg.host}")

    def _lease_of(self, name: str) -> tuple[str, Reservation] | None:
        """(migration id, reservation) of the incoming migration of VM *name*, if this host holds one."""
        return next(((mid, r) for mid, r in self.incoming.items() if r.spec.name == name), None)

    def _away(self, name: str) -> str | None:
        """Why VM *name*, not listed here, is still this host's concern: it has left for a
        destination that is verifying it, or its migration from here has no final record yet
        (the journal's open entry: the destination did not answer, or a crash interrupted it)."""
        leaving = self.handing_over.get(name)
        if leaving is not None:
            return (f"VM {name!r} has left host {self.cfg.host} for {leaving[1]} (migration {leaving[0]} is being "
                    f"verified there); ask {leaving[1]} once it is listed there")
        o = next((o for o in self.journal.outgoing.values() if o.vm == name), None)
        if o is not None:
            why = self.unresolved.get(o.mid, "its record is not written yet")
            return (f"VM {name!r}: migration {o.mid} from host {self.cfg.host} to {o.peer} is not resolved ({why}); "
                    "where the VM runs is not known yet; ask again")
        return None
