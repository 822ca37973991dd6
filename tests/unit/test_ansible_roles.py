"""Pure parts of ansible/: the node config template against NodeConfig, the role layout
(geerlingguy style), the package lists against ./cellbed.sh, and the controller's wheel builder."""
import importlib.util
import json
import os
import re
import tarfile

import pytest

from cellbed.daemon.config import NodeConfig

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
                                                                                            sort_keys=sort_keys))
    return env.get_template(template).render(ansible_managed="Ansible managed", **ctx)


NODE_CTX = dict(inventory_hostname="h2", cellbed_node_address="10.231.30.12", cellbed_node_grpc_port=50051,
                __cellbed_migration_scheme="qemu+tcp", cellbed_node_cpu_cores=0.5, cellbed_node_mem_mib=512,
                __cellbed_max_cpu=1.0, __cellbed_max_mem=1024, __cellbed_accel="tcg",
                libvirt_host_cpu_model_effective="qemu64", cellbed_guest_dir="/var/lib/cellbed/guest",
                cellbed_state_dir="/var/lib/cellbed/node", cellbed_config_dir="/etc/cellbed",
                cellbed_node_cgroup="cellbed/ans/h2", cellbed_node_monitor_period_s=2.0,
                cellbed_node_migration_timeout_s=120.0, __cellbed_mqtt_host="10.231.30.11", cellbed_mqtt_port=1883,
                cellbed_cell_name="ans", cellbed_node_extra={"verify_timeout_s": 30.0})


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
    t = render("libvirt_host", "libvirtd.conf.j2", **{**ctx, "libvirt_host_transport": "tls", "libvirt_host_tls_port": 16514})
    assert "listen_tls = 1" in t and "listen_tcp = 0" in t and "auth_tcp" not in t


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
