"""What libvirt's codes mean to Cellbed: its error codes classified into the project's error
hierarchy (classify, the one place), and its domain state and reason codes as a DomState and a
reason word (state_of). Pure tables over libvirt's constants; the backend that calls libvirt
is daemon/hv_libvirt.py."""
from __future__ import annotations

import libvirt

from cellbed.domain import errors
from cellbed.domain.vm import DomState

NOT_FOUND = {libvirt.VIR_ERR_NO_DOMAIN}
_INVALID = {libvirt.VIR_ERR_INVALID_ARG, libvirt.VIR_ERR_XML_ERROR, libvirt.VIR_ERR_CONFIG_UNSUPPORTED,
            libvirt.VIR_ERR_XML_DETAIL}
_PRECONDITION = {libvirt.VIR_ERR_OPERATION_INVALID, libvirt.VIR_ERR_OPERATION_DENIED,
                 libvirt.VIR_ERR_OPERATION_UNSUPPORTED, libvirt.VIR_ERR_NO_SUPPORT,
                 libvirt.VIR_ERR_MIGRATE_UNSAFE, libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED}
_UNAVAILABLE = {libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_ERR_RPC, libvirt.VIR_ERR_NO_CONNECT,
                libvirt.VIR_ERR_INVALID_CONN, libvirt.VIR_ERR_AUTH_FAILED}


def classify(err: libvirt.libvirtError, what: str) -> errors.CellbedError:
    code = err.get_error_code()
    msg = f"{what}: {err.get_error_message() or err}"
    for codes, cls in ((NOT_FOUND, errors.NotFound), ({libvirt.VIR_ERR_DOM_EXIST}, errors.AlreadyExists),
                       (_INVALID, errors.InvalidArgument), ({libvirt.VIR_ERR_OPERATION_ABORTED}, errors.MigrationFailed),
                       (_PRECONDITION, errors.FailedPrecondition), (_UNAVAILABLE, errors.Unavailable),
                       ({libvirt.VIR_ERR_OPERATION_TIMEOUT}, errors.DeadlineExceeded)):
        if code in codes:
            return cls(msg)
    return errors.HypervisorError(msg)


_STATE = {
    libvirt.VIR_DOMAIN_RUNNING: DomState.RUNNING, libvirt.VIR_DOMAIN_BLOCKED: DomState.RUNNING,
    libvirt.VIR_DOMAIN_PAUSED: DomState.PAUSED, libvirt.VIR_DOMAIN_SHUTDOWN: DomState.RUNNING,
    libvirt.VIR_DOMAIN_SHUTOFF: DomState.SHUTOFF, libvirt.VIR_DOMAIN_CRASHED: DomState.CRASHED,
}
_PAUSED_REASON = {
    libvirt.VIR_DOMAIN_PAUSED_MIGRATION: "migration", libvirt.VIR_DOMAIN_PAUSED_STARTING_UP: "starting up",
    libvirt.VIR_DOMAIN_PAUSED_POSTCOPY: "post-copy", libvirt.VIR_DOMAIN_PAUSED_POSTCOPY_FAILED: "post-copy failed",
    libvirt.VIR_DOMAIN_PAUSED_CRASHED: "panicked", libvirt.VIR_DOMAIN_PAUSED_USER: "user",
    libvirt.VIR_DOMAIN_PAUSED_IOERROR: "I/O error",
}
_RUNNING_REASON = {
    libvirt.VIR_DOMAIN_RUNNING_MIGRATED: "migrated", libvirt.VIR_DOMAIN_RUNNING_BOOTED: "booted",
    libvirt.VIR_DOMAIN_RUNNING_UNPAUSED: "unpaused", libvirt.VIR_DOMAIN_RUNNING_POSTCOPY: "post-copy",
    libvirt.VIR_DOMAIN_RUNNING_MIGRATION_CANCELED: "migration canceled",
}


def state_of(state: int, reason: int) -> tuple[DomState, str]:
    st = _STATE.get(state, DomState.OTHER)
    if st is DomState.CRASHED:
        return st, "panicked" if reason == libvirt.VIR_DOMAIN_CRASHED_PANICKED else "unknown"
    if st is DomState.PAUSED:
        crashed = reason == libvirt.VIR_DOMAIN_PAUSED_CRASHED
        return DomState.CRASHED if crashed else st, _PAUSED_REASON.get(reason, f"reason {reason}")
    if st is DomState.RUNNING:
        return st, _RUNNING_REASON.get(reason, f"reason {reason}")
    return st, f"reason {reason}"
