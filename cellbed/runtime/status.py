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


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The one place where exceptions become gRPC status codes."""
    if isinstance(exc, errors.CellbedError):
        return exc.code, str(exc)
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
