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
                  "cellbed_controller_config": {"agents": {"gm1": "192.0.2.6:50071", "lm1a": "192.0.2.5:50081"},
                                                "gm": [{"name": "gm1"}]}},
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
        "192.0.2.6:9466": {"job": "controller", "host": "mgmt1", "cell": "lab"},  # its first GM's address
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
