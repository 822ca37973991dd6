"""Prometheus exposition for an agent process (issue 15): one HTTP exporter per process, with its
own registry, and the pieces the agents' collectors (``daemon/prom.py``, ``broker/prom.py``,
``controller/megha/prom.py``) are built from.

* :class:`Exporter` serves ``/metrics`` on the agent's own address (never 0.0.0.0) in a
  background thread (:class:`MetricsServer`, prometheus_client's WSGI app), with the process's RSS and CPU
  (``ProcessCollector``: ``process_resident_memory_bytes``, ``process_cpu_seconds_total``, ...).
  Port 0 binds an ephemeral port (tests); the daemons' configs use ``metrics_port = 0`` for "off"
  and never construct an exporter then. Given the agent's ``TlsFiles`` (the cell CA's certificate,
  the agent's certificate and key: ``cellbed.runtime.pki``), it serves HTTPS and requires a client
  certificate from the cell CA (any identity of the cell may read); the entry points pass the
  agent's own files, None (plain HTTP) only for an agent that runs insecure by choice.
* :class:`StateCollector` reads an agent's public state at scrape time, *on the agent's event
  loop* (:class:`OnLoop`), where that state changes: the HTTP thread never iterates a dict that
  the loop is resizing. The families are built there too; the HTTP thread only formats them.
* :class:`Buckets` and :class:`HistogramSet` accumulate histograms (cumulative, as Prometheus
  wants them) from records the agents keep: a migration history, allocation records.
"""
from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import ipaddress
import logging
import math
import socket
import ssl
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

from cellbed.domain.errors import InvalidArgument, check_range

if TYPE_CHECKING:
    from cellbed.runtime.tlsfiles import TlsFiles

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 5.0     # how long a scrape waits for the agent's loop
MIB = 2 ** 20


def check_bind_address(address: str) -> str:
    """*address* as an IP literal the exporter may bind: the agent's own, never the wildcard."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise InvalidArgument(f"metrics address {address!r}: give the agent's own IP address") from None
    if ip.is_unspecified:
        raise InvalidArgument(f"metrics address {address}: the wildcard would expose the metrics on every "
                              "interface; give the agent's own address")
    return str(ip)


class OnLoop:
    """Call a function on *loop*'s thread and wait for its result (at most *timeout_s*). Called on
    that thread already, or with no running loop (unit tests, a loop that has stopped), it calls
    the function directly."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None, timeout_s: float = SCRAPE_TIMEOUT_S) -> None:
        self.loop = loop
        self.timeout_s = timeout_s

    def __call__(self, fn: Callable):
        loop = self.loop
        if loop is None or not loop.is_running() or _running_loop() is loop:
            return fn()
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            if not fut.set_running_or_notify_cancel():
                return
            try:
                fut.set_result(fn())
            except BaseException as e:   # handed to the scraping thread, which re-raises it
                fut.set_exception(e)
        loop.call_soon_threadsafe(run)
        try:
            return fut.result(self.timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"the agent's event loop did not answer the scrape within {self.timeout_s:g} s"
                               ) from None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class StateCollector:
    """A custom collector: :meth:`families` reads the agent's public state and returns metric
    families; :meth:`collect` runs it through *read* (an :class:`OnLoop`)."""

    def __init__(self, read: OnLoop | None = None) -> None:
        self.read = read or OnLoop(None)

    def describe(self) -> list:
        return []          # nothing to check at registration: every name is prefixed cellbed_

    def collect(self) -> Iterable:
        return self.read(self.families)

    def families(self) -> list:
        raise NotImplementedError


# --- histograms ---------------------------------------------------------------------------------

class Buckets:
    """One histogram: upper bounds (inclusive, as Prometheus' ``le``), a count per bucket plus the
    +Inf bucket, and the sum. NaN observations are ignored (a record without the figure)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        b = tuple(float(x) for x in bounds)
        if not b or list(b) != sorted(set(b)) or not all(math.isfinite(x) for x in b):
            raise InvalidArgument(f"histogram bounds {bounds!r}: give finite, strictly increasing numbers")
        self.bounds = b
        self.counts = [0] * (len(b) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        if math.isnan(v):
            return
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """[(le, observations ≤ le)], ending with ("+Inf", count)."""
        out, acc = [], 0
        for le, c in zip(self.bounds + (math.inf,), self.counts):
            acc += c
            out.append((floatToGoString(le), acc))
        return out


class HistogramSet:
    """Histograms of one metric by label values (e.g. per host, per part)."""

    def __init__(self, name: str, doc: str, labels: Sequence[str], bounds: Sequence[float]) -> None:
        self.name, self.doc, self.labels, self.bounds = name, doc, tuple(labels), tuple(bounds)
        Buckets(bounds)                              # checks the bounds once, here
        self.series: dict[tuple[str, ...], Buckets] = {}

    def observe(self, values: Sequence[str], v: float) -> None:
        b = self.series.get(tuple(values))
        if b is None:
            b = self.series[tuple(values)] = Buckets(self.bounds)
        b.observe(v)

    def ensure(self, values: Sequence[str]) -> None:
        """Expose this series (empty) before its first observation, so that queries see zeros."""
        self.series.setdefault(tuple(values), Buckets(self.bounds))

    def reset(self) -> None:
        self.series.clear()

    def family(self) -> HistogramMetricFamily:
        f = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        for values, b in sorted(self.series.items()):
            f.add_metric(list(values), b.cumulative(), b.sum)
        return f


# --- families from plain values ---------------------------------------------------------------------

def gauge(name: str, doc: str, labels: Mapping[str, str], samples: Iterable[tuple[Sequence[str], float]] | float,
          extra: Sequence[str] = ()) -> GaugeMetricFamily:
    """A gauge with the agent's *labels*; *samples* is one value, or (extra label values, value) pairs
    for the *extra* label names."""
    return _fill(GaugeMetricFamily(name, doc, labels=[*labels, *extra]), labels, samples)


def counter(name: str, doc: str, labels: Mapping[str, str], samples: Iterable[tuple[Sequence[str], float]] | float,
            extra: Sequence[str] = ()) -> CounterMetricFamily:
    """Like :func:`gauge`, for a counter (*name* without ``_total``: the family adds it)."""
    return _fill(CounterMetricFamily(name, doc, labels=[*labels, *extra]), labels, samples)


def _fill(f, labels: Mapping[str, str], samples):
    base = list(labels.values())
    if isinstance(samples, (int, float)):
        f.add_metric(base, float(samples))
    else:
        for values, v in samples:
            f.add_metric(base + list(values), float(v))
    return f


def counter_families(prefix: str, what: str, labels: Mapping[str, str], counters: Mapping[str, float]) -> list:
    """An agent's event counters (the ``counters`` its status RPCs show) as Prometheus counters:
    ``{prefix}_events_total{event=...}``; a counter that carries a unit gets its own family in base
    units (``x_ms`` -> ``{prefix}_x_seconds_total``, ``bytes_x`` -> ``{prefix}_x_bytes_total``)."""
    events, out = [], []
    for k in sorted(counters):
        v = float(counters[k])
        if k.endswith("_ms"):
            out.append(counter(f"{prefix}_{k[:-3]}_seconds", f"{what}: {k} in seconds", labels, v / 1000.0))
        elif k.startswith("bytes_") or k.endswith("_bytes"):
            stem = k[6:] if k.startswith("bytes_") else k[:-6]
            out.append(counter(f"{prefix}_{stem}_bytes", f"{what}: {k}", labels, v))
        else:
            events.append(((k,), v))
    return [counter(f"{prefix}_events", f"{what}: events by kind (the counters of its status RPC)", labels, events,
                    extra=("event",))] + out


# --- the HTTP side ------------------------------------------------------------------------------------

class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:      # no access log on the daemon's stderr
        pass


class MetricsServer(WSGIServer):
    """wsgiref's HTTP server for one WSGI app. Every connection goes to a pool of *workers*
    threads, which do the TLS handshake (when *ssl_ctx* is given) and the request, each bounded by
    *timeout_s*: a client that connects and stays silent holds one worker for that long, never the
    accepting thread (prometheus_client's own server shakes hands there, without a timeout)."""

    def __init__(self, address: str, port: int, app, ssl_ctx: ssl.SSLContext | None = None, workers: int = 2,
                 timeout_s: float = SCRAPE_TIMEOUT_S) -> None:
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.ssl_ctx, self.timeout_s = ssl_ctx, timeout_s
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="metrics")
        super().__init__((address, port), _QuietHandler)
        self.set_app(app)

    def process_request(self, request, client_address) -> None:
        self.pool.submit(self._serve_one, request, client_address)

    def _serve_one(self, request, client_address) -> None:
        try:
            request.settimeout(self.timeout_s)
            if self.ssl_ctx is not None:
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
            self.finish_request(request, client_address)
        except OSError as e:            # a failed handshake (no cell certificate), a timeout, a hang-up
            log.debug("metrics: %s: %s", client_address[0], e)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def server_tls(files: "TlsFiles") -> ssl.SSLContext:
    """HTTPS with the agent's certificate, for clients with a certificate of the same CA only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert, files.key)
    ctx.load_verify_locations(cafile=files.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class Exporter:
    """``/metrics`` of one agent process on ADDRESS:PORT (port 0: an ephemeral port), with its own
    registry: the process collector and the agents' collectors."""

    def __init__(self, address: str, port: int, collectors: Sequence, *, tls: "TlsFiles | None" = None,
                 process: bool = True) -> None:
        self.address = check_bind_address(address)
        check_range("metrics_port", port, 0, 65535)
        self.requested_port = port
        self.tls = tls
        self.registry = CollectorRegistry(auto_describe=False)
        if process:
            ProcessCollector(registry=self.registry)
        for c in collectors:
            self.registry.register(c)
        self.port = 0
        self._server: MetricsServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        scheme = "http" if self.tls is None else "https"
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{scheme}://{host}:{self.port}/metrics"

    def start(self) -> int:
        """Bind and serve in a daemon thread; returns the bound port. With TLS files: HTTPS, and
        only clients with a certificate of the cell CA may scrape."""
        self._server = MetricsServer(self.address, self.requested_port, make_wsgi_app(self.registry),
                                     server_tls(self.tls) if self.tls is not None else None)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        log.info("metrics on %s", self.url)
        return self.port

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None
