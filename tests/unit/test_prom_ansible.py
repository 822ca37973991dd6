"""ansible/roles/prometheus and the cellbed role's metrics ports: the role's layout, the scrape targets
it renders from an inventory, a configuration that Prometheus' own promtool accepts, and node.toml's
metrics_port."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

import tests.unit.test_ansible_roles as roles
from cellbed.daemon.config import NodeConfig

yaml = pytest.importorskip("yaml")
jinja2 = pytest.importorskip("jinja2")

DEFAULTS = roles.load("prometheus", "defaults", "main.yml")


def render(template: str, **ctx) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(roles.ROLES, "prometheus", "templates")),
                             trim_blocks=True, keep_trailing_newline=True)
    env.filters.update(to_json=json.dumps, to_nice_json=lambda v, **kw: json.dumps(v, indent=4, sort_keys=True),
                       regex_replace=lambda v, pat, rep: re.sub(pat, rep, v))
    base = {k: v for k, v in DEFAULTS.items() if "{{" not in str(v)}
    base.update(prometheus_cell_name="lab", prometheus_config_file="/etc/prometheus/cellbed.yml",
                prometheus_targets_file="/etc/prometheus/cellbed-targets.json")
    return env.get_template(template).render(ansible_managed="Ansible managed", **{**base, **ctx})


def test_the_role_follows_the_style():
    roles.test_role_layout_follows_the_style("prometheus")
    assert DEFAULTS["prometheus_listen_address"] == "127.0.0.1" and DEFAULTS["prometheus_listen_port"] == 9090


INVENTORY = {
    "groups": {"cellbed_nodes": ["node1", "node2", "node3", "node4"], "cellbed_brokers": ["mgmt1"],
               "cellbed_controllers": ["mgmt1"]},
    "hostvars": {
        "node1": {"cellbed_node_facts": {"address": "192.0.2.11"}, "cellbed_node_address": "192.0.2.99",
                  "ansible_host": "n1.example"},
        "node2": {"cellbed_node_address": "192.0.2.12", "cellbed_node_metrics_port": 9999},
        "node3": {"ansible_host": "192.0.2.13"},
        "node4": {"cellbed_node_address": "192.0.2.14", "cellbed_node_metrics_port": 0},   # no metrics
        "mgmt1": {"cellbed_node_address": "192.0.2.5",
                  "cellbed_controller_config": {"agents": {"gm1": "192.0.2.6:50071", "lm1a": "192.0.2.5:50081",
                                                           "lm1b": "192.0.2.7:50082"},
                                                "gm": [{"name": "gm1"}],
                                                "lm": [{"name": "lm1", "instances": ["lm1a", "lm1b"]}]}},
    },
}


def test_targets_come_from_the_inventory_addresses_and_metrics_ports():
    got = json.loads(render("cellbed-targets.json.j2", **INVENTORY))
    by_target = {g["targets"][0]: g["labels"] for g in got}
    assert all(len(g["targets"]) == 1 for g in got)
    assert by_target == {
        "192.0.2.11:9464": {"job": "node", "host": "node1", "cell": "lab"},      # the cellbed role's facts first
        "192.0.2.12:9999": {"job": "node", "host": "node2", "cell": "lab"},      # the host's own port
        "192.0.2.13:9464": {"job": "node", "host": "node3", "cell": "lab"},      # ansible_host last
        "192.0.2.5:9465": {"job": "broker", "host": "mgmt1", "cell": "lab"},
        # one process per GM and LM instance, each on its address in [agents] and its own port
        "192.0.2.6:9466": {"job": "gm", "host": "mgmt1", "agent": "gm1", "cell": "lab"},
        "192.0.2.5:9467": {"job": "lm", "host": "mgmt1", "agent": "lm1a", "cell": "lab"},
        "192.0.2.7:9468": {"job": "lm", "host": "mgmt1", "agent": "lm1b", "cell": "lab"},
    }


def test_without_brokers_or_controllers_only_nodes_are_scraped():
    inv = {"groups": {"cellbed_nodes": ["node3"]}, "hostvars": INVENTORY["hostvars"]}
    got = json.loads(render("cellbed-targets.json.j2", **inv))
    assert got == [{"targets": ["192.0.2.13:9464"], "labels": {"job": "node", "host": "node3", "cell": "lab"}}]


def test_the_configuration_reads_the_targets_file_and_promtool_accepts_it(tmp_path):
    targets = tmp_path / "cellbed-targets.json"
    targets.write_text(render("cellbed-targets.json.j2", **INVENTORY))
    text = render("prometheus.yml.j2", prometheus_targets_file=str(targets))
    cfg = yaml.safe_load(text)
    job = cfg["scrape_configs"][0]
    assert job["honor_labels"] is True and job["file_sd_configs"][0]["files"] == [str(targets)]
    assert cfg["global"]["scrape_interval"] == DEFAULTS["prometheus_scrape_interval"]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian's prometheus package) is not installed: ./cellbed.sh setup installs it")
    p = tmp_path / "prometheus.yml"
    p.write_text(text)
    r = subprocess.run([promtool, "check", "config", str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_unit_drop_in_listens_where_the_variables_say():
    args = ("--config.file=/etc/prometheus/cellbed.yml --web.listen-address=127.0.0.1:9090 "
            "--storage.tsdb.path=/var/lib/prometheus/metrics2")
    text = render("cellbed.conf.j2", prometheus_bin="/usr/bin/prometheus", __prometheus_args=args)
    lines = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    assert lines == ["ExecStart=", f"ExecStart=/usr/bin/prometheus {args}"]   # the package's ExecStart is replaced


def test_node_toml_carries_the_metrics_port():
    text = roles.render("cellbed", "node.toml.j2", **{**roles.NODE_CTX, "cellbed_node_metrics_port": 9464})
    assert "metrics_port = 9464" in text.splitlines()
    cellbed_defaults = roles.load("cellbed", "defaults", "main.yml")
    assert cellbed_defaults["cellbed_node_metrics_port"] == DEFAULTS["prometheus_node_metrics_port"]
    assert cellbed_defaults["cellbed_broker_metrics_port"] == DEFAULTS["prometheus_broker_metrics_port"]
    assert cellbed_defaults["cellbed_controller_metrics_port"] == DEFAULTS["prometheus_controller_metrics_port"]
    assert "metrics_port" in cellbed_defaults["cellbed_broker_config"]


def test_node_toml_metrics_port_is_a_config_the_daemon_accepts(tmp_path):
    p = tmp_path / "node.toml"
    p.write_text(roles.render("cellbed", "node.toml.j2", **{**roles.NODE_CTX, "cellbed_node_metrics_port": 9464}))
    assert NodeConfig.load(str(p)).metrics_port == 9464


def test_with_a_cell_certificate_prometheus_scrapes_over_https(tmp_path):
    files = {k: str(tmp_path / f"{k}.pem") for k in ("ca", "cert", "key")}
    for p in files.values():
        open(p, "w").close()
    text = render("prometheus.yml.j2", prometheus_tls_ca_file=files["ca"], prometheus_tls_cert_file=files["cert"],
                  prometheus_tls_key_file=files["key"])
    job = yaml.safe_load(text)["scrape_configs"][0]
    assert job["scheme"] == "https"
    assert job["tls_config"] == {"ca_file": files["ca"], "cert_file": files["cert"], "key_file": files["key"]}
    plain = yaml.safe_load(render("prometheus.yml.j2"))["scrape_configs"][0]
    assert "tls_config" not in plain and "scheme" not in plain


# --- With Ansible's own templating: the role's defaults, the cellbed role's processes, pki.yml --------
def _templar(variables: dict):
    """Ansible's Templar over *variables* (files loaded with _load are trusted templates, as a role's)."""
    template = pytest.importorskip("ansible.template")
    return template.Templar(loader=_loader(), variables=variables), template.trust_as_template


def _loader():
    from ansible.parsing.dataloader import DataLoader
    return DataLoader()


def _load(*parts):
    return _loader().load_from_file(os.path.join(roles.ROLES, *parts), trusted_as_template=True)


def _ansible_targets(inventory: dict, **extra) -> list[dict]:
    pytest.importorskip("ansible")
    t, trust = _templar({**_load("prometheus", "defaults", "main.yml"), "ansible_service_mgr": "systemd",
                         "cellbed_cell_name": "lab", **inventory, **extra})
    with open(os.path.join(roles.ROLES, "prometheus", "templates", "cellbed-targets.json.j2")) as f:
        return json.loads(t.template(trust(f.read())))


def _cellbed_controller(hostvars: dict) -> tuple[dict, dict]:
    """What the cellbed role runs on a controller host: {agent: metrics_port} of its
    cellbed-controller-<agent> services and {agent: address} of their certificates."""
    pytest.importorskip("ansible")
    t, trust = _templar({**_load("cellbed", "defaults", "main.yml"), **_load("cellbed", "vars", "main.yml"),
                         "inventory_hostname": "mgmt1", "playbook_dir": "/srv/cellbed/ansible",
                         "ansible_playbook_python": "/usr/bin/python3",
                         "groups": {"cellbed_controllers": ["mgmt1"], "cellbed_nodes": []}, **hostvars})
    services = t.template(trust("{{ __cellbed_controller_services }}"))
    identities = t.template(trust("{{ __cellbed_tls_identities }}"))
    ports = {s["name"].removeprefix("cellbed-controller-"): s["config"]["metrics_port"] for s in services}
    return ports, {i["name"]: i["addresses"][0] for i in identities}


@pytest.mark.parametrize("case, extra", [
    ("the role's port", {}),
    ("the host's port", {"cellbed_controller_metrics_port": 9700}),
    ("the config's port", {"cellbed_controller_metrics_port": 9700, "metrics_port": 9600}),
    ("no metrics", {"cellbed_controller_metrics_port": 0}),
])
def test_one_target_per_controller_process_where_the_cellbed_role_runs_it(case, extra):
    config = {**INVENTORY["hostvars"]["mgmt1"]["cellbed_controller_config"],
              **({"metrics_port": extra["metrics_port"]} if "metrics_port" in extra else {})}
    hv = {"cellbed_node_address": "192.0.2.5", "cellbed_controller_config": config,
          **{k: v for k, v in extra.items() if k != "metrics_port"}}
    ports, addresses = _cellbed_controller(hv)
    assert list(ports) == ["gm1", "lm1a", "lm1b"]                  # GMs, then LM instances
    got = _ansible_targets({"groups": {"cellbed_controllers": ["mgmt1"]}, "hostvars": {"mgmt1": hv}})
    want = [{"targets": [f"{addresses[a]}:{p}"],     # the address its certificate names: Prometheus checks it
             "labels": {"job": "gm" if a == "gm1" else "lm", "host": "mgmt1", "agent": a, "cell": "lab"}}
            for a, p in ports.items() if p > 0]
    assert got == want and len(want) == (0 if case == "no metrics" else 3)
    assert len({t["targets"][0].rsplit(":", 1)[1] for t in got}) == len(got)      # a port per process


def _defaults(**extra) -> dict:
    t, trust = _templar({**_load("prometheus", "defaults", "main.yml"), "ansible_service_mgr": "systemd", **extra})
    return {k: t.template(trust("{{ %s }}" % k)) for k in
            ("prometheus_tls", "prometheus_tls_dir", "prometheus_tls_ca_src", "prometheus_tls_cert_src",
             "prometheus_tls_key_src", "prometheus_tls_ca_file", "prometheus_tls_cert_file", "prometheus_tls_key_file")}


def test_https_with_the_cells_scraping_certificate_is_the_default():
    pytest.importorskip("ansible")
    files = {"ca": "/srv/pki/ca.crt", "cert": "/srv/pki/service-prometheus.crt",
             "key": "/srv/pki/service-prometheus.key"}
    d = _defaults(cellbed_tls_prometheus_files=files)
    assert d["prometheus_tls"] is True and d["prometheus_tls_dir"] == "/etc/prometheus/cellbed-pki"
    assert (d["prometheus_tls_ca_src"], d["prometheus_tls_cert_src"], d["prometheus_tls_key_src"]) == (
        files["ca"], files["cert"], files["key"])                   # copied from the controller
    assert (d["prometheus_tls_ca_file"], d["prometheus_tls_cert_file"], d["prometheus_tls_key_file"]) == (
        "/etc/prometheus/cellbed-pki/ca.crt", "/etc/prometheus/cellbed-pki/prometheus.crt",
        "/etc/prometheus/cellbed-pki/prometheus.key")
    job = yaml.safe_load(render("prometheus.yml.j2", **d))["scrape_configs"][0]
    assert job["scheme"] == "https" and job["tls_config"]["cert_file"] == d["prometheus_tls_cert_file"]
    insecure = _defaults(cellbed_tls=False)                          # an insecure cell: plain HTTP
    assert insecure["prometheus_tls"] is False and insecure["prometheus_tls_ca_file"] == ""
    assert "scheme" not in yaml.safe_load(render("prometheus.yml.j2", **insecure))["scrape_configs"][0]
    own = _defaults(prometheus_tls_ca_file="/etc/ssl/ca.pem")       # the explicit variables win
    assert own["prometheus_tls_ca_file"] == "/etc/ssl/ca.pem"


def _pki_task(name: str) -> dict:
    tasks = _load("cellbed", "tasks", "pki.yml")
    return next(t for t in tasks if t["name"] == name)


def test_site_yml_issues_the_scraping_certificate_once_on_the_controller(tmp_path):
    """pki.yml's task, templated as Ansible does and run: `cellctl pki issue --server --name
    prometheus` with each Prometheus host's address, a certificate of the CA with no identity, kept
    on the second run (changed false)."""
    pytest.importorskip("ansible")
    from cryptography import x509
    from cellbed.runtime.pki import identity_of
    from tests.unit.test_cli_conventions import run_cli

    task = _pki_task("Issue Prometheus' scraping certificate on the controller")
    assert task["run_once"] is True and task["delegate_to"] == "localhost" and task["become"] is False
    pki = str(tmp_path / "pki")
    hostvars = {"mgmt1": {"cellbed_node_address": "192.0.2.5", "ansible_host": "mgmt1.example"},
                "mon2": {"ansible_host": "mon2.example", "ansible_default_ipv4": {"address": "192.0.2.8"}},
                "mon3": {"ansible_host": "mon3.example"}}
    base = {**_load("cellbed", "defaults", "main.yml"), **_load("cellbed", "vars", "main.yml"), **task["vars"],
            "inventory_hostname": "node1", "playbook_dir": "/srv/cellbed/ansible", "cellbed_cell_name": "lab",
            "cellbed_pki_dir": pki, "ansible_playbook_python": "python3", "hostvars": hostvars}

    def when(**kw) -> bool:
        t, trust = _templar({**base, **kw})
        return t.evaluate_conditional(trust(task["when"]))

    groups = {"cellbed_prometheus": ["mgmt1", "mon2", "mon3"], "cellbed_nodes": ["node1"]}
    assert when(groups=groups) is True
    assert when(groups=groups, cellbed_tls=False) is False                       # insecure: HTTP, no certificate
    assert when(groups={"cellbed_nodes": ["node1"]}) is False                    # no Prometheus host
    t, trust = _templar({**base, "groups": groups})
    argv = t.template(trust(task["ansible.builtin.command"]["argv"]))
    assert argv[:3] == ["python3", "-m", "cellbed.cli.main"]
    assert argv[-3:] == ["--address=192.0.2.5", "--address=192.0.2.8", "--address=127.0.0.1"]
    assert run_cli(["--cell", "lab", "--json", "pki", "init", "--dir", pki])[0] == 0
    outs = []
    for _ in range(2):
        rc, out, err = run_cli(argv[3:])
        assert rc == 0, err
        outs.append(json.loads(out))
    assert [o["changed"] for o in outs] == [True, False]                         # idempotent
    pem = open(outs[0]["cert"], "rb").read()
    assert outs[0]["cert"] == os.path.join(pki, "service-prometheus.crt") and identity_of(pem) is None
    sans = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert {str(a) for a in sans.value.get_values_for_type(x509.IPAddress)} == {"192.0.2.5", "192.0.2.8", "127.0.0.1"}
    record = _pki_task("Record where the controller keeps Prometheus' scraping certificate")["ansible.builtin.set_fact"]
    t, trust = _templar({**base, "__cellbed_pki_prometheus": {"stdout": json.dumps(outs[1])}})
    assert t.template(record["cellbed_tls_prometheus_files"]) == {
        "ca": os.path.join(pki, "ca.crt"), "cert": outs[0]["cert"], "key": outs[0]["key"]}


def test_promtool_accepts_the_https_configuration(tmp_path):
    """The configuration site.yml renders for a secure cell, with the files in place (promtool checks them)."""
    from tests.unit.test_cli_conventions import run_cli
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian's prometheus package) is not installed: ./cellbed.sh setup installs it")
    pki = str(tmp_path / "pki")
    assert run_cli(["--cell", "lab", "--json", "pki", "init", "--dir", pki])[0] == 0
    rc, out, _ = run_cli(["--cell", "lab", "--json", "pki", "issue", "--dir", pki, "--server", "--name", "prometheus",
                          "--address", "127.0.0.1"])
    issued = json.loads(out)
    targets = tmp_path / "cellbed-targets.json"
    targets.write_text(render("cellbed-targets.json.j2", **INVENTORY))
    p = tmp_path / "prometheus.yml"
    p.write_text(render("prometheus.yml.j2", prometheus_targets_file=str(targets),
                        prometheus_tls_ca_file=os.path.join(pki, "ca.crt"), prometheus_tls_cert_file=issued["cert"],
                        prometheus_tls_key_file=issued["key"]))
    r = subprocess.run([promtool, "check", "config", str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
