"""Pure parts of ansible/: the node config template against NodeConfig, the TLS keys of every
agent's config and mosquitto's TLS listener and ACL against the single-box cell's, the role
layout (geerlingguy style), the package lists against ./cellbed.sh, and the controller's wheel
builder."""
import importlib.util
import json
import os
import re
import tarfile

import pytest

from cellbed.broker.main import BrokerConfig
from cellbed.cell import mqtt_conf
from cellbed.controller.megha.config import ControllerConfig
from cellbed.daemon import libvirt_tls
from cellbed.daemon.config import NodeConfig
from cellbed.runtime.pki import TlsFiles

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(REPO, "ansible", "roles")
ROLE_NAMES = ["common", "libvirt_host", "cellbed", "mqtt", "nested"]
yaml = pytest.importorskip("yaml")
jinja2 = pytest.importorskip("jinja2")


def load(*parts):
    with open(os.path.join(ROLES, *parts)) as f:
        return yaml.safe_load(f)


def render(role: str, template: str, **ctx) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLES, role, "templates")),
                             trim_blocks=True, keep_trailing_newline=True)
    env.filters.update(to_json=json.dumps, to_nice_json=lambda v, sort_keys=True: json.dumps(v, indent=4,
                                                                                            sort_keys=sort_keys),
                       bool=lambda v: v if isinstance(v, bool) else str(v).lower() in ("true", "yes", "1", "on"))
    return env.get_template(template).render(ansible_managed="Ansible managed", **ctx)


NODE_CTX = dict(inventory_hostname="h2", cellbed_node_address="10.231.30.12", cellbed_node_grpc_port=50051,
                cellbed_node_metrics_port=9464,
                __cellbed_migration_uri_template="qemu+tcp://{address}/system", cellbed_node_cpu_cores=0.5,
                cellbed_node_mem_mib=512,
                __cellbed_max_cpu=1.0, __cellbed_max_mem=1024, __cellbed_accel="tcg",
                libvirt_host_cpu_model_effective="qemu64", cellbed_guest_dir="/var/lib/cellbed/guest",
                cellbed_state_dir="/var/lib/cellbed/node", cellbed_config_dir="/etc/cellbed",
                cellbed_node_cgroup="cellbed/ans/h2", cellbed_node_monitor_period_s=2.0,
                cellbed_node_migration_timeout_s=120.0, __cellbed_mqtt_host="10.231.30.11", cellbed_mqtt_port=1883,
                cellbed_cell_name="ans", cellbed_node_extra={"verify_timeout_s": 30.0}, cellbed_tls=False,
                cellbed_tls_dir="/etc/cellbed/pki")


def test_node_toml_template_gives_a_config_the_daemon_accepts(tmp_path):
    # to_json of the role renders Python-style str/float; NodeConfig.load is the daemon's own parser.
    text = render("cellbed", "node.toml.j2", **NODE_CTX)
    p = tmp_path / "node.toml"
    p.write_text(text)
    cfg = NodeConfig.load(str(p))
    assert (cfg.host, cfg.address, cfg.grpc_port) == ("h2", "10.231.30.12", 50051)
    assert cfg.migration_uri_template == "qemu+tcp://{address}/system"
    # capacity normalised to the cell's largest host: 0.5 / 1.0 cores, 512 / 1024 MiB
    assert (cfg.cpu_cores, cfg.mem_mib, cfg.cpu_norm, cfg.mem_norm) == (0.5, 512, 0.5, 0.5)
    assert (cfg.accel, cfg.cpu_model, cfg.mqtt_host, cfg.cell) == ("tcg", "qemu64", "10.231.30.11", "ans")
    assert cfg.peers_file == "/etc/cellbed/peers.json" and cfg.verify_timeout_s == 30.0


def test_node_toml_keys_are_all_nodeconfig_fields():
    text = render("cellbed", "node.toml.j2", **NODE_CTX)
    keys = {line.split("=")[0].strip() for line in text.splitlines() if "=" in line and not line.startswith("#")}
    import dataclasses
    assert keys <= {f.name for f in dataclasses.fields(NodeConfig)}


def test_peers_template_lists_every_node_with_its_address():
    peers = [{"inventory_hostname": "h1", "cellbed_node_facts": {"address": "10.0.0.11", "grpc_port": 50051}},
             {"inventory_hostname": "h2", "cellbed_node_facts": {"address": "10.0.0.12", "grpc_port": "50052"}}]
    got = json.loads(render("cellbed", "peers.json.j2", __cellbed_node_peers=peers))
    assert got == {"hosts": {"h1": {"address": "10.0.0.11", "grpc_port": 50051},
                             "h2": {"address": "10.0.0.12", "grpc_port": 50052}}}


