"""One error hierarchy for Cellbed; libvirt and gRPC errors map onto it in one place each.

Each error carries the gRPC status code it surfaces as (see cellbed.runtime.rpc.status_for).
"""
from __future__ import annotations

import math

import grpc


class CellbedError(Exception):
    """Base of every error the project raises on purpose."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidArgument(CellbedError):
    """A field is malformed or out of range; the message names the field and the range.
    *reason* is a short key for counting refusals (see cellbed.domain.validate)."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, msg: str = "", *, reason: str = "invalid") -> None:
        super().__init__(msg)
        self.reason = reason


class NotFound(CellbedError):
    """An unknown VM, host, task or migration."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(CellbedError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(CellbedError):
    """The request is valid but the system is not in a state to do it (capacity, same host...)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(CellbedError):
    """A peer, daemon or hypervisor cannot be reached right now; retrying may help."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(CellbedError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class HypervisorError(CellbedError):
    """The hypervisor failed in a way none of the classes above describes."""

    code = grpc.StatusCode.INTERNAL


class MigrationFailed(CellbedError):
    """A migration job failed or was aborted; the VM is still on its source."""

    code = grpc.StatusCode.ABORTED

    def __init__(self, msg: str, *, aborted: bool = False, timeout_action: str = "") -> None:
        super().__init__(msg)
        self.aborted = aborted                # cancelled (by request or timeout policy), not an error
        self.timeout_action = timeout_action  # what the completion-timeout policy did, if anything


def check_range(field: str, value: float, lo: float, hi: float, unit: str = "") -> None:
    """Raise InvalidArgument naming *field* and the allowed range unless lo <= value <= hi."""
    if not (lo <= value <= hi):  # also rejects NaN
        u = f" {unit}" if unit else ""
        reason = "not_finite" if isinstance(value, float) and not math.isfinite(value) else "out_of_range"
        raise InvalidArgument(f"{field}={value!r}{u} is out of range: allowed {lo}..{hi}{u}", reason=reason)


class MigrationUnresolved(Unavailable):
    """libvirt moved (or may have moved) the guest, but its end could not be confirmed yet (the
    destination daemon or a libvirtd does not answer). The journal keeps the migration open and
    reconciliation writes its one record later; nobody must release its reservation meanwhile."""
