"""Host-side client for the guest control channel (DESIGN.md section 5).

The guest's workload program (guest/cbload.c) serves a line-based ASCII
protocol on a virtio-serial port named ``org.cellbed.ctl``. QEMU exposes the
host end as a unix socket (``-chardev socket,...,server=on`` or libvirt's
``<channel type='unix'>``); this module is the asyncio client for it.

Protocol::

    request:  <id> <verb> [k=v ...]\\n
    reply:    <id> ok k=v k=v ...\\n
              <id> err <message naming the field and the allowed range>\\n

Verbs: ``status``, ``set [cpu=F] [wss=N] [dirty=F|max]``, ``check``,
``fault kind=corrupt|panic``. ``<id>`` is an opaque token echoed back; replies
whose id does not match the request in flight (answers to requests that
timed out earlier, possibly on an earlier connection) are skipped.

The parsing functions (:func:`parse_reply`, :func:`parse_status`,
:func:`parse_integrity`, :func:`format_request`) are pure.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import operator
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

log = logging.getLogger(__name__)

#: Name of the virtio-serial port the guest listens on.
PORT_NAME = "org.cellbed.ctl"

#: StreamReader line limit; guest replies are well under 1 KiB.
_LINE_LIMIT = 64 * 1024

_BOOT_ID_RE = re.compile(r"^[0-9a-f]{16}$")


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class GuestChannelError(Exception):
    """Base class: the guest channel failed (connection, protocol or guest)."""


class GuestTimeout(GuestChannelError):
    """The guest did not answer within the request's timeout."""


class GuestRefused(GuestChannelError):
    """The guest answered ``err``: a bad parameter or an impossible request.

    ``message`` is the guest's own text; it names the field and the allowed
    range, e.g. ``cpu=2 invalid: cpu must be a number in 0..1 ...``.
    """

    def __init__(self, verb: str, message: str) -> None:
        super().__init__(f"guest refused '{verb}': {message}")
        self.verb = verb
        self.message = message


class GuestProtocolError(GuestChannelError):
    """A reply line did not follow the protocol."""


# --------------------------------------------------------------------------
# Typed results
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GuestStatus:
    """Answer to ``status`` (and ``set``)."""

    boot_id: str  # 16 hex digits, random per boot
    heartbeat: int  # +1 every 100 ms, never reset while the guest lives
    uptime_ms: int  # guest kernel uptime
    cpu_target: float  # fraction of one vCPU, 0..1
    cpu_actual: float  # fraction of one vCPU over the last ~1 s
    wss_mib: int  # working set, MiB
    dirty_target_mib_s: float  # MiB/s; math.inf means "max" (unthrottled)
    dirty_actual_mib_s: float  # MiB/s over the last ~1 s
    generation: int  # total page writes since boot
    mem_total_kib: int  # guest MemTotal
    mem_avail_kib: int  # guest MemAvailable


@dataclass(frozen=True)
class IntegrityReport:
    """Answer to ``check``: pages whose content is not the generation last
    written to them (for example writes lost by a migration)."""

    pages: int
    bad: int
    first_bad: int | None  # page index of the first bad page, None if none

    @property
    def ok(self) -> bool:
        return self.bad == 0


@dataclass(frozen=True)
class FaultReport:
    """Answer to ``fault``. ``page`` is the corrupted page for kind=corrupt."""

    kind: str
    page: int | None


@dataclass(frozen=True)
class Reply:
    """One parsed reply line."""

    request_id: str
    ok: bool
    fields: Mapping[str, str]  # ok replies
    message: str  # err replies ("" for ok)


# --------------------------------------------------------------------------
# Pure parsing and formatting
# --------------------------------------------------------------------------


def parse_reply(line: str) -> Reply:
    """Parses ``<id> ok k=v ...`` or ``<id> err <message>``.

    Raises GuestProtocolError for anything else.
    """
    text = line.rstrip("\r\n")
    parts = text.split(" ", 2)
    if len(parts) < 2 or not parts[0]:
        raise GuestProtocolError(f"malformed reply {text!r}: expected '<id> ok|err ...'")
    request_id, kind = parts[0], parts[1]
    rest = parts[2] if len(parts) == 3 else ""
    if kind == "err":
        return Reply(request_id, False, MappingProxyType({}), rest.strip() or "(no message)")
    if kind != "ok":
        raise GuestProtocolError(f"malformed reply {text!r}: second word must be ok or err")
    fields: dict[str, str] = {}
    for token in rest.split():
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise GuestProtocolError(f"malformed field {token!r} in reply {text!r}: expected key=value")
        fields[key] = value
    return Reply(request_id, True, MappingProxyType(fields), "")