def test_service_toml_template_renders_tables_and_arrays_of_tables():
    import tomllib
    config = {"cell": "lab", "mqtt_host": "192.0.2.5", "known_attributes": ["ssd"],
              "agents": {"gm1": "192.0.2.5:50071", "lm1a": "192.0.2.5:50081"},
              "hosts": {"node1": "192.0.2.11:50051"},
              "gm": [{"name": "gm1"}], "lm": [{"name": "lm1", "instances": ["lm1a"], "hosts": ["node1"]}],
              "queue": [{"user": "alice", "share": 0.5, "gm": "gm1"}]}
    got = tomllib.loads(render("cellbed", "service.toml.j2", item={"config": config}))
    assert got == config


def test_libvirt_blocks_set_listen_address_distinct_uuid_and_port_range():
    ctx = dict(libvirt_host_transport="tcp", libvirt_host_tcp_port=16509, libvirt_host_listen_address="10.0.0.11",
               __libvirt_host_uuid="6f1e2f8a-1111-4222-8333-944455556666", libvirt_host_qemu_user="root",
               libvirt_host_qemu_group="root", libvirt_host_security_driver="none",
               libvirt_host_migration_port_min=49152, libvirt_host_migration_port_max=49215)
    d = render("libvirt_host", "libvirtd.conf.j2", **ctx)
    assert 'listen_tcp = 1' in d and 'listen_addr = "10.0.0.11"' in d and 'host_uuid = "6f1e2f8a-' in d
    q = render("libvirt_host", "qemu.conf.j2", **ctx)
    assert 'migration_address = "10.0.0.11"' in q and "migration_port_min = 49152" in q and "49215" in q
    assert "INSECURE" in d and 'auth_tcp = "none"' in d and "migrate_tls" not in q   # tcp: by explicit choice


TLS_CTX = dict(libvirt_host_transport="tls", libvirt_host_tls_port=16514, libvirt_host_listen_address="10.0.0.11",
               __libvirt_host_uuid="6f1e2f8a-1111-4222-8333-944455556666", libvirt_host_qemu_user="root",
               libvirt_host_qemu_group="root", libvirt_host_security_driver="none",
               libvirt_host_migration_port_min=49152, libvirt_host_migration_port_max=49215,
               libvirt_host_tls_dir="/etc/libvirt/pki", __libvirt_host_qemu_tls_dir="/etc/libvirt/pki/qemu",
               libvirt_host_tls_allowed_dn_list=["O=Cellbed,OU=node,CN=*"])


def test_libvirt_tls_is_the_default_and_takes_only_the_cells_node_certificates():
    defaults = load("libvirt_host", "defaults", "main.yml")
    env = jinja2.Environment()
    env.filters["bool"] = bool
    transport = env.from_string(defaults["libvirt_host_transport"])
    assert transport.render() == "tls" and transport.render(cellbed_tls=False) == "tcp"   # insecure by choice only
    assert "auth_tcp" not in json.dumps(defaults)
    t = render("libvirt_host", "libvirtd.conf.j2", **TLS_CTX)
    assert "listen_tls = 1" in t and "listen_tcp = 0" in t and 'tls_port = "16514"' in t and "auth_tcp" not in t
    assert 'ca_file = "/etc/libvirt/pki/cacert.pem"' in t and 'key_file = "/etc/libvirt/pki/serverkey.pem"' in t
    assert 'cert_file = "/etc/libvirt/pki/servercert.pem"' in t and "tls_no_verify_certificate = 0" in t
    assert 'tls_allowed_dn_list = ["O=Cellbed,OU=node,CN=*"]' in t
    # an empty list would let no client in: then the line is left out (any certificate of the CA)
    assert "tls_allowed_dn_list" not in render("libvirt_host", "libvirtd.conf.j2",
                                               **{**TLS_CTX, "libvirt_host_tls_allowed_dn_list": []})
    q = render("libvirt_host", "qemu.conf.j2", **TLS_CTX)
    assert 'migrate_tls_x509_cert_dir = "/etc/libvirt/pki/qemu"' in q and "migrate_tls_x509_verify = 1" in q


