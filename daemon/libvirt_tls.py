"""libvirt and QEMU over TLS: where a node's certificates live, and the URI of a peer's libvirtd.

A secure node's libvirtd listens only on TLS (port 16514) and takes only clients with a
certificate of the cell's CA; its QEMU sends and receives migration data over TLS
(VIR_MIGRATE_TLS), each side verifying the other's certificate. The source libvirtd opens the
peer-to-peer connection to the destination libvirtd as a TLS client with the files of PKI_DIR
(the URI's ``pkipath``): on a namespace host that folder is inside the host's private
/etc/libvirt, so every host presents its own certificate (cellbed/cell/libvirt_conf.py writes
them). Lab servers keep libvirt's standard /etc/pki paths (ansible/roles/libvirt_host) and name
their URI in node.toml.

Plaintext (qemu+tcp, port 16509, no authentication) only for a node whose config is insecure by
explicit choice.
"""
from __future__ import annotations

PKI_DIR = "/etc/libvirt/pki"        # libvirt's files (pkipath layout, plus the server pair)
QEMU_DIR = f"{PKI_DIR}/qemu"        # QEMU's tls-creds-x509 folder (qemu.conf migrate_tls_x509_cert_dir)
TLS_PORT, TCP_PORT = 16514, 16509

# File names each program expects: key -> (libvirt's name, QEMU's name).
FILES = {
    "ca": ("cacert.pem", "ca-cert.pem"),
    "server_cert": ("servercert.pem", "server-cert.pem"),
    "server_key": ("serverkey.pem", "server-key.pem"),
    "client_cert": ("clientcert.pem", "client-cert.pem"),
    "client_key": ("clientkey.pem", "client-key.pem"),
}
KEYS = ("server_key", "client_key")   # written mode 0600

PLAIN_URI = "qemu+tcp://{address}/system"
TLS_URI = "qemu+tls://{address}/system?pkipath=" + PKI_DIR


def libvirt_path(what: str) -> str:
    """Where libvirtd (server) and the libvirt client (pkipath) read *what* on a namespace host."""
    return f"{PKI_DIR}/{FILES[what][0]}"


def migration_uri_template(configured: str, insecure: bool) -> str:
    """The peers' libvirtd URI: the configured template, or qemu+tls (qemu+tcp when insecure)."""
    if configured:
        return configured
    return PLAIN_URI if insecure else TLS_URI


def tls_by_default(template: str) -> bool:
    """Migration data goes over TLS by default when libvirt's own connection does: a node whose
    libvirt is plaintext (insecure, or a qemu+tcp lab) has no certificates for QEMU either."""
    return template.startswith("qemu+tls://")