def _field(fields: Mapping[str, str], key: str, convert, expected: str):
    """Converts fields[key]; GuestProtocolError names the field if it fails."""
    try:
        raw = fields[key]
    except KeyError:
        raise GuestProtocolError(f"reply lacks field '{key}' (got {sorted(fields)})") from None
    try:
        return convert(raw)
    except ValueError:
        raise GuestProtocolError(f"reply field {key}={raw!r} is not {expected}") from None


def _dirty_rate(raw: str) -> float:
    return math.inf if raw == "max" else float(raw)


def _boot_id(raw: str) -> str:
    if not _BOOT_ID_RE.match(raw):
        raise ValueError(raw)
    return raw


def parse_status(fields: Mapping[str, str]) -> GuestStatus:
    """Builds a GuestStatus from the fields of a ``status``/``set`` reply."""
    return GuestStatus(
        boot_id=_field(fields, "boot_id", _boot_id, "16 lowercase hex digits"),
        heartbeat=_field(fields, "hb", int, "an integer"),
        uptime_ms=_field(fields, "uptime_ms", int, "an integer"),
        cpu_target=_field(fields, "cpu_target", float, "a number"),
        cpu_actual=_field(fields, "cpu_actual", float, "a number"),
        wss_mib=_field(fields, "wss_mib", int, "an integer"),
        dirty_target_mib_s=_field(fields, "dirty_target", _dirty_rate, "a number or max"),
        dirty_actual_mib_s=_field(fields, "dirty_actual", float, "a number"),
        generation=_field(fields, "gen", int, "an integer"),
        mem_total_kib=_field(fields, "mem_total_kib", int, "an integer"),
        mem_avail_kib=_field(fields, "mem_avail_kib", int, "an integer"),
    )


def parse_integrity(fields: Mapping[str, str]) -> IntegrityReport:
    """Builds an IntegrityReport from the fields of a ``check`` reply."""
    first_bad = _field(fields, "first_bad", int, "an integer")
    return IntegrityReport(
        pages=_field(fields, "pages", int, "an integer"),
        bad=_field(fields, "bad", int, "an integer"),
        first_bad=None if first_bad < 0 else first_bad,
    )


def _check_token(what: str, value: str) -> str:
    if not value or any(c.isspace() for c in value) or not value.isascii():
        raise ValueError(f"{what} {value!r} must be a non-empty ASCII token without whitespace")
    return value


def format_request(request_id: str, verb: str, args: Mapping[str, str] | None = None) -> bytes:
    """Encodes ``<id> <verb> [k=v ...]\\n``."""
    words = [_check_token("request id", request_id), _check_token("verb", verb)]
    for key, value in (args or {}).items():
        words.append(f"{_check_token('field name', key)}={_check_token(f'value of {key}', value)}")
    return (" ".join(words) + "\n").encode("ascii")


def _format_number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        raise ValueError("NaN is not a valid workload parameter")
    return repr(value)


# --------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------


