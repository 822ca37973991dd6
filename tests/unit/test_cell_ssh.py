"""Pure parts of cellctl cell up --ssh (cellbed/cell/ssh.py): mount plan, sshd config, inventory."""
import pytest

from cellbed.cell import ssh


def test_overlay_dirs_live_under_the_scratch_folder():
    assert ssh.overlay_dirs("/etc") == ("/run/cellbed-host/etc/upper", "/run/cellbed-host/etc/work")
    assert ssh.overlay_dirs("/var/lib", "/s") == ("/s/var-lib/upper", "/s/var-lib/work")


@pytest.mark.parametrize("path, top, want", [
    ("/var/lib/dpkg", "/var", True),
    ("/var", "/var", True),
    ("/variable", "/var", False),     # a prefix of the name is not a parent folder
    ("/etc/x/../y", "/etc", True),
    ("/tmp/cells", "/var", False),
])
def test_under(path, top, want):
    assert ssh.under(path, top) is want


def test_shared_under_overlays_keeps_parents_only_and_drops_what_no_overlay_hides():
    got = ssh.shared_under_overlays(["/var/lib/dpkg", "/var/lib/dpkg/info", "/tmp/cells/c1",
                                     "/var/lib/cellbed/cells/c1", "/var/lib/apt", "/var/lib/apt"])
    assert got == ["/var/lib/apt", "/var/lib/cellbed/cells/c1", "/var/lib/dpkg"]


def test_the_cell_state_folder_stays_shared_when_it_is_under_var():
    # hostinit writes pids.json there from inside the host; `cell down` reads it from outside.
    assert "/var/lib/cellbed/cells/a" in ssh.shared_under_overlays([*ssh.SHARED_STATE, "/var/lib/cellbed/cells/a"])


def test_sshd_config_allows_only_root_by_key_on_the_hosts_address():
    conf = ssh.sshd_config("10.231.30.11", "/s/h1/ssh/key", "/s/ssh/authorized_keys")
    lines = {l.split()[0]: l.split(None, 1)[1] for l in conf.splitlines() if l and not l.startswith("#")}
    assert lines["ListenAddress"] == "10.231.30.11" and lines["Port"] == "22"
    assert lines["PasswordAuthentication"] == "no" and lines["PermitRootLogin"] == "prohibit-password"
    assert lines["AuthorizedKeysFile"] == "/s/ssh/authorized_keys" and lines["HostKey"] == "/s/h1/ssh/key"


def test_known_hosts_line_names_the_host_and_its_address():
    assert ssh.known_hosts_line("h1", "10.0.0.11", "ssh-ed25519 AAAAkey h1@cellbed") == "h1,10.0.0.11 ssh-ed25519 AAAAkey\n"
    assert ssh.known_hosts_line("h1", "10.0.0.11", "ssh-ed25519 K c", port=2222).startswith("h1,[10.0.0.11]:2222 ")


STATE = {"name": "ans", "subnet": "10.231.30.0/24",
         "ssh": {"key": "/s/ssh/id_ed25519", "known_hosts": "/s/ssh/known_hosts"},
         "hosts": {"h1": {"address": "10.231.30.11", "cpu_cores": 1.0, "mem_mib": 1024, "ssh_port": 22},
                   "h2": {"address": "10.231.30.12", "cpu_cores": 0.5, "mem_mib": 512, "ssh_port": 22}},
         "resources": [{"kind": "cgroup", "rel": "cellbed/ans/h1"}, {"kind": "cgroup", "rel": "cellbed/ans/h2"}]}


def test_inventory_puts_every_host_in_the_node_group_and_the_first_in_mqtt():
    inv = ssh.inventory(STATE)["all"]
    assert inv["vars"]["ansible_ssh_private_key_file"] == "/s/ssh/id_ed25519"
    assert "UserKnownHostsFile=/s/ssh/known_hosts" in inv["vars"]["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in inv["vars"]["ansible_ssh_common_args"]
    nodes = inv["children"]["cellbed_nodes"]["hosts"]
    assert nodes["h2"] == {"ansible_host": "10.231.30.12", "ansible_port": 22, "cellbed_node_address": "10.231.30.12",
                           "cellbed_node_cpu_cores": 0.5, "cellbed_node_mem_mib": 512,
                           "cellbed_node_cgroup": "cellbed/ans/h2"}
    assert list(inv["children"]["cellbed_mqtt"]["hosts"]) == ["h1"]
    assert inv["children"]["cellbed_brokers"]["hosts"] == {} and inv["children"]["cellbed_controllers"]["hosts"] == {}


def test_inventory_refuses_cells_without_ssh_and_unknown_mqtt_hosts():
    with pytest.raises(ValueError, match="not brought up with --ssh"):
        ssh.inventory({**STATE, "ssh": None})
    with pytest.raises(ValueError, match="h9"):
        ssh.inventory(STATE, mqtt_host="h9")
    assert list(ssh.inventory(STATE, mqtt_host="h2")["all"]["children"]["cellbed_mqtt"]["hosts"]) == ["h2"]


def test_inventory_yaml_reads_back_as_the_same_inventory():
    yaml = pytest.importorskip("yaml")
    inv = ssh.inventory(STATE)
    assert yaml.safe_load(ssh.inventory_yaml(inv)) == inv


def test_client_config_uses_the_cells_key_and_known_hosts():
    conf = ssh.client_config(STATE["hosts"], "/k", "/kh")
    assert "Host h2\n  HostName 10.231.30.12\n  Port 22\n  User root\n  IdentityFile /k\n" in conf
    assert conf.count("StrictHostKeyChecking yes") == 2
