"""A cell's certificate authority (the `cryptography` package): one CA per cell, one certificate
per host, agent and the admin CLI, each naming its identity (cellbed/domain/identity.py).

Keys are ECDSA P-256, written mode 0600 (the folder 0700) and valid for ``days`` (default 30: a
cell is short-lived; rotate by issuing again, see docs/security.md). Every leaf certificate is
both a TLS server and a TLS client certificate, for the agent's addresses (IP SANs) and names
(DNS SANs), and carries the identity as the URI ``cellbed://<cell>/<role>/<name>``.
"""
from __future__ import annotations

import datetime
import functools
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.domain.identity import Identity
from cellbed.runtime.tlsfiles import TlsFiles

__all__ = ["CA_CERT", "CA_KEY", "CellCA", "DEFAULT_DAYS", "TlsFiles", "identity_of"]

CA_CERT, CA_KEY = "ca.crt", "ca.key"
DEFAULT_DAYS = 30


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class CellCA:
    """The CA of one cell, kept in *folder* (ca.crt, ca.key, and the leaves it issued)."""

    def __init__(self, folder: str | Path, cert: x509.Certificate, key) -> None:
        self.folder, self.cert, self.key = Path(folder), cert, key

    @classmethod
    def create(cls, folder: str | Path, cell: str, days: int = DEFAULT_DAYS) -> "CellCA":
        if not 1 <= days <= 3650:
            raise InvalidArgument(f"days={days}: allowed 1..3650")
        folder = Path(folder)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Cellbed"),
                          x509.NameAttribute(NameOID.COMMON_NAME, f"Cellbed cell {cell} CA")])
        now = _now()
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                             key_encipherment=False, data_encipherment=False, key_agreement=False,
                                             key_cert_sign=True, crl_sign=True, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        _write(folder / CA_KEY, _key_pem(key), 0o600)
        _write(folder / CA_CERT, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return cls(folder, cert, key)

    @classmethod
    def load(cls, folder: str | Path, cert_file: str | None = None, key_file: str | None = None) -> "CellCA":
        """The CA in *folder*, or an operator's CA given as two files (written into *folder*'s
        leaves only)."""
        folder = Path(folder)
        cf, kf = Path(cert_file or folder / CA_CERT), Path(key_file or folder / CA_KEY)
        try:
            cert = x509.load_pem_x509_certificate(cf.read_bytes())
            key = serialization.load_pem_private_key(kf.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as e:
            raise FailedPrecondition(f"CA {cf} / {kf}: cannot load it ({e})") from None
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return cls(folder, cert, key)

    @property
    def cert_file(self) -> str:
        return str(self.folder / CA_CERT)

    def issue(self, who: Identity, addresses: list[str] = (), dns: list[str] = (),
              days: int = DEFAULT_DAYS) -> TlsFiles:
        """A certificate and key for *who*, valid for its *addresses* and *dns* names."""
        return self._leaf(who.name, who.role.value, f"{who.role.value}-{who.name}", [who.uri], addresses, dns, days)

    def issue_server(self, name: str, addresses: list[str], days: int = DEFAULT_DAYS) -> TlsFiles:
        """A certificate for a service that is not a Cellbed identity (the cell's mosquitto): it
        proves the server's address to clients, and no RPC accepts it as a caller."""
        return self._leaf(name, "service", f"service-{name}", [], addresses, [], days)

    def _leaf(self, cn: str, ou: str, stem: str, uris: list[str], addresses, dns, days: int) -> TlsFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(u) for u in uris]
        for a in addresses:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(a)))
            except ValueError:
                raise InvalidArgument(f"address {a!r} of {cn}: not an IP address") from None
        sans += [x509.DNSName(d) for d in dict.fromkeys([*dns, cn])]
        now = _now()
        not_after = min(now + datetime.timedelta(days=days), self.cert.not_valid_after_utc)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Cellbed"),
                                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou),
                                         x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                .issuer_name(self.cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(not_after)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                             key_encipherment=True, data_encipherment=False, key_agreement=True,
                                             key_cert_sign=False, crl_sign=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_path, key_path = self.folder / f"{stem}.crt", self.folder / f"{stem}.key"
        _write(key_path, _key_pem(key), 0o600)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return TlsFiles(ca=self.cert_file, cert=str(cert_path), key=str(key_path))


@functools.lru_cache(maxsize=256)
def identity_of(cert_pem: bytes) -> Identity | None:
    """The Cellbed identity a certificate carries (its cellbed:// URI SAN), or None."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.UniformResourceIdentifier)
    except (ValueError, x509.ExtensionNotFound):
        return None
    for u in uris:
        try:
            return Identity.from_uri(u)
        except InvalidArgument:
            continue
    return None
