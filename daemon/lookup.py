"""The node agent's answer for a VM by name: the VM listed here, or why it is not (arriving,
leased for an incoming migration, left for a destination that verifies it, or in a migration
from here that has no final record yet) as FAILED_PRECONDITION that names the migration and the
host to ask; NOT_FOUND only when this host has nothing to do with it. It reads the inventory
(daemon/node_state.py): VMs, leases, hand-overs and the journal; it changes nothing."""
from __future__ import annotations

from cellbed.daemon.inventory import VmEntry
from cellbed.daemon.node_state import NodeState
from cellbed.domain import errors


class Lookup:
    def __init__(self, state: NodeState) -> None:
        self._state = state

    def get(self, name: str) -> VmEntry:
        st = self._state
        e = st.vms.get(name)
        if e is not None:
            return e
        lease = st.lease_of(name)
        if lease is not None:
            mid, r = lease
            if mid in st.finishing:
                raise errors.FailedPrecondition(
                    f"VM {name!r} is arriving on host {st.cfg.host} (migration {mid} is being verified); "
                    "ask again once it is listed as running")
            raise errors.FailedPrecondition(   # its source still has it, or its FinishIncoming is on its way
                f"VM {name!r} is migrating to host {st.cfg.host} from {r.src} (migration {mid}); "
                f"ask {r.src} while it lists it, or here once it is listed here")
        away = self.away(name)
        if away is not None:
            raise errors.FailedPrecondition(away)
        raise errors.NotFound(f"VM {name!r} is not on host {st.cfg.host}")

    def away(self, name: str) -> str | None:
        """Why VM *name*, not listed here, is still this host's concern: it has left for a
        destination that is verifying it, or its migration from here has no final record yet
        (the journal's open entry: the destination did not answer, or a crash interrupted it)."""
        st = self._state
        leaving = st.handing_over.get(name)
        if leaving is not None:
            return (f"VM {name!r} has left host {st.cfg.host} for {leaving[1]} (migration {leaving[0]} is being "
                    f"verified there); ask {leaving[1]} once it is listed there")
        o = next((o for o in st.journal.outgoing.values() if o.vm == name), None)
        if o is not None:
            why = st.unresolved.get(o.mid, "its record is not written yet")
            return (f"VM {name!r}: migration {o.mid} from host {st.cfg.host} to {o.peer} is not resolved ({why}); "
                    "where the VM runs is not known yet; ask again")
        return None
