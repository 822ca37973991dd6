"""What libvirt's codes mean to Cellbed, by the names of libvirt's constants: its error codes as
the project's errors (classify, the one place) and its domain states and reasons as a DomState and
a reason word (state_of). This module does not import libvirt: daemon/hv_libvirt.py, the one
module that does, binds the names to libvirt's numbers (``Codes(libvirt)``)."""
from __future__ import annotations

from cellbed.domain import errors
from cellbed.domain.vm import DomState

ERROR_CLASSES = (
    (("VIR_ERR_NO_DOMAIN",), errors.NotFound),
    (("VIR_ERR_DOM_EXIST",), errors.AlreadyExists),
    (("VIR_ERR_INVALID_ARG", "VIR_ERR_XML_ERROR", "VIR_ERR_CONFIG_UNSUPPORTED", "VIR_ERR_XML_DETAIL"),
     errors.InvalidArgument),
    (("VIR_ERR_OPERATION_ABORTED",), errors.MigrationFailed),
    (("VIR_ERR_OPERATION_INVALID", "VIR_ERR_OPERATION_DENIED", "VIR_ERR_OPERATION_UNSUPPORTED", "VIR_ERR_NO_SUPPORT",
      "VIR_ERR_MIGRATE_UNSAFE", "VIR_ERR_ARGUMENT_UNSUPPORTED"), errors.FailedPrecondition),
    (("VIR_ERR_SYSTEM_ERROR", "VIR_ERR_RPC", "VIR_ERR_NO_CONNECT", "VIR_ERR_INVALID_CONN", "VIR_ERR_AUTH_FAILED"),
     errors.Unavailable),
    (("VIR_ERR_OPERATION_TIMEOUT",), errors.DeadlineExceeded),
)
STATES = {"VIR_DOMAIN_RUNNING": DomState.RUNNING, "VIR_DOMAIN_BLOCKED": DomState.RUNNING,
          "VIR_DOMAIN_PAUSED": DomState.PAUSED, "VIR_DOMAIN_SHUTDOWN": DomState.RUNNING,
          "VIR_DOMAIN_SHUTOFF": DomState.SHUTOFF, "VIR_DOMAIN_CRASHED": DomState.CRASHED}
PAUSED_REASONS = {"VIR_DOMAIN_PAUSED_MIGRATION": "migration", "VIR_DOMAIN_PAUSED_STARTING_UP": "starting up",
                  "VIR_DOMAIN_PAUSED_POSTCOPY": "post-copy", "VIR_DOMAIN_PAUSED_POSTCOPY_FAILED": "post-copy failed",
                  "VIR_DOMAIN_PAUSED_CRASHED": "panicked", "VIR_DOMAIN_PAUSED_USER": "user",
                  "VIR_DOMAIN_PAUSED_IOERROR": "I/O error"}
RUNNING_REASONS = {"VIR_DOMAIN_RUNNING_MIGRATED": "migrated", "VIR_DOMAIN_RUNNING_BOOTED": "booted",
                   "VIR_DOMAIN_RUNNING_UNPAUSED": "unpaused", "VIR_DOMAIN_RUNNING_POSTCOPY": "post-copy",
                   "VIR_DOMAIN_RUNNING_MIGRATION_CANCELED": "migration canceled"}


class Codes:
    """The tables above with the numbers of *lib* (the libvirt module)."""

    def __init__(self, lib) -> None:
        self.classes = [({getattr(lib, n) for n in names}, cls) for names, cls in ERROR_CLASSES]
        self.not_found = self.classes[0][0]
        self.states = {getattr(lib, n): v for n, v in STATES.items()}
        self.paused = {getattr(lib, n): v for n, v in PAUSED_REASONS.items()}
        self.running = {getattr(lib, n): v for n, v in RUNNING_REASONS.items()}
        self.crashed_panicked, self.paused_crashed = lib.VIR_DOMAIN_CRASHED_PANICKED, lib.VIR_DOMAIN_PAUSED_CRASHED

    def classify(self, err, what: str) -> errors.CellbedError:
        """*err*: a libvirt.libvirtError (its code and message)."""
        code, msg = err.get_error_code(), f"{what}: {err.get_error_message() or err}"
        for codes, cls in self.classes:
            if code in codes:
                return cls(msg)
        return errors.HypervisorError(msg)

    def state_of(self, state: int, reason: int) -> tuple[DomState, str]:
        st = self.states.get(state, DomState.OTHER)
        if st is DomState.CRASHED:
            return st, "panicked" if reason == self.crashed_panicked else "unknown"
        if st is DomState.PAUSED:
            crashed = reason == self.paused_crashed
            return DomState.CRASHED if crashed else st, self.paused.get(reason, f"reason {reason}")
        if st is DomState.RUNNING:
            return st, self.running.get(reason, f"reason {reason}")
        return st, f"reason {reason}"
