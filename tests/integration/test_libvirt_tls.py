"""libvirt and migration data over TLS on a 2-host single-box cell (issue 13, part 3).

- a migration with default options runs over TLS (its record says so, and the first bytes on
  QEMU's migration port are a TLS handshake, not QEMU's stream magic), and is verified;
- tls=false is plaintext (the same capture sees QEMU's magic: the capture works);
- libvirtd listens only on TLS (16514) and refuses clients without a certificate, with a
  certificate of another CA, or with a cell certificate of another role than node.
"""
import os
import socket
import ssl
import struct
import subprocess
import threading

import pytest

from cellbed.cell import cell as cellmod
from cellbed.cell import cell_pki
from cellbed.daemon import libvirt_tls as lt
from cellbed.domain.identity import Identity, Role
from cellbed.runtime.client import NodeClient
from cellbed.runtime.pki import CellCA
from cellbed.v1 import node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.conftest import GUEST, libvirt_uri, virsh_names

pytestmark = pytest.mark.integration

CELL, SUBNET = "lt", "10.231.16.0/24"
MIGRATION_PORTS = range(49152, 49216)
QEMU_MAGIC = b"QEVM"            # QEMU_VM_FILE_MAGIC: the first bytes of a plaintext migration stream
TLS_HANDSHAKE = b"\x16\x03"     # a TLS record of type handshake (ClientHello)


@pytest.fixture(scope="module")
def cell(state_root):
    if os.geteuid() != 0 or not os.path.exists(os.path.join(GUEST, "initrd.img")):
        pytest.fail("integration cell cannot run: needs root and the guest (./cellbed.sh setup)")
    st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[0.6], host_mem_mib=[768], root=state_root,
                    monitor_period_s=1.0)
    try:
        yield st
    finally:
        for h in st["hosts"]:
            for log in ("node.log", "libvirtd.log"):
                p = os.path.join(state_root, CELL, h, "logs", log)
                if os.path.exists(p):
                    print(f"--- {h} {log} (tail)\n" + "".join(open(p).readlines()[-25:]))
        cellmod.down(CELL, state_root)


def addr(cell, h: str) -> str:
    return cell["hosts"][h]["address"]


def client(cell, h: str) -> NodeClient:
    return NodeClient(f"{addr(cell, h)}:{cell['hosts'][h]['grpc_port']}", h,
                      cell_pki.security(cell, Role.ADMIN, "admin"))


def host_pki(state_root: str, h: str) -> str:
    """The host's libvirt pki folder as seen from the box (it is /etc/libvirt/pki inside the host)."""
    return os.path.join(state_root, CELL, h, "etc-libvirt", os.path.relpath(lt.PKI_DIR, "/etc/libvirt"))


class FirstBytes(threading.Thread):
    """The first payload bytes of every TCP connection to QEMU's migration ports seen on a link
    of the cell (a packet socket on the host's veth: it only listens)."""

    def __init__(self, ifname: str) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((ifname, 0))
        self.sock.settimeout(0.2)
        self.flows: dict[tuple, bytes] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                pkt = self.sock.recv(65535)
            except socket.timeout:
                continue
            if pkt[12:14] != b"\x08\x00" or pkt[23] != 6:    # IPv4, TCP
                continue
            ip = pkt[14:]
            ihl, total = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0]
            tcp = ip[ihl:total]
            sport, dport = struct.unpack("!HH", tcp[:4])
            payload = tcp[(tcp[12] >> 4) * 4:]
            key = (bytes(ip[12:16]), sport, bytes(ip[16:20]), dport)
            if dport in MIGRATION_PORTS and payload and key not in self.flows:
                self.flows[key] = bytes(payload[:8])

    def __enter__(self) -> "FirstBytes":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.join(timeout=5)
        self.sock.close()


async def start_vm(cell, h: str, name: str) -> None:
    w = npb.Workload(cpu_load=0.05, wss_mib=32, dirty_mib_s=4)
    async with client(cell, h) as c:
        await c.call("StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=name, mem_mib=128, vcpus=1, workload=w)),
                     timeout=240)

    async def beats():
        async with client(cell, h) as c:
            vms = {v.spec.name: v for v in (await c.call("ListVms", npb.ListVmsRequest())).vms}
        return vms.get(name) is not None and vms[name].heartbeat > 0
    await wait_until(beats, 60, f"heartbeat of {name} on {h}")


async def migrate(cell, src: str, dst: str, name: str, opts: npb.MigrationOptions) -> tuple:
    with FirstBytes(f"cb{CELL}{dst}") as cap:   # the host's veth on the bridge (cellbed/cell/cell.py HostPlan)
        async with client(cell, src) as c:
            rec = (await c.call("MigrateVm", npb.MigrateVmRequest(name=name, dest_host=dst, options=opts),
                                timeout=300)).record
    return rec, list(cap.flows.values())


def assert_verified(rec) -> None:
    assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED, rec.detail
    assert rec.heartbeat_after > rec.heartbeat_before > 0
    assert rec.integrity_pages == 32 * 256 and rec.integrity_bad == 0