def test_libvirt_tls_files_are_the_layout_the_node_daemon_and_namespace_hosts_use():
    defaults, v = load("libvirt_host", "defaults", "main.yml"), load("libvirt_host", "vars", "main.yml")
    assert defaults["libvirt_host_tls_dir"] == libvirt_tls.PKI_DIR     # the daemon's derived URI's pkipath
    assert v["__libvirt_host_qemu_tls_dir"] == "{{ libvirt_host_tls_dir }}/qemu" and libvirt_tls.QEMU_DIR.endswith("/qemu")
    got = {(f["dest"].rsplit("/", 1)[-1], f["what"], f["for"]) for f in v["__libvirt_host_tls_files"]}
    want = {(names[col], what.rsplit("_", 1)[-1], prog) for what, names in libvirt_tls.FILES.items()
            for col, prog in ((0, "libvirt"), (1, "qemu"))}
    assert got == want
    assert set(v["__libvirt_host_tls_src"]) == {"ca", "cert", "key"}
    assert defaults["libvirt_host_tls_allowed_dn_list"] == ['O=Cellbed,OU=node,CN=*']


def test_node_toml_over_tls_names_the_pkipath_and_migrates_over_tls(tmp_path):
    tmpl = "qemu+tls://{address}/system?pkipath=/etc/libvirt/pki"
    p = tmp_path / "node.toml"
    p.write_text(render("cellbed", "node.toml.j2", **{"cellbed_node_metrics_port": 0, **NODE_CTX,
                                                      "__cellbed_migration_uri_template": tmpl}))
    cfg = NodeConfig.load(str(p))
    got = libvirt_tls.migration_uri_template(cfg.migration_uri_template, cfg.insecure)
    assert got == tmpl == libvirt_tls.TLS_URI and libvirt_tls.tls_by_default(got)
    assert "qemu+tls://{address}/system?pkipath=' ~ libvirt_host_tls_dir" in json.dumps(
        load("cellbed", "vars", "main.yml")["__cellbed_migration_uri_template"])


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_role_layout_follows_the_style(role):
    d = os.path.join(ROLES, role)
    for f in ("defaults/main.yml", "tasks/main.yml", "meta/main.yml"):
        assert os.path.isfile(os.path.join(d, f)), f"{role}/{f}"
    prefix = role + "_"
    assert all(k.startswith(prefix) for k in load(role, "defaults", "main.yml")), f"{role}: defaults not prefixed"
    meta = load(role, "meta", "main.yml")["galaxy_info"]
    assert meta["role_name"] == role and {p["name"] for p in meta["platforms"]} >= {"Debian", "Ubuntu"}
    for os_name in ("Debian", "Ubuntu"):
        assert os.path.isfile(os.path.join(d, "vars", f"{os_name}.yml")), f"{role}: vars/{os_name}.yml"
    for name in os.listdir(os.path.join(d, "tasks")):
        for task in load(role, "tasks", name) or []:
            assert task.get("name", "")[:1].isupper(), f"{role}/tasks/{name}: unnamed or lowercase task {task}"


def _bash_array(text: str, name: str) -> set[str]:
    m = re.search(rf"^{name}=\(([^)]*)\)", text, re.M)
    return set(m.group(1).split())


def test_every_package_the_namespace_hosts_need_is_installed_by_cellbed_sh():
    """The namespace hosts share the box's dpkg and do not install (common_install_packages=false),
    so every package the roles want there must come from ./cellbed.sh setup."""
    with open(os.path.join(REPO, "cellbed.sh")) as f:
        sh = f.read()
    have = _bash_array(sh, "APT_PKGS") | _bash_array(sh, "BPO_PKGS")
    want = set(load("common", "vars", "Debian.yml")["__common_packages"]) | {"supervisor"}
    lv = load("libvirt_host", "vars", "Debian.yml")
    want |= set(lv["__libvirt_host_packages"]) | set(lv["__libvirt_host_qemu_packages"])
    want |= set(load("mqtt", "vars", "Debian.yml")["__mqtt_packages"])
    want |= set(load("cellbed", "vars", "Debian.yml")["__cellbed_packages"])
    want |= set(load("cellbed", "defaults", "main.yml")["cellbed_guest_build_packages"])
    assert want - have == set()


