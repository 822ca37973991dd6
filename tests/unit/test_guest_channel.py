"""Unit tests of cellbed.daemon.guest_channel.

The parsing functions are tested as pure functions. The client is tested
against an in-process fake guest: an asyncio unix-socket server in pytest's
tmp_path that answers (or misbehaves) according to a per-test script.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from cellbed.daemon.guest_channel import (
    GuestChannel,
    GuestChannelError,
    GuestProtocolError,
    GuestRefused,
    GuestTimeout,
    format_request,
    parse_integrity,
    parse_reply,
    parse_status,
)

STATUS_FIELDS = (
    "boot_id=00c0ffee12345678 hb=42 uptime_ms=5300 cpu_target=0.300 cpu_actual=0.297 "
    "wss_mib=16 dirty_target=32.000 dirty_actual=31.950 gen=123456 "
    "mem_total_kib=94800 mem_avail_kib=54812"
)


# --------------------------------------------------------------------------
# Pure parsing
# --------------------------------------------------------------------------


def test_parse_reply_ok_fields():
    reply = parse_reply("a1-7 ok pages=4096 bad=0 first_bad=-1\n")
    assert reply.request_id == "a1-7"
    assert reply.ok
    assert dict(reply.fields) == {"pages": "4096", "bad": "0", "first_bad": "-1"}
    assert reply.message == ""


def test_parse_reply_ok_without_fields():
    reply = parse_reply("x ok\r\n")
    assert reply.ok and dict(reply.fields) == {}


def test_parse_reply_err_keeps_whole_message():
    reply = parse_reply("9 err cpu=2 invalid: cpu must be a number in 0..1 (fraction of one vCPU)\n")
    assert not reply.ok
    assert reply.request_id == "9"
    assert reply.message == "cpu=2 invalid: cpu must be a number in 0..1 (fraction of one vCPU)"


@pytest.mark.parametrize(
    "line",
    [
        "",  # empty
        "lonely-id\n",  # no ok/err
        "7 maybe x=1\n",  # neither ok nor err
        "7 ok novalue\n",  # field without '='
        "7 ok =1\n",  # field without key
    ],
)
def test_parse_reply_rejects_malformed(line):
    with pytest.raises(GuestProtocolError):
        parse_reply(line)


def test_parse_status_all_fields():
    st = parse_status(parse_reply(f"1 ok {STATUS_FIELDS}").fields)
    assert st.boot_id == "00c0ffee12345678"
    assert st.heartbeat == 42
    assert st.uptime_ms == 5300
    assert st.cpu_target == pytest.approx(0.3)
    assert st.cpu_actual == pytest.approx(0.297)
    assert st.wss_mib == 16
    assert st.dirty_target_mib_s == pytest.approx(32.0)
    assert st.dirty_actual_mib_s == pytest.approx(31.95)
    assert st.generation == 123456
    assert st.mem_total_kib == 94800
    assert st.mem_avail_kib == 54812


def test_parse_status_dirty_max_is_inf():
    fields = dict(parse_reply(f"1 ok {STATUS_FIELDS}").fields, dirty_target="max")
    assert parse_status(fields).dirty_target_mib_s == math.inf


def test_parse_status_missing_field_is_named():
    fields = dict(parse_reply(f"1 ok {STATUS_FIELDS}").fields)
    del fields["hb"]
    with pytest.raises(GuestProtocolError, match="'hb'"):
        parse_status(fields)


@pytest.mark.parametrize("boot_id", ["123", "00C0FFEE12345678", "zz00ffee12345678"])
def test_parse_status_rejects_bad_boot_id(boot_id):
    fields = dict(parse_reply(f"1 ok {STATUS_FIELDS}").fields, boot_id=boot_id)
    with pytest.raises(GuestProtocolError, match="boot_id"):
        parse_status(fields)


def test_parse_status_rejects_non_numeric():
    fields = dict(parse_reply(f"1 ok {STATUS_FIELDS}").fields, wss_mib="lots")
    with pytest.raises(GuestProtocolError, match="wss_mib='lots'"):
        parse_status(fields)


def test_parse_integrity():
    clean = parse_integrity({"pages": "4096", "bad": "0", "first_bad": "-1"})
    assert (clean.pages, clean.bad, clean.first_bad, clean.ok) == (4096, 0, None, True)
    dirty = parse_integrity({"pages": "4096", "bad": "2", "first_bad": "17"})
    assert (dirty.bad, dirty.first_bad, dirty.ok) == (2, 17, False)


def test_format_request():
    assert format_request("ab-1", "status") == b"ab-1 status\n"
    assert format_request("ab-2", "set", {"cpu": "0.3", "dirty": "max"}) == b"ab-2 set cpu=0.3 dirty=max\n"


@pytest.mark.parametrize("bad", ["", "two words", "tab\there", "new\nline"])
def test_format_request_rejects_tokens_that_break_the_line(bad):
    with pytest.raises(ValueError):
        format_request("id", "fault", {"kind": bad})


# --------------------------------------------------------------------------
# Fake guest
# --------------------------------------------------------------------------


class FakeGuest:
    """A unix-socket server speaking the guest protocol.

    ``script(conn_no, request_id, words)`` decides what happens to each
    request line: it returns a list of reply lines to send (without
    newline), ``None`` to stay silent, or ``"drop"`` to close the
    connection without answering.
    """

    def __init__(self, path, script):
        self.path = str(path)
        self.script = script
        self.requests: list[tuple[int, str]] = []  # (connection number, line)
        self.connections = 0
        self.outstanding = 0
        self.max_outstanding = 0
        self._server: asyncio.AbstractServer | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self):
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)
        return self

    async def __aexit__(self, *exc):
        self._server.close()
        for w in self._writers:
            w.close()
        await self._server.wait_closed()

    async def _serve(self, reader, writer):
        self.connections += 1
        conn_no = self.connections
        self._writers.append(writer)
        try:
            while line := await reader.readline():
                text = line.decode().rstrip("\n")
                self.requests.append((conn_no, text))
                words = text.split()
                self.outstanding += 1
                self.max_outstanding = max(self.max_outstanding, self.outstanding)
                action = self.script(conn_no, words[0], words[1:])
                if action == "drop":
                    self.outstanding -= 1
                    writer.close()
                    return
                if action is None:
                    continue
                self.outstanding -= 1
                for reply in action:
                    writer.write(reply.encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


def answer_status(conn_no, request_id, words):
    return [f"{request_id} ok {STATUS_FIELDS}"]


@pytest.fixture
def sock(tmp_path):
    return tmp_path / "ctl.sock"


# --------------------------------------------------------------------------
# Client behaviour
# --------------------------------------------------------------------------


async def test_status_round_trip(sock):
    async with FakeGuest(sock, answer_status) as guest, GuestChannel(sock, timeout_s=2) as ch:
        st = await ch.status()
    assert st.heartbeat == 42 and st.boot_id == "00c0ffee12345678"
    ((_, line),) = guest.requests
    request_id, verb = line.split()
    assert verb == "status" and request_id


async def test_set_workload_sends_only_given_fields(sock):
    async with FakeGuest(sock, answer_status) as guest, GuestChannel(sock, timeout_s=2) as ch:
        await ch.set_workload(cpu=0.3, dirty_mib_s=math.inf)
        await ch.set_workload(wss_mib=24)
    assert [line.split()[1:] for _, line in guest.requests] == [
        ["set", "cpu=0.3", "dirty=max"],
        ["set", "wss=24"],
    ]


async def test_set_workload_rejects_fractional_wss_before_sending(sock):
    async with FakeGuest(sock, answer_status) as guest, GuestChannel(sock, timeout_s=2) as ch:
        with pytest.raises(TypeError):
            await ch.set_workload(wss_mib=16.5)
    assert guest.requests == []


async def test_ids_are_unique(sock):
    async with FakeGuest(sock, answer_status) as guest, GuestChannel(sock, timeout_s=2) as ch:
        for _ in range(5):
            await ch.status()
    ids = [line.split()[0] for _, line in guest.requests]
    assert len(set(ids)) == 5


async def test_stale_and_garbage_lines_are_skipped(sock):
    def script(conn_no, request_id, words):
        return [
            "someone-else-1 ok pages=1 bad=1 first_bad=0",  # stale id
            "garbage without protocol",  # unparseable
            f"{request_id} ok pages=4096 bad=0 first_bad=-1",
        ]

    async with FakeGuest(sock, script), GuestChannel(sock, timeout_s=2) as ch:
        report = await ch.check()
    assert report.ok and report.pages == 4096


async def test_timeout_then_late_reply_is_skipped(sock):
    """A silent guest gives GuestTimeout; its late answer to that request
    must not be taken as the answer to the next one."""
    first_id: list[str] = []

    def script(conn_no, request_id, words):
        if not first_id:
            first_id.append(request_id)
            return None  # never answers the first request in time
        return [
            f"{first_id[0]} ok pages=1 bad=1 first_bad=0",  # late answer to request 1
            f"{request_id} ok pages=8 bad=0 first_bad=-1",
        ]

    async with FakeGuest(sock, script), GuestChannel(sock, timeout_s=0.2) as ch:
        with pytest.raises(GuestTimeout, match="check"):
            await ch.check()
        report = await ch.check(timeout_s=2)
    assert report.pages == 8 and report.ok


async def test_err_reply_raises_refused_with_message(sock):
    message = "wss=999 invalid: wss must be an integer in 0..53 (MiB; limit = ...)"

    def script(conn_no, request_id, words):
        return [f"{request_id} err {message}"]

    async with FakeGuest(sock, script), GuestChannel(sock, timeout_s=2) as ch:
        with pytest.raises(GuestRefused) as info:
            await ch.set_workload(wss_mib=999)
    assert info.value.message == message
    assert info.value.verb == "set"
    assert isinstance(info.value, GuestChannelError)


async def test_reconnects_after_server_drops_connection(sock):
    """The server answers once and closes; the next request must work on a
    new connection."""

    def script(conn_no, request_id, words):
        return [f"{request_id} ok {STATUS_FIELDS}"]

    async with FakeGuest(sock, script) as guest, GuestChannel(sock, timeout_s=2) as ch:
        await ch.status()
        # Server side drops every connection it has.
        for w in guest._writers:
            w.close()
        st = await ch.status()
    assert st.heartbeat == 42
    assert guest.connections == 2


async def test_idempotent_request_retried_when_dropped_mid_request(sock):
    """Dropped while a status is in flight: retried once on a new connection."""

    def script(conn_no, request_id, words):
        return "drop" if conn_no == 1 else [f"{request_id} ok {STATUS_FIELDS}"]

    async with FakeGuest(sock, script) as guest, GuestChannel(sock, timeout_s=2) as ch:
        st = await ch.status()
    assert st.heartbeat == 42
    assert [conn for conn, _ in guest.requests] == [1, 2]


async def test_fault_is_not_retried(sock):
    def script(conn_no, request_id, words):
        return "drop"

    async with FakeGuest(sock, script) as guest, GuestChannel(sock, timeout_s=2) as ch:
        with pytest.raises(GuestChannelError, match="connection lost during 'fault'"):
            await ch.fault("corrupt")
    assert len(guest.requests) == 1


async def test_fault_report(sock):
    def script(conn_no, request_id, words):
        return [f"{request_id} ok kind=corrupt page=2047"]

    async with FakeGuest(sock, script), GuestChannel(sock, timeout_s=2) as ch:
        report = await ch.fault("corrupt")
    assert (report.kind, report.page) == ("corrupt", 2047)


async def test_no_server_is_a_channel_error(sock):
    async with GuestChannel(sock, timeout_s=2) as ch:
        with pytest.raises(GuestChannelError, match="cannot connect"):
            await ch.status()


async def test_concurrent_requests_are_serialised(sock):
    async with FakeGuest(sock, answer_status) as guest, GuestChannel(sock, timeout_s=2) as ch:
        results = await asyncio.gather(*(ch.status() for _ in range(8)))
    assert len(results) == 8
    assert guest.max_outstanding == 1  # never a second request before the answer
    assert len(guest.requests) == 8


def test_rejects_non_positive_timeout(sock):
    with pytest.raises(ValueError, match="timeout_s"):
        GuestChannel(sock, timeout_s=0)