async def test_migration_runs_over_tls_by_default_and_is_verified(cell):
    await start_vm(cell, "h1", "tls1")
    try:
        rec, first = await migrate(cell, "h1", "h2", "tls1", npb.MigrationOptions())   # cellctl vm migrate: no flag
        assert_verified(rec)
        assert rec.tls and rec.options.tls, "a secure cell migrates over TLS by default"
        assert first and all(b.startswith(TLS_HANDSHAKE) for b in first), first
        assert not any(QEMU_MAGIC in b for b in first)
        assert "tls1" in virsh_names(libvirt_uri(cell, "h2")) and "tls1" not in virsh_names(libvirt_uri(cell, "h1"))
        # The way back without TLS, by explicit choice: QEMU's stream is plaintext (and the capture sees it).
        back, first = await migrate(cell, "h2", "h1", "tls1", npb.MigrationOptions(tls=False))
        assert_verified(back)
        assert not back.tls and back.options.HasField("tls") and not back.options.tls
        assert any(b.startswith(QEMU_MAGIC) for b in first), first
    finally:
        for h in ("h1", "h2"):
            async with client(cell, h) as c:
                if "tls1" in [v.spec.name for v in (await c.call("ListVms", npb.ListVmsRequest())).vms]:
                    await c.call("StopVm", npb.StopVmRequest(name="tls1"), timeout=60)


def test_libvirtd_listens_only_on_tls(cell):
    netns = cell["hosts"]["h1"]["netns"]
    out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-ltnpH"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    libvirtd = [line for line in out.splitlines() if '"libvirtd"' in line]
    assert any(f"{addr(cell, 'h1')}:{lt.TLS_PORT} " in line for line in libvirtd), out
    assert not any(f":{lt.TCP_PORT} " in line for line in out.splitlines()), out


def virsh(uri: str) -> subprocess.CompletedProcess:
    return subprocess.run(["virsh", "-c", uri, "hostname"], capture_output=True, text=True, timeout=60)


def pki_dir(tmp_path, name: str, ca: str, cert: str | None = None, key: str | None = None) -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "cacert.pem").write_bytes(open(ca, "rb").read())
    if cert:
        (d / "clientcert.pem").write_bytes(open(cert, "rb").read())
        (d / "clientkey.pem").write_bytes(open(key, "rb").read())
        os.chmod(d / "clientkey.pem", 0o600)
    return str(d)


class Refusals:
    """virsh connections to a host's libvirtd that must fail, and the reason its log gives."""

    def __init__(self, state_root: str, h: str) -> None:
        self.log = os.path.join(state_root, CELL, h, "logs", "libvirtd.log")

    def since(self, seen: int) -> str:
        with open(self.log, errors="replace") as f:
            f.seek(seen)
            return f.read()

    def check(self, uri: str, why: str) -> None:
        seen = os.path.getsize(self.log)
        r = virsh(uri)
        assert r.returncode != 0, f"{uri} was accepted: {r.stdout}"
        new = self.since(seen)
        assert why.lower() in new.lower(), f"{uri}: {r.stderr.strip()}; libvirtd said:\n{new}"


def test_libvirtd_takes_only_node_certificates_of_the_cell(cell, state_root, tmp_path):
    a = addr(cell, "h2")
    ca = os.path.join(host_pki(state_root, "h2"), "cacert.pem")
    # A node of the cell (h1's own files): accepted, and the server's certificate matches its address.
    ok = virsh(f"qemu+tls://{a}/system?pkipath={host_pki(state_root, 'h1')}")
    assert ok.returncode == 0 and ok.stdout.strip() == "h2", ok.stderr
    # Plaintext TCP: nothing listens.
    plain = virsh(f"qemu+tcp://{a}/system")
    assert plain.returncode != 0 and "refused" in plain.stderr.lower(), plain.stderr
    refusals = Refusals(state_root, "h2")
    # No client certificate: libvirtd ends the session.
    refusals.check(f"qemu+tls://{a}/system?pkipath={pki_dir(tmp_path, 'none', ca)}", "No certificate was found")
    # A certificate of the cell CA, but an admin's (not a node's): refused by libvirtd's DN list.
    cell_ca = CellCA.load(os.path.join(state_root, CELL, "pki"))
    admin = cell_ca.issue(Identity(CELL, Role.ADMIN, "lt-test"), ["127.0.0.1"], days=1)
    refusals.check(f"qemu+tls://{a}/system?pkipath={pki_dir(tmp_path, 'admin', ca, admin.cert, admin.key)}",
                   "Distinguished Name is not on the list of allowed clients")


def tls_session(a: str, ca: str, cert: str | None = None, key: str | None = None) -> bytes:
    """Open a TLS session to libvirtd as a bare client and read: b"" or the error when it is cut off."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    with socket.create_connection((a, lt.TLS_PORT), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=a) as t:   # the server's certificate names its address
            try:
                return t.recv(1)
            except (ssl.SSLError, ConnectionError) as e:
                return repr(e).encode()


def test_a_bare_tls_client_without_a_cell_certificate_gets_no_session(cell, state_root, tmp_path):
    """Below virsh (whose client checks its own certificate first): a client that trusts the cell
    CA but has no certificate, or a node certificate of another CA, is cut off by libvirtd."""
    a = addr(cell, "h2")
    ca = os.path.join(host_pki(state_root, "h2"), "cacert.pem")
    refusals = Refusals(state_root, "h2")
    other = CellCA.create(tmp_path / "other-ca", CELL, days=1).issue(Identity(CELL, Role.NODE, "h1"),
                                                                      [addr(cell, "h1")], days=1)
    for cert, key, why in ((None, None, "No certificate was found"),
                           (other.cert, other.key, "hasn't got a known issuer")):
        seen = os.path.getsize(refusals.log)
        got = tls_session(a, ca, cert, key)
        assert got == b"" or b"Error" in got, got      # cut off: no libvirt RPC byte ever comes back
        new = refusals.since(seen)
        assert why.lower() in new.lower(), (cert, got, new)