def _wheelhouse_module():
    spec = importlib.util.spec_from_file_location("build_wheelhouse", os.path.join(ROLES, "cellbed", "files",
                                                                                   "build_wheelhouse.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_wheel_source_hash_follows_the_package_sources_only(tmp_path):
    wh = _wheelhouse_module()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "other.txt").write_text("not packaged\n")
    pp = {"project": {"name": "pkg", "dependencies": ["b>=1", "a"]}}
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    h1 = wh.source_sha256(str(tmp_path), pp)
    (tmp_path / "other.txt").write_text("changed\n")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert wh.source_sha256(str(tmp_path), pp) == h1
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert wh.source_sha256(str(tmp_path), pp) != h1
    assert wh.deps_sha256(pp) == wh.deps_sha256({"project": {"dependencies": ["a", "b>=1"]}})


def test_dependency_tar_is_byte_identical_for_the_same_wheels(tmp_path):
    wh = _wheelhouse_module()
    (tmp_path / "w").mkdir()
    for n in ("b-1-py3-none-any.whl", "a-1-py3-none-any.whl"):
        (tmp_path / "w" / n).write_bytes(n.encode())
    wh.write_tar(str(tmp_path / "w"), str(tmp_path / "1.tar"))
    os.utime(tmp_path / "w" / "a-1-py3-none-any.whl", (1, 1))
    wh.write_tar(str(tmp_path / "w"), str(tmp_path / "2.tar"))
    assert (tmp_path / "1.tar").read_bytes() == (tmp_path / "2.tar").read_bytes()
    with tarfile.open(tmp_path / "1.tar") as t:
        assert t.getnames() == ["a-1-py3-none-any.whl", "b-1-py3-none-any.whl"]


# --- TLS (issue 13): every agent's config names its own certificate, mosquitto takes only them ---------
def test_node_toml_names_the_nodes_certificate_and_the_tls_mqtt_port(tmp_path):
    p = tmp_path / "node.toml"
    p.write_text(render("cellbed", "node.toml.j2", **{**NODE_CTX, "cellbed_tls": True, "cellbed_mqtt_port": 8883}))
    cfg = NodeConfig.load(str(p))
    assert (cfg.tls_ca, cfg.tls_cert, cfg.tls_key) == (
        "/etc/cellbed/pki/ca.crt", "/etc/cellbed/pki/node-h2.crt", "/etc/cellbed/pki/node-h2.key")
    assert cfg.insecure is False and cfg.mqtt_port == 8883


def test_node_toml_is_insecure_only_when_tls_is_off(tmp_path):
    p = tmp_path / "node.toml"
    text = render("cellbed", "node.toml.j2", **{**NODE_CTX, "cellbed_tls": "false"})
    p.write_text(text)
    cfg = NodeConfig.load(str(p))
    assert cfg.insecure is True and (cfg.tls_ca, cfg.tls_cert, cfg.tls_key) == ("", "", "") and "INSECURE" in text


def test_tls_is_the_default_and_the_mqtt_ports_follow_it():
    cellbed, mqtt = load("cellbed", "defaults", "main.yml"), load("mqtt", "defaults", "main.yml")
    assert cellbed["cellbed_tls"] is True and cellbed["cellbed_tls_dir"] == "{{ cellbed_config_dir }}/pki"
    env = jinja2.Environment()
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() == "true"
    port = env.from_string(cellbed["cellbed_mqtt_port"])
    assert port.render(cellbed_tls=True) == str(mqtt_conf.MQTT_TLS_PORT) and port.render(cellbed_tls=False) == "1883"
    mport = env.from_string(mqtt["mqtt_port"])
    assert mport.render(mqtt_tls=True) == "8883" and mport.render(mqtt_tls="False") == str(mqtt_conf.MQTT_PLAIN_PORT)
    assert env.from_string(mqtt["mqtt_tls"]).render() == "True"            # cellbed_tls unset: secure
    assert env.from_string(mqtt["mqtt_allow_anonymous"]).render(mqtt_tls=True) == "False"


def test_broker_and_controller_configs_name_their_certificates(tmp_path):
    """service.toml.j2 with the TLS keys that roles/cellbed/vars/main.yml merges in: each agent's
    own config parser accepts them, and the controller's name each process's files."""
    broker = {"name": "mgmt1", "address": "192.0.2.5", "grpc_port": 50061, "cell": "lab", "mqtt_host": "192.0.2.5",
              "mqtt_port": 8883, "tls_ca": "/etc/cellbed/pki/ca.crt", "tls_cert": "/etc/cellbed/pki/broker-mgmt1.crt",
              "tls_key": "/etc/cellbed/pki/broker-mgmt1.key"}
    (tmp_path / "broker.toml").write_text(render("cellbed", "service.toml.j2", item={"config": broker}))
    b = BrokerConfig.load(str(tmp_path / "broker.toml"))
    assert (b.tls_cert, b.mqtt_port, b.insecure) == ("/etc/cellbed/pki/broker-mgmt1.crt", 8883, False)
    controller = {**load(os.path.join(REPO, "ansible", "inventories", "lab", "group_vars", "all.yml"))[
        "cellbed_controller_config"], "mqtt_port": 8883, "metrics_port": 9467, "tls_ca": "/etc/cellbed/pki/ca.crt",
        "tls_cert": "/etc/cellbed/pki/{role}-{agent}.crt", "tls_key": "/etc/cellbed/pki/{role}-{agent}.key"}
    (tmp_path / "controller-lm1a.toml").write_text(render("cellbed", "service.toml.j2", item={"config": controller}))
    c = ControllerConfig.load(str(tmp_path / "controller-lm1a.toml"))
    assert (c.tls_cert, c.tls_key, c.mqtt_port) == ("/etc/cellbed/pki/{role}-{agent}.crt",
                                                    "/etc/cellbed/pki/{role}-{agent}.key", 8883)
    insecure = {**controller, "insecure": True}
    for k in ("tls_ca", "tls_cert", "tls_key"):
        del insecure[k]
    (tmp_path / "insecure.toml").write_text(render("cellbed", "service.toml.j2", item={"config": insecure}))
    assert ControllerConfig.load(str(tmp_path / "insecure.toml")).insecure is True


MQTT_CTX = dict(mqtt_conf_path="/etc/mosquitto/conf.d/cellbed.conf", mqtt_listen_address="192.0.2.5",
                mqtt_tls_dir="/etc/mosquitto/cellbed", mqtt_extra_config=[])


def test_mosquitto_listens_on_tls_with_client_certificates_and_the_acl():
    conf = render("mqtt", "cellbed.conf.j2", **MQTT_CTX, mqtt_tls=True, mqtt_port=8883, mqtt_allow_anonymous=False)
    lines = [line for line in conf.splitlines() if line and not line.startswith("#")]
    # the listener the single-box cell writes, with the role's paths (and its packaged `mosquitto` user)
    cell = mqtt_conf.mosquitto_conf("192.0.2.5", TlsFiles("/etc/mosquitto/cellbed/ca.crt", "/etc/mosquitto/cellbed/server.crt",
                                                          "/etc/mosquitto/cellbed/server.key"), "/etc/mosquitto/cellbed/acl")
    keep = ("listener", "cafile", "certfile", "keyfile", "require_certificate", "use_identity_as_username",
            "tls_version", "allow_anonymous", "acl_file")
    assert lines == [line for line in cell.splitlines() if line.startswith(keep)]
    assert "listener 8883 192.0.2.5" in lines and "allow_anonymous false" in lines and "user root" not in conf
    plain = render("mqtt", "cellbed.conf.j2", **MQTT_CTX, mqtt_tls="false", mqtt_port=1883, mqtt_allow_anonymous=True)
    assert "listener 1883 192.0.2.5" in plain and "allow_anonymous true" in plain and "INSECURE" in plain
    assert "cafile" not in plain and "acl_file" not in plain


def test_mosquitto_acl_from_the_inventory_is_the_cells_acl():
    groups = {"cellbed_nodes": ["node1", "node2"], "cellbed_brokers": ["mgmt1", "mgmt2"],
              "cellbed_controllers": ["mgmt1"]}
    hostvars = {"mgmt1": {"cellbed_controller_config": {
        "gm": [{"name": "gm1"}, {"name": "gm2"}],
        "lm": [{"name": "lm1", "instances": ["lm1a", "lm1b"], "hosts": ["node1"]},
               {"name": "lm2", "instances": ["lm2a"], "hosts": ["node2"]}]}},
        "mgmt2": {"cellbed_broker_config": {"name": "ba2"}}}
    got = render("mqtt", "acl.j2", mqtt_cell_name="lab", mqtt_node_group="cellbed_nodes",
                 mqtt_broker_group="cellbed_brokers", mqtt_controller_group="cellbed_controllers",
                 mqtt_admins=["admin"], groups=groups, hostvars=hostvars)
    want = mqtt_conf.acl_text("lab", ["node1", "node2"], brokers=["mgmt1", "ba2"], gms=["gm1", "gm2"],
                              lm_instances={"lm1a": "lm1", "lm1b": "lm1", "lm2a": "lm2"})

    def rules(text):
        return [line for line in text.splitlines() if not line.startswith("#")]
    assert rules(got) == rules(want)
    assert "user node1\ntopic write cellbed/lab/node/node1/#\ntopic write cellbed/lab/masb/report/node1" in got
    assert "user lm1b\ntopic write cellbed/lab/megha/lm/lm1/state" in got
