"""The libvirt configuration of a namespace host (cellbed/cell/libvirt_conf.py) with the cell's
certificates and without (an insecure cell), and the node daemon's choice of URI and TLS
(daemon/libvirt_tls.py, daemon/migration_source.py) on a model cell."""
import os
import stat

import pytest

from cellbed import assembly
from cellbed.cell import libvirt_conf
from cellbed.daemon import libvirt_tls as lt
from cellbed.daemon.config import NodeConfig
from cellbed.domain import errors
from cellbed.domain.identity import Identity, Role
from cellbed.domain.vm import MigrationOptions, VmSpec
from cellbed.runtime import run_virtual
from cellbed.runtime.pki import CellCA
from cellbed.v1 import node_pb2 as npb


def conf(text: str) -> dict:
    """key = value lines of a libvirt config file (values as written)."""
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


@pytest.fixture(scope="module")
def node_tls(tmp_path_factory):
    ca = CellCA.create(tmp_path_factory.mktemp("ca"), "lt", days=1)
    return ca.issue(Identity("lt", Role.NODE, "h1"), ["10.231.16.11"], days=1)


def host_path(hdir, inside: str) -> str:
    """A path inside the host (/etc/libvirt/...) as written under its folder."""
    return os.path.join(hdir, "etc-libvirt", os.path.relpath(inside, "/etc/libvirt"))


def test_tls_host_listens_only_on_tls_with_the_cells_certificates(tmp_path, node_tls):
    libvirt_conf.write_host_files(str(tmp_path), "h1", "10.231.16.11", tls=node_tls)
    text = (tmp_path / "etc-libvirt" / "libvirtd.conf").read_text()
    d = conf(text)
    assert "auth_tcp" not in text and "none" != d.get("auth_tcp")
    assert (d["listen_tls"], d["listen_tcp"], d["tls_port"]) == ("1", "0", '"16514"')
    assert d["listen_addr"] == '"10.231.16.11"' and d["tls_no_verify_certificate"] == "0"
    assert d["tls_allowed_dn_list"] == '["O=Cellbed,OU=node,CN=*"]'
    for key, what in (("ca_file", "ca"), ("cert_file", "server_cert"), ("key_file", "server_key")):
        inside = d[key].strip('"')
        assert inside == lt.libvirt_path(what)
        assert os.path.isfile(host_path(tmp_path, inside)), key
    q = conf((tmp_path / "etc-libvirt" / "qemu.conf").read_text())
    assert q["migrate_tls_x509_cert_dir"] == f'"{lt.QEMU_DIR}"' and q["migrate_tls_x509_verify"] == "1"
    assert q["default_tls_x509_cert_dir"] == f'"{lt.QEMU_DIR}"' and q["migration_address"] == '"10.231.16.11"'


def test_tls_files_are_laid_out_for_libvirt_and_qemu_keys_0600(tmp_path, node_tls):
    libvirt_conf.write_host_files(str(tmp_path), "h1", "10.231.16.11", tls=node_tls)
    ca, cert, key = node_tls.read()
    for folder, col in ((lt.PKI_DIR, 0), (lt.QEMU_DIR, 1)):
        assert stat.S_IMODE(os.stat(host_path(tmp_path, folder)).st_mode) == 0o700
        for what, names in lt.FILES.items():
            p = host_path(tmp_path, f"{folder}/{names[col]}")
            want = {"ca": ca, "server_key": key, "client_key": key}.get(what, cert)
            assert open(p, "rb").read() == want, p
            mode = stat.S_IMODE(os.stat(p).st_mode)
            assert mode == (0o600 if what in lt.KEYS else 0o644), (p, oct(mode))
    # the client side (the URI's pkipath) finds libvirt's default names there
    assert lt.TLS_URI.endswith(f"?pkipath={lt.PKI_DIR}")
    for n in ("cacert.pem", "clientcert.pem", "clientkey.pem"):
        assert os.path.isfile(host_path(tmp_path, f"{lt.PKI_DIR}/{n}"))


def test_insecure_host_is_plaintext_tcp_by_explicit_choice_only(tmp_path):
    libvirt_conf.write_host_files(str(tmp_path), "h1", "10.231.16.11")   # tls=None: an insecure cell
    text = (tmp_path / "etc-libvirt" / "libvirtd.conf").read_text()
    d = conf(text)
    assert "INSECURE" in text and d["auth_tcp"] == '"none"'
    assert (d["listen_tls"], d["listen_tcp"], d["tcp_port"]) == ("0", "1", '"16509"')
    assert "migrate_tls" not in (tmp_path / "etc-libvirt" / "qemu.conf").read_text()
    assert not os.path.exists(host_path(tmp_path, lt.PKI_DIR))


def test_each_host_gets_a_distinct_host_uuid(tmp_path, node_tls):
    uuids = set()
    for h in ("h1", "h2"):
        libvirt_conf.write_host_files(str(tmp_path / h), h, "10.231.16.11", tls=node_tls)
        uuids.add(conf((tmp_path / h / "etc-libvirt" / "libvirtd.conf").read_text())["host_uuid"])
    assert len(uuids) == 2


@pytest.mark.parametrize("configured, insecure, uri, tls", [
    ("", False, "qemu+tls://{address}/system?pkipath=/etc/libvirt/pki", True),
    ("", True, "qemu+tcp://{address}/system", False),
    ("qemu+tls://{address}/system", False, "qemu+tls://{address}/system", True),   # a lab server: /etc/pki
    ("qemu+tcp://{address}/system", False, "qemu+tcp://{address}/system", False),  # lab, transport tcp
    ("model://{host}", False, "model://{host}", False),                            # a model cell
])
def test_the_daemon_derives_the_peer_uri_and_the_tls_default(configured, insecure, uri, tls):
    cfg = NodeConfig(host="h1", migration_uri_template=configured, insecure=insecure)
    got = lt.migration_uri_template(cfg.migration_uri_template, cfg.insecure)
    assert got == uri and lt.tls_by_default(got) is tls


def test_nodeconfig_default_is_the_tls_form():
    assert lt.migration_uri_template(NodeConfig(host="h1").migration_uri_template, False).startswith("qemu+tls://")


def test_the_record_says_whether_the_migration_ran_over_tls():
    """On model hosts (whose URI is not qemu+tls): off by default, on when asked, and refused when
    asked of an insecure node, which has no certificates for QEMU."""
    async def main():
        env = assembly.model_env(5, 0.001)
        h1 = (await assembly.model_host(env, assembly.model_config("h1", 2.0, 2048, admission="requested"))).agent
        h2 = (await assembly.model_host(env, assembly.model_config("h2", 2.0, 2048, admission="requested",
                                                                   insecure=True))).agent
        await h1.start_vm(VmSpec("a", mem_mib=256, wss_mib=32))
        default = await h1.migrate("a", "h2", MigrationOptions())
        with pytest.raises(errors.FailedPrecondition, match="insecure"):
            await h2.migrate("a", "h1", MigrationOptions(tls=True))
        back = await h2.migrate("a", "h1", MigrationOptions(tls=False))
        asked = await h1.migrate("a", "h2", MigrationOptions(tls=True))
        await h1.stop()
        await h2.stop()
        return default, back, asked
    default, back, asked = run_virtual(main())
    assert all(r.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED for r in (default, back, asked))
    assert (default.tls, default.options.tls, default.options.HasField("tls")) == (False, False, True)
    assert (back.tls, asked.tls, asked.options.tls) == (False, True, True)
