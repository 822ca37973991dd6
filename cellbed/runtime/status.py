"""gRPC status codes and the project's errors, both ways: the one table that the in-process
transport, the gRPC transport and the servers' error handling (``rpc``) share."""
from __future__ import annotations

import grpc

from cellbed.domain import errors

_CODE_TO_ERROR = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: errors.FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.DeadlineExceeded,
    grpc.StatusCode.ABORTED: errors.MigrationFailed,
}


def error_for(code: grpc.StatusCode, message: str) -> errors.CellbedError:
    """The project error for a gRPC status code (the inverse of ``status_for``)."""
    return _CODE_TO_ERROR.get(code, errors.CellbedError)(message)


MAX_DETAILS = 1024
"""A status's details are one line of at most this many characters: an error message may quote
what a caller sent (a name, a reason), and details beyond the peer's metadata limit (8 KiB by
default) would reach it as another status altogether."""


def details(msg: str) -> str:
    """*msg* as status details: one line, cut to MAX_DETAILS characters."""
    msg = " ".join(msg.splitlines())
    return msg if len(msg) <= MAX_DETAILS else f"{msg[:MAX_DETAILS - 30]}... ({len(msg)} characters)"


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The one place where exceptions become gRPC status codes (and their details)."""
    if isinstance(exc, errors.CellbedError):
        return exc.code, details(str(exc))
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code(), details(exc.details() or "")
    return grpc.StatusCode.INTERNAL, details(f"{type(exc).__name__}: {exc}")