class GuestChannel:
    """Asyncio client for one guest's control socket.

    Keeps one connection open and reconnects after errors; requests are
    serialised with a lock; every request (including the wait for the lock)
    is bounded by a timeout. Idempotent requests (status, set, check) are
    retried once on a fresh connection if the connection turns out to be
    dead; ``fault`` is never retried.
    """

    def __init__(self, socket_path: str, timeout_s: float = 5.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s={timeout_s} must be > 0 (seconds)")
        self.socket_path = str(socket_path)
        self.timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        # Ids are unique per channel and across channels (random prefix), so
        # a reply meant for an earlier client is never taken for ours.
        self._id_prefix = secrets.token_hex(3)
        self._ids = itertools.count(1)

    async def __aenter__(self) -> GuestChannel:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # ---- public API ----

    async def status(self, *, timeout_s: float | None = None) -> GuestStatus:
        reply = await self._request("status", timeout_s=timeout_s)
        return parse_status(reply.fields)

    async def set_workload(
        self,
        cpu: float | None = None,
        wss_mib: int | None = None,
        dirty_mib_s: float | None = None,
        *,
        timeout_s: float | None = None,
    ) -> GuestStatus:
        """Sets any of CPU fraction (0..1), working set (MiB, int) and dirty
        rate (MiB/s, math.inf for unthrottled). The guest validates all of
        them before applying any; a bad one raises GuestRefused."""
        args: dict[str, str] = {}
        if cpu is not None:
            args["cpu"] = _format_number(cpu)
        if wss_mib is not None:
            args["wss"] = str(operator.index(wss_mib))
        if dirty_mib_s is not None:
            args["dirty"] = "max" if dirty_mib_s == math.inf else _format_number(dirty_mib_s)
        reply = await self._request("set", args, timeout_s=timeout_s)
        return parse_status(reply.fields)

    async def check(self, *, timeout_s: float | None = None) -> IntegrityReport:
        reply = await self._request("check", timeout_s=timeout_s)
        return parse_integrity(reply.fields)

    async def fault(self, kind: str, *, timeout_s: float | None = None) -> FaultReport:
        """Injects a fault: ``corrupt`` (one page gets a wrong generation,
        as if a write was lost) or ``panic`` (kernel crash via SysRq)."""
        reply = await self._request("fault", {"kind": kind}, timeout_s=timeout_s, retry=False)
        page = reply.fields.get("page")
        try:
            return FaultReport(kind=reply.fields.get("kind", kind), page=None if page is None else int(page))
        except ValueError:
            raise GuestProtocolError(f"reply field page={page!r} is not an integer") from None

    async def close(self) -> None:
        await self._disconnect()

    # ---- internals ----

    def _next_id(self) -> str:
        return f"{self._id_prefix}-{next(self._ids)}"

    async def _request(
        self,
        verb: str,
        args: Mapping[str, str] | None = None,
        *,
        timeout_s: float | None = None,
        retry: bool = True,
    ) -> Reply:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        request_id = self._next_id()
        line = format_request(request_id, verb, args)
        try:
            async with asyncio.timeout(timeout):
                async with self._lock:
                    reply = await self._exchange(request_id, verb, line, retry)
        except TimeoutError:
            raise GuestTimeout(
                f"guest did not answer '{verb}' (id {request_id}) within {timeout:g} s on {self.socket_path}"
            ) from None
        if not reply.ok:
            raise GuestRefused(verb, reply.message)
        return reply

    async def _exchange(self, request_id: str, verb: str, line: bytes, retry: bool) -> Reply:
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            await self._connect()
            assert self._reader is not None and self._writer is not None
            try:
                self._writer.write(line)
                await self._writer.drain()
                return await self._read_reply(request_id)
            except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                await self._disconnect()
                if attempt < attempts:
                    log.info("guest channel %s: connection lost during '%s' (%s); reconnecting", self.socket_path, verb, exc)
                    continue
                raise GuestChannelError(f"guest channel {self.socket_path}: connection lost during '{verb}': {exc}") from exc
        raise AssertionError("unreachable")

    async def _read_reply(self, request_id: str) -> Reply:
        assert self._reader is not None
        while True:
            raw = await self._reader.readline()
            if not raw.endswith(b"\n"):
                raise ConnectionResetError("connection closed by the peer")
            text = raw.decode("ascii", errors="replace")
            try:
                reply = parse_reply(text)
            except GuestProtocolError as exc:
                log.warning("guest channel %s: skipping line: %s", self.socket_path, exc)
                continue
            if reply.request_id != request_id:
                log.debug("guest channel %s: skipping stale reply %r", self.socket_path, text.rstrip())
                continue
            return reply

    async def _connect(self) -> None:
        if self._writer is not None and self._reader is not None and not self._reader.at_eof():
            return
        await self._disconnect()
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(self.socket_path, limit=_LINE_LIMIT)
        except OSError as exc:
            raise GuestChannelError(f"cannot connect to guest channel {self.socket_path}: {exc}") from exc
        log.debug("guest channel %s: connected", self.socket_path)

    async def _disconnect(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is None:
            return
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass
