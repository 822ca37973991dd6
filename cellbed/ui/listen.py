"""Where `cellctl ui` listens, and with what TLS.

Loopback (127.0.0.0/8, ::1, localhost) may be plaintext: the token still guards it. Any other
address only with TLS, never plaintext on a network: the certificate is --tls-cert/--tls-key, or,
when the cell named by --cell has a CA on this box, a server certificate of the cell's CA issued
for that address into the cell's PKI folder (so `cellctl cell down` removes it with the rest).
"""
from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass

from cellbed.domain import errors
from cellbed.runtime.pki import CellCA

DEFAULT_PORT = 8470
UI_CERT_NAME = "ui"


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host


def parse_listen(text: str) -> Listen:
    """"HOST:PORT", "[v6]:PORT" or "HOST" (port 8470); port 0 picks a free one."""
    t = text.strip()
    if t.startswith("["):
        host, _, rest = t[1:].partition("]")
        port_s = rest[1:] if rest.startswith(":") else ""
    elif t.count(":") == 1:
        host, _, port_s = t.partition(":")
    else:
        host, port_s = t, ""
    if not host:
        raise errors.InvalidArgument(f"--listen {text!r}: allowed HOST:PORT, e.g. 127.0.0.1:{DEFAULT_PORT}")
    try:
        port = int(port_s) if port_s else DEFAULT_PORT
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise errors.InvalidArgument(f"--listen {text!r}: port must be 0..65535")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise errors.InvalidArgument(f"--listen {text!r}: HOST must be an IP address or localhost") from None
    return Listen(host, port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise errors.InvalidArgument(f"--tls-cert {cert} / --tls-key {key}: cannot load them: {e}") from None
    return ctx


def tls_for(listen: Listen, cert: str, key: str, cell_state: dict | None) -> ssl.SSLContext | None:
    """The TLS context to serve with, or None for plaintext (loopback only). Refuses (InvalidArgument,
    one line, exit 2) a non-loopback address that would be served in plaintext."""
    if bool(cert) != bool(key):
        raise errors.InvalidArgument("--tls-cert and --tls-key: give both or neither")
    if cert:
        return server_context(cert, key)
    if listen.loopback:
        return None
    addr = ipaddress.ip_address(listen.host)
    pki = (cell_state or {}).get("pki") if not (cell_state or {}).get("insecure") else None
    if pki is None or addr.is_unspecified:
        why = ("a wildcard address has no one address to certify" if pki is not None
               else "the cell has no CA on this box" if cell_state is not None else "no cell on this box")
        raise errors.InvalidArgument(
            f"--listen {listen.host}:{listen.port} is not loopback and would be plaintext ({why}): give --tls-cert "
            "and --tls-key (the UI never serves plaintext on a network)")
    files = CellCA.load(pki["dir"]).issue_server(UI_CERT_NAME, [listen.host])
    return server_context(files.cert, files.key)


def ca_file(cell_state: dict | None) -> str:
    """The cell CA's certificate (what a browser must trust for the UI's own certificate), or ""."""
    pki = (cell_state or {}).get("pki") or {}
    return pki.get("ca", "") if os.path.exists(pki.get("ca", "") or "") else ""
