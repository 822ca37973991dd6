"""The three files of an identity's TLS: its CA's certificate, its own certificate and key.

Kept apart from cellbed/runtime/pki.py (which makes certificates with the `cryptography`
package): the agents only read their files, and so never import `cryptography` (9 MiB of RSS
in every daemon).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from cellbed.domain.errors import FailedPrecondition


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """The three files an agent needs: its CA's certificate, its own certificate and key."""

    ca: str
    cert: str
    key: str

    def read(self) -> tuple[bytes, bytes, bytes]:
        out = []
        for what, path in (("tls_ca", self.ca), ("tls_cert", self.cert), ("tls_key", self.key)):
            try:
                out.append(Path(path).read_bytes())
            except OSError as e:
                raise FailedPrecondition(f"{what} {path}: cannot read it ({e.strerror})") from None
        return out[0], out[1], out[2]

    def paths(self) -> list[str]:
        return [self.ca, self.cert, self.key]
