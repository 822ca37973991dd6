"""cellctl pki init/issue (the lab's CA, used by the Ansible roles): idempotent, and a
certificate is reissued exactly when its identity, addresses or CA changed."""
from __future__ import annotations

import json
import os
import stat

from cryptography import x509

from cellbed.runtime.pki import identity_of
from tests.unit.test_cli_conventions import run_cli


def pki(*argv):
    rc, out, err = run_cli(["--cell", "lab", "--json", "pki", *argv])
    assert rc == 0, err
    return json.loads(out)


def test_init_and_issue_are_idempotent(tmp_path):
    d = str(tmp_path / "pki")
    assert pki("init", "--dir", d)["changed"] is True
    assert pki("init", "--dir", d)["changed"] is False
    assert stat.S_IMODE(os.stat(os.path.join(d, "ca.key")).st_mode) == 0o600
    first = pki("issue", "--dir", d, "--role", "node", "--name", "h1", "--address", "10.0.0.1")
    assert first["changed"] is True and stat.S_IMODE(os.stat(first["key"]).st_mode) == 0o600
    assert pki("issue", "--dir", d, "--role", "node", "--name", "h1", "--address", "10.0.0.1")["changed"] is False
    # another address: a new certificate
    assert pki("issue", "--dir", d, "--role", "node", "--name", "h1", "--address", "10.0.0.2")["changed"] is True


def test_operator_ca_is_installed_and_used(tmp_path):
    op = str(tmp_path / "operator")
    pki("init", "--dir", op)
    d = str(tmp_path / "lab")
    out = pki("init", "--dir", d, "--ca-cert", os.path.join(op, "ca.crt"), "--ca-key", os.path.join(op, "ca.key"))
    assert out["changed"] is True
    assert open(os.path.join(d, "ca.crt")).read() == open(os.path.join(op, "ca.crt")).read()
    cert = pki("issue", "--dir", d, "--role", "admin", "--name", "admin")["cert"]
    assert os.path.exists(cert)


def test_bad_input_is_one_line_rc2(tmp_path):
    rc, _, err = run_cli(["pki", "issue", "--dir", str(tmp_path), "--role", "node", "--name", "h1"])
    assert rc == 2 and err.count("\n") == 1 and "CA" in err            # no CA in that folder
    rc, _, err = run_cli(["pki", "init", "--dir", str(tmp_path / "x"), "--ca-cert", "/nonexistent"])
    assert rc == 2 and "--ca-cert and --ca-key" in err


def test_server_certificate_has_no_identity_and_is_idempotent(tmp_path):
    d = str(tmp_path / "pki")
    pki("init", "--dir", d)
    first = pki("issue", "--dir", d, "--server", "--name", "mqtt", "--address", "10.0.0.5")
    assert first["changed"] is True and first["cert"].endswith("service-mqtt.crt")
    assert stat.S_IMODE(os.stat(first["key"]).st_mode) == 0o600
    pem = open(first["cert"], "rb").read()
    assert identity_of(pem) is None                      # no RPC accepts it as a caller
    cert = x509.load_pem_x509_certificate(pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    again = pki("issue", "--dir", d, "--server", "--name", "mqtt", "--address", "10.0.0.5")
    assert again == {"changed": False, "cert": first["cert"], "key": first["key"]}
    assert pki("issue", "--dir", d, "--server", "--name", "mqtt", "--address", "10.0.0.6")["changed"] is True
    # a node certificate of the same name is another file, and an identity
    node = pki("issue", "--dir", d, "--role", "node", "--name", "mqtt", "--address", "10.0.0.6")
    assert node["cert"].endswith("node-mqtt.crt") and identity_of(open(node["cert"], "rb").read()).name == "mqtt"


def test_server_and_role_exclude_each_other_and_server_needs_an_address(tmp_path):
    d = str(tmp_path / "pki")
    pki("init", "--dir", d)
    rc, _, err = run_cli(["pki", "issue", "--dir", d, "--server", "--role", "node", "--name", "h1"])
    assert rc == 2 and err.count("\n") == 1 and "not allowed with" in err
    rc, _, err = run_cli(["pki", "issue", "--dir", d, "--name", "h1"])
    assert rc == 2 and err.count("\n") == 1 and "--role" in err and "--server" in err
    rc, _, err = run_cli(["pki", "issue", "--dir", d, "--server", "--name", "mqtt"])
    assert rc == 2 and err.count("\n") == 1 and "--address" in err
