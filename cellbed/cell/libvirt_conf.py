"""The libvirt configuration of one namespace host: libvirtd.conf and qemu.conf in the host's
private /etc/libvirt (bind-mounted by cellbed/cell/hostinit.py), the host's certificates under
it, and the passwd/group copies libvirtd needs. Written by `cellctl cell up` before the host
starts.

With the host's TLS files (its node certificate of the cell CA, which is both a server and a
client certificate for the host's address), libvirtd listens only on TLS (16514) and takes only
clients holding a node certificate of the cell; QEMU migrates over TLS with the same
certificate, each side verifying the other (daemon/libvirt_tls.py has the layout and the URI).
Without them (an insecure cell, by explicit choice), libvirtd listens on plaintext TCP (16509)
with no authentication, as on an isolated box.
"""
from __future__ import annotations

import os
import uuid

from cellbed.daemon import libvirt_tls as lt
from cellbed.runtime.tlsfiles import TlsFiles

# The subject of a node certificate of the cell CA as libvirt prints it (virt-pki-query-dn):
# libvirtd takes no other client (not the admin's, a broker's or a GM's certificate).
NODE_DN = "O=Cellbed,OU=node,CN=*"


def _write(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def write_pki(etc: str, tls: TlsFiles) -> dict[str, str]:
    """The host's CA, certificate and key under *etc* (its /etc/libvirt) in libvirt's and QEMU's
    names (keys 0600, folders 0700); returns what was written, by path inside the host."""
    ca, cert, key = tls.read()
    data = {"ca": ca, "server_cert": cert, "server_key": key, "client_cert": cert, "client_key": key}
    pki = os.path.join(etc, os.path.relpath(lt.PKI_DIR, "/etc/libvirt"))
    qemu = os.path.join(etc, os.path.relpath(lt.QEMU_DIR, "/etc/libvirt"))
    written = {}
    for folder, inside, col in ((pki, lt.PKI_DIR, 0), (qemu, lt.QEMU_DIR, 1)):
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        for what, names in lt.FILES.items():
            _write(os.path.join(folder, names[col]), data[what], 0o600 if what in lt.KEYS else 0o644)
            written[f"{inside}/{names[col]}"] = what
    return written


def libvirtd_conf(host: str, address: str, tls: bool, host_uuid: str) -> str:
    common = (f'listen_addr = "{address}"\nauth_unix_rw = "none"\nunix_sock_group = "root"\n'
              f'host_uuid = "{host_uuid}"\nlog_outputs = "3:stderr"\n')
    if not tls:
        return (f"# Written by cellctl cell up for host {host}\n"
                "# INSECURE (an insecure cell, by explicit choice): plaintext TCP, no authentication\n"
                f'listen_tls = 0\nlisten_tcp = 1\ntcp_port = "{lt.TCP_PORT}"\nauth_tcp = "none"\n{common}')
    return (f"# Written by cellctl cell up for host {host}: TLS only, clients need a node certificate of the cell\n"
            f'listen_tls = 1\nlisten_tcp = 0\ntls_port = "{lt.TLS_PORT}"\n'
            f'ca_file = "{lt.libvirt_path("ca")}"\ncert_file = "{lt.libvirt_path("server_cert")}"\n'
            f'key_file = "{lt.libvirt_path("server_key")}"\ntls_no_verify_certificate = 0\n'
            f'tls_allowed_dn_list = ["{NODE_DN}"]\n{common}')


def qemu_conf(host: str, address: str, tls: bool) -> str:
    out = f"""# Written by cellctl cell up for host {host}
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
migration_host = "{address}"
migration_address = "{address}"
migration_port_min = 49152
migration_port_max = 49215
"""
    if tls:   # VIR_MIGRATE_TLS: both QEMUs present the host's certificate and verify the peer's
        out += (f'default_tls_x509_cert_dir = "{lt.QEMU_DIR}"\ndefault_tls_x509_verify = 1\n'
                f'migrate_tls_x509_cert_dir = "{lt.QEMU_DIR}"\nmigrate_tls_x509_verify = 1\n'
                "# Not forced: the node daemon migrates over TLS unless a request says tls=false (benchmarks).\n"
                "migrate_tls_force = 0\n")
    return out


def write_host_files(hdir: str, host: str, address: str, tls: TlsFiles | None = None) -> None:
    """libvirtd.conf, qemu.conf, the TLS files (unless *tls* is None: an insecure cell) and the
    passwd/group copies of one host, under *hdir*."""
    etc = os.path.join(hdir, "etc-libvirt")
    for sub in ("etc-libvirt", "var-lib-libvirt/qemu/channel/cellbed", "var-log-libvirt/qemu",
                "var-cache-libvirt/qemu", "logs"):
        os.makedirs(os.path.join(hdir, sub), exist_ok=True)
    if tls is not None:
        write_pki(etc, tls)
    with open(os.path.join(etc, "libvirtd.conf"), "w") as f:
        f.write(libvirtd_conf(host, address, tls is not None, str(uuid.uuid4())))
    with open(os.path.join(etc, "qemu.conf"), "w") as f:
        f.write(qemu_conf(host, address, tls is not None))
    # libvirtd refuses to start without a libvirt-qemu user: give the host its own copy.
    with open("/etc/passwd") as f:
        passwd = f.read()
    with open("/etc/group") as f:
        group = f.read()
    if "\nlibvirt-qemu:" not in "\n" + passwd:
        passwd += "libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin\n"
    for g, gid in (("kvm", 64054), ("libvirt-qemu", 64055), ("libvirt", 64056)):
        if f"\n{g}:" not in "\n" + group:
            group += f"{g}:x:{gid}:\n"
    for fn, content in (("passwd", passwd), ("group", group)):
        with open(os.path.join(hdir, fn), "w") as f:
            f.write(content)
