"""cellctl pki init / issue: a cell CA and its certificates outside the single-box cell, for lab
servers (the Ansible roles run these on the controller) or by hand; `issue --server` makes a
server certificate with no Cellbed identity (the lab's mosquitto).

Both are idempotent: an existing CA is kept, and a certificate that exists, was issued by this CA
for the same identity and addresses, and is valid for more than a third of its lifetime is kept;
the JSON output says whether anything changed (Ansible's `changed_when` reads it).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509

from cellbed.cli.common import emit
from cellbed.domain import errors
from cellbed.domain.identity import Identity, Role
from cellbed.runtime.pki import CA_CERT, CA_KEY, CellCA, identity_of


def cmd_pki_init(args) -> None:
    folder = Path(args.dir)
    if (folder / CA_CERT).exists() and (folder / CA_KEY).exists():
        CellCA.load(folder)                      # refuses an unreadable CA, naming the files
        emit(args, {"changed": False, "ca": str(folder / CA_CERT)}, f"CA {folder / CA_CERT} kept")
        return
    if bool(args.ca_cert) != bool(args.ca_key):
        raise errors.InvalidArgument("--ca-cert and --ca-key: give both (the operator's CA) or neither")
    if args.ca_cert:
        ca = CellCA.load(folder, args.ca_cert, args.ca_key)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for src, dst, mode in ((args.ca_cert, CA_CERT, 0o644), (args.ca_key, CA_KEY, 0o600)):
            data = Path(src).read_bytes()
            fd = os.open(folder / dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        what = f"operator's CA {args.ca_cert} installed"
    else:
        ca = CellCA.create(folder, args.cell, days=args.days)
        what = f"new CA for cell {args.cell}, valid {args.days} days"
    emit(args, {"changed": True, "ca": ca.cert_file}, f"{what}: {ca.cert_file}")


def _still_good(path: Path, ca: CellCA, who: Identity | None, addresses: list[str]) -> bool:
    """*who* None: a server certificate, which must carry no identity."""
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return False
    if cert.issuer != ca.cert.subject or identity_of(path.read_bytes()) != who:
        return False
    try:
        ips = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.IPAddress))
    except x509.ExtensionNotFound:
        ips = set()
    if ips != {ipaddress.ip_address(a) for a in addresses}:
        return False
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    return cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc) > life / 3


def cmd_pki_issue(args) -> None:
    """A certificate for one identity, or with --server one for a service that is no identity
    (the cell's mosquitto: it proves its address to the clients, and no RPC accepts it)."""
    ca = CellCA.load(args.dir)
    who = None if args.server else Identity(args.cell, Role(args.role), args.name)
    for a in args.address:
        try:
            ipaddress.ip_address(a)
        except ValueError:
            raise errors.InvalidArgument(f"--address {a!r}: not an IP address") from None
    if who is None and not args.address:
        raise errors.InvalidArgument("--server: give the server's --address (its clients check it)")
    what = f"server {args.name}" if who is None else str(who)
    cert = Path(args.dir) / (f"service-{args.name}.crt" if who is None else f"{who.role.value}-{who.name}.crt")
    if _still_good(cert, ca, who, args.address) and cert.with_suffix(".key").exists():
        emit(args, {"changed": False, "cert": str(cert), "key": str(cert.with_suffix(".key"))}, f"{what}: {cert} kept")
        return
    if who is None:
        files = ca.issue_server(args.name, args.address, days=args.days)
    else:
        files = ca.issue(who, args.address, days=args.days)
    emit(args, {"changed": True, "cert": files.cert, "key": files.key}, f"{what}: issued {files.cert}")
