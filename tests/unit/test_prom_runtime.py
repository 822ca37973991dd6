"""cellbed.runtime.prom: histogram arithmetic, the counters' naming, the exporter over real HTTP on
loopback, and reads handed to the agent's event loop."""
from __future__ import annotations

import asyncio
import math
import random
import socket
import ssl
import threading
import urllib.error
import urllib.request

import pytest

from cellbed.domain.errors import InvalidArgument
from cellbed.domain.identity import Identity, Role
from cellbed.runtime import prom
from cellbed.runtime.pki import CellCA
from tests.unit.promtools import parse, scrape, series, value


# --- histogram arithmetic ------------------------------------------------------------------------------
def test_buckets_are_cumulative_with_inclusive_upper_bounds():
    b = prom.Buckets([0.1, 1, 10])
    for v in (0.05, 0.1, 0.5, 1.0, 3, 10, 11, 250):
        b.observe(v)
    # le is inclusive: 0.1 counts in the 0.1 bucket, 10 in the 10 bucket; 11 and 250 only in +Inf
    assert b.cumulative() == [("0.1", 2), ("1.0", 4), ("10.0", 6), ("+Inf", 8)]
    assert b.count == 8
    assert b.sum == pytest.approx(0.05 + 0.1 + 0.5 + 1.0 + 3 + 10 + 11 + 250)


def test_buckets_agree_with_counting_by_hand_on_random_values():
    rng = random.Random(15)
    bounds = sorted(rng.sample(range(1, 1000), 12))
    values = [rng.uniform(0, 1100) for _ in range(500)] + [float(rng.choice(bounds)) for _ in range(50)]
    b = prom.Buckets(bounds)
    for v in values:
        b.observe(v)
    want = [sum(1 for v in values if v <= le) for le in bounds] + [len(values)]
    assert [c for _, c in b.cumulative()] == want
    assert b.sum == pytest.approx(sum(values))


def test_nan_is_not_observed_and_bad_bounds_are_refused():
    b = prom.Buckets([1.0])
    b.observe(math.nan)
    assert b.count == 0 and b.sum == 0.0
    for bad in ([], [2, 1], [1, 1], [1, math.inf], [math.nan]):
        with pytest.raises(InvalidArgument):
            prom.Buckets(bad)


def test_histogram_set_exposes_every_series_and_empty_ones_as_zeros():
    h = prom.HistogramSet("cellbed_test_seconds", "test", ("host",), (1, 2))
    h.ensure(("h2",))
    for v in (0.5, 1.5, 5):
        h.observe(("h1",), v)

    class C(prom.StateCollector):
        def families(self):
            return [h.family()]
    types, s = scrape(C())
    assert types["cellbed_test_seconds"] == "histogram"
    assert value(s, "cellbed_test_seconds_bucket", host="h1", le="1.0") == 1
    assert value(s, "cellbed_test_seconds_bucket", host="h1", le="2.0") == 2
    assert value(s, "cellbed_test_seconds_bucket", host="h1", le="+Inf") == 3
    assert value(s, "cellbed_test_seconds_count", host="h1") == 3
    assert value(s, "cellbed_test_seconds_sum", host="h1") == pytest.approx(7.0)
    assert value(s, "cellbed_test_seconds_count", host="h2") == 0


# --- naming ----------------------------------------------------------------------------------------------
def test_counters_with_units_get_their_own_family_in_base_units():
    fams = prom.counter_families("cellbed_x", "X", {"agent": "a1"},
                                 {"reports": 3, "unaccounted_ms": 2500, "bytes_moved": 4096, "sync_failed": 1})

    class C(prom.StateCollector):
        def families(self):
            return fams
    types, s = scrape(C())
    assert types["cellbed_x_events"] == "counter"
    assert value(s, "cellbed_x_events_total", agent="a1", event="reports") == 3
    assert value(s, "cellbed_x_events_total", agent="a1", event="sync_failed") == 1
    assert value(s, "cellbed_x_unaccounted_seconds_total", agent="a1") == 2.5
    assert value(s, "cellbed_x_moved_bytes_total", agent="a1") == 4096
    assert {lb["event"] for lb in series(s, "cellbed_x_events_total")} == {"reports", "sync_failed"}


# --- the exporter -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("address", ["0.0.0.0", "::", "", "localhost", "10.0.0.300"])
def test_exporter_refuses_the_wildcard_and_anything_but_an_ip(address):
    with pytest.raises(InvalidArgument):
        prom.Exporter(address, 0, [])


