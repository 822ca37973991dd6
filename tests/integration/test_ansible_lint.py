"""ansible/ is lint-clean with the production profile, every playbook parses, and the nested
role's plan (what nested.yml would build) is right. No hosts are touched here."""
import json
import os
import subprocess
import sys
import time

import pytest

from tests.integration.conftest import REPO

ANSIBLE_DIR = os.path.join(REPO, "ansible")
BIN = os.path.dirname(sys.executable)
ENV = {**os.environ, "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1", "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}


def run(*cmd: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ANSIBLE_DIR, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow      # ansible-lint: 25-50 s of CPU, the full suite and not --quick (issue 27)
def test_ansible_lint_passes_with_the_production_profile():
    t0 = time.monotonic()
    r = run(os.path.join(BIN, "ansible-lint"), "--offline", "--profile", "production", "--nocolor", "-f", "pep8")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "Profile 'production' was required, and it passed" in out, out[-2000:]
    print(f"\nansible-lint --profile production: {time.monotonic() - t0:.1f} s")


@pytest.mark.parametrize("playbook, inventory", [
    ("site.yml", "inventories/lab/hosts.yml"),
    ("verify.yml", "inventories/lab/hosts.yml"),
    ("teardown.yml", "inventories/lab/hosts.yml"),
    ("nested.yml", "inventories/nested-l0/hosts.yml"),
])
def test_playbook_passes_syntax_check(playbook, inventory):
    r = run(os.path.join(BIN, "ansible-playbook"), "-i", inventory, playbook, "--syntax-check")
    assert r.returncode == 0, r.stdout + r.stderr


def _role_vars(role: str, expr: str, **extra) -> object:
    """Evaluate *expr* with a role's defaults and vars, as the role would (no host is touched)."""
    d = os.path.join(ANSIBLE_DIR, "roles", role)
    r = run(os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-i", "localhost,",
            "-e", f"@{d}/defaults/main.yml", "-e", f"@{d}/vars/main.yml", "-e", json.dumps(extra),
            "-e", "ansible_service_mgr=none ansible_python_interpreter=" + sys.executable,
            "-m", "ansible.builtin.debug", "-a", f"msg={{{{ {expr} | to_json }}}}")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    return json.loads(json.loads(out[out.index("{"):])["msg"])


def test_nested_plan_gives_every_l1_its_own_address_tap_mac_and_disk():
    l1s = _role_vars("nested", "__nested_l1s", nested_l1_count=3, nested_subnet="10.231.41.0/24",
                     nested_dir="/srv/n")
    assert [(l["name"], l["address"], l["tap"], l["mac"], l["disk"]) for l in l1s] == [
        ("l1-1", "10.231.41.11", "cbnestt1", "52:54:00:cb:00:01", "/srv/n/l1-1.qcow2"),
        ("l1-2", "10.231.41.12", "cbnestt2", "52:54:00:cb:00:02", "/srv/n/l1-2.qcow2"),
        ("l1-3", "10.231.41.13", "cbnestt3", "52:54:00:cb:00:03", "/srv/n/l1-3.qcow2")]
    assert _role_vars("nested", "__nested_gateway", nested_subnet="10.231.41.0/24") == "10.231.41.1"


@pytest.mark.parametrize("requested, kvm_usable, want", [
    ("auto", False, "tcg"), ("auto", True, "kvm"), ("tcg", True, "tcg"), ("kvm", True, "kvm")])
def test_nested_l1_accelerator_follows_the_box(requested, kvm_usable, want):
    got = _role_vars("nested", "__nested_accel", nested_l1_accel=requested, common_kvm_usable=kvm_usable)
    assert got.strip() == want


@pytest.mark.parametrize("transport, want", [
    ("tls", "qemu+tls://{address}/system?pkipath=/etc/libvirt/pki"), ("tcp", "qemu+tcp://{address}/system")])
def test_node_migration_uri_follows_the_libvirt_transport(transport, want):
    assert _role_vars("cellbed", "__cellbed_migration_uri_template", libvirt_host_transport=transport).strip() == want


def test_controller_pki_names_the_host_addresses_and_the_libvirt_role_copies_them():
    got = _role_vars("cellbed", "[__cellbed_tls_addresses, __cellbed_cellctl[1:]]", cellbed_node_address="10.0.0.5",
                     libvirt_host_listen_address="10.0.0.5", cellbed_cell_name="lab")
    assert got == [["10.0.0.5"], ["-m", "cellbed.cli.main", "--cell", "lab", "--json"]]
    src = _role_vars("libvirt_host", "__libvirt_host_tls_src", cellbed_tls_files={"ca": "a", "cert": "c", "key": "k"})
    assert src == {"ca": "a", "cert": "c", "key": "k"}
    assert _role_vars("libvirt_host", "libvirt_host_transport", cellbed_tls=False).strip() == "tcp"
    assert _role_vars("libvirt_host", "libvirt_host_transport").strip() == "tls"


LAB_CONTROLLER = {"cell": "lab", "mqtt_host": "192.0.2.5", "agents": {"gm1": "192.0.2.5:50071", "lm1a": "192.0.2.5:50081"},
                  "hosts": {"node1": "192.0.2.11:50051"}, "gm": [{"name": "gm1"}],
                  "lm": [{"name": "lm1", "instances": ["lm1a"], "hosts": ["node1"]}]}


def test_every_controller_agent_runs_as_its_own_process_with_its_certificate():
    svc = _role_vars("cellbed", "__cellbed_controller_services", cellbed_controller_enabled=True,
                     cellbed_controller_config=LAB_CONTROLLER)
    assert [(s["name"], s["command"].split(" ", 1)[1]) for s in svc] == [
        ("cellbed-controller-gm1", "--config /etc/cellbed/controller-gm1.toml --only gm1"),
        ("cellbed-controller-lm1a", "--config /etc/cellbed/controller-lm1a.toml --only lm1a")]
    assert [s["config"]["metrics_port"] for s in svc] == [9466, 9467]          # one port per process
    assert all(s["config"]["tls_cert"] == "/etc/cellbed/pki/{role}-{agent}.crt" and s["config"]["mqtt_port"] == 8883
               and "insecure" not in s["config"] for s in svc)
    plain = _role_vars("cellbed", "__cellbed_controller_services", cellbed_controller_enabled=True,
                       cellbed_controller_config=LAB_CONTROLLER, cellbed_tls=False)
    assert all(s["config"]["insecure"] is True and "tls_cert" not in s["config"] and s["config"]["mqtt_port"] == 1883
               for s in plain)


def test_pki_issues_one_certificate_per_identity_of_the_host():
    # one host (localhost) that is a node, a broker, the controller and the mosquitto host
    ids = _role_vars("cellbed", "__cellbed_tls_identities", cellbed_node_enabled=True, cellbed_broker_enabled=True,
                     cellbed_controller_enabled=True, cellbed_node_address="192.0.2.5",
                     cellbed_controller_config=LAB_CONTROLLER, cellbed_mqtt_group="all")
    assert [(i["role"], i["name"], i["addresses"]) for i in ids] == [
        ("node", "localhost", ["192.0.2.5"]), ("broker", "localhost", ["192.0.2.5"]), ("gm", "gm1", ["192.0.2.5"]),
        ("lm", "lm1a", ["192.0.2.5"]), ("server", "mqtt", ["192.0.2.5"])]
    # insecure cell: only the node's, for libvirt over TLS when the lab keeps it
    assert _role_vars("cellbed", "__cellbed_tls_identities", cellbed_node_enabled=True, cellbed_tls=False,
                      cellbed_node_address="192.0.2.5") == []
    got = _role_vars("cellbed", "__cellbed_tls_identities", cellbed_node_enabled=True, cellbed_tls=False,
                     cellbed_node_address="192.0.2.5", libvirt_host_transport="tls")
    assert [i["role"] for i in got] == ["node"]