def test_exporter_refuses_a_port_out_of_range():
    with pytest.raises(InvalidArgument):
        prom.Exporter("127.0.0.1", 70000, [])


class Counting(prom.StateCollector):
    def __init__(self, read=None):
        super().__init__(read)
        self.calls = 0
        self.threads = []

    def families(self):
        self.calls += 1
        self.threads.append(threading.get_ident())
        return [prom.gauge("cellbed_test_calls", "calls so far", {"agent": "t"}, self.calls)]


def test_exporter_serves_process_and_agent_metrics_on_loopback_and_stops():
    c = Counting()
    ex = prom.Exporter("127.0.0.1", 0, [c])
    assert ex.tls is None
    port = ex.start()
    try:
        assert port > 0 and ex.url == f"http://127.0.0.1:{port}/metrics"
        bodies = [urllib.request.urlopen(ex.url, timeout=10).read().decode() for _ in range(3)]
    finally:
        ex.stop()
    types, s = parse(bodies[-1])
    assert value(s, "cellbed_test_calls", agent="t") == 3          # read at every scrape, not cached
    assert value(s, "process_resident_memory_bytes") > 1 << 20
    assert ("process_cpu_seconds_total", frozenset()) in s
    with pytest.raises(OSError):
        urllib.request.urlopen(ex.url, timeout=5)


def test_reads_run_on_the_agents_loop_thread():
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        c = Counting(prom.OnLoop(loop))
        ex = prom.Exporter("127.0.0.1", 0, [c], process=False)
        ex.start()
        try:
            text = urllib.request.urlopen(ex.url, timeout=10).read().decode()
        finally:
            ex.stop()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(timeout=10)
        loop.close()
    assert c.threads == [t.ident]
    assert "process_resident_memory_bytes" not in text and "cellbed_test_calls" in text


def test_a_busy_loop_makes_the_read_fail_instead_of_hanging():
    loop = asyncio.new_event_loop()
    release = threading.Event()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    loop.call_soon_threadsafe(release.wait)           # the loop is stuck in a blocking call
    try:
        with pytest.raises(TimeoutError):
            prom.OnLoop(loop, timeout_s=0.2)(lambda: 1)
    finally:
        release.set()
        loop.call_soon_threadsafe(loop.stop)
        t.join(timeout=10)
        loop.close()


async def test_on_the_loop_itself_the_read_is_direct():
    c = Counting(prom.OnLoop(asyncio.get_running_loop()))
    _, s = scrape(c)
    assert value(s, "cellbed_test_calls", agent="t") == 1 and c.threads == [threading.get_ident()]


def test_with_the_cell_cas_files_the_exporter_serves_https_to_cell_certificates_only(tmp_path):
    ca = CellCA.create(tmp_path / "ca", "pm")
    server = ca.issue(Identity("pm", Role.NODE, "h1"), addresses=["127.0.0.1"])
    client = ca.issue(Identity("pm", Role.ADMIN, "prometheus"))
    ex = prom.Exporter("127.0.0.1", 0, [Counting()], tls=server, process=False)
    ex.start()
    try:
        assert ex.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=ca.cert_file)
        ctx.load_cert_chain(client.cert, client.key)
        body = urllib.request.urlopen(ex.url, timeout=10, context=ctx).read().decode()
        anonymous = ssl.create_default_context(cafile=ca.cert_file)     # trusts the server, shows no certificate
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(ex.url, timeout=10, context=anonymous).read()
    finally:
        ex.stop()
    assert "cellbed_test_calls" in body


def test_a_silent_client_does_not_stall_the_tls_exporter(tmp_path):
    """A client that connects and never starts its handshake holds one worker, not the server:
    a scrape with a cell certificate still gets its answer."""
    ca = CellCA.create(tmp_path / "ca", "pm")
    server = ca.issue(Identity("pm", Role.NODE, "h1"), addresses=["127.0.0.1"])
    client = ca.issue(Identity("pm", Role.ADMIN, "prometheus"))
    ex = prom.Exporter("127.0.0.1", 0, [Counting()], tls=server, process=False)
    ex.start()
    silent = socket.create_connection(("127.0.0.1", ex.port))
    try:
        ctx = ssl.create_default_context(cafile=ca.cert_file)
        ctx.load_cert_chain(client.cert, client.key)
        body = urllib.request.urlopen(ex.url, timeout=10, context=ctx).read().decode()
    finally:
        silent.close()
        ex.stop()
    assert "cellbed_test_calls" in body
