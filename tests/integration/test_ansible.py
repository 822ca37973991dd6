"""ansible/ against two namespace hosts reached over SSH (cellctl cell up --ssh --bare), exactly
as against lab servers: bad input fails early and named; site.yml converges and a second run
changes nothing; the cell is secure by default (issue 13): the node daemons and mosquitto take
only clients with a certificate of the cell's CA, and the admin's certificate reads the nodes'
state over MQTT; verify.yml sees every daemon SERVING and live-migrates a guest over TLS;
teardown.yml leaves nothing the roles created (issue 6).

The tests run in file order on one cell; each prints its figures."""
import asyncio
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time

import aiomqtt
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.cell.accel import probe
from cellbed.cell import cell as cellmod
from cellbed.cell.mqtt_conf import MQTT_PLAIN_PORT, MQTT_TLS_PORT
from cellbed.cell.ssh import inventory as make_inventory, inventory_yaml
from cellbed.domain.identity import Identity, Role
from cellbed.runtime.authz import INSECURE_HEALTH_SERVICE, Security, mqtt_tls
from cellbed.runtime.cgroups import HostCgroup
from cellbed.runtime.client import NodeClient
from cellbed.runtime.pki import CellCA, TlsFiles
from cellbed.v1 import node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.conftest import REPO, _can_run_cells

pytestmark = pytest.mark.integration

CELL, SUBNET = "ans", "10.231.30.0/24"
ANSIBLE_DIR = os.path.join(REPO, "ansible")
BIN = os.path.dirname(sys.executable)
PLAYBOOK = os.path.join(BIN, "ansible-playbook")
# Written into the overlays by sshd itself at each login, not by a role.
SSHD_RECORDS = {"var/log/lastlog", "var/log/wtmp", "var/log/btmp"}
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(out: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP lines -> {host: {ok, changed, unreachable, failed}}."""
    return {m[1]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()[1:])))
            for m in RECAP.finditer(out)}


def snapshot_source(dst: str) -> str:
    """A copy of the checkout's files (as git sees them), so that edits made while the tests run
    do not change the wheel between the first and the second run."""
    files = subprocess.run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard"], capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for rel in filter(None, files):
        if rel.startswith(("ansible/", "tests/", "docs/", "results/")):
            continue
        src = os.path.join(REPO, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dst, rel))
    return dst


def files_below(top: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), top) for d, _, names in os.walk(top) for n in names}


class Ansible:
    def __init__(self, st: dict, inventory: str, tmp: str, source: str):
        self.st, self.inventory, self.tmp = st, inventory, tmp
        self.env = {**os.environ, "ANSIBLE_SSH_CONTROL_PATH_DIR": os.path.join(tmp, "cp"),
                    "ANSIBLE_LOCAL_TEMP": os.path.join(tmp, "local"), "ANSIBLE_NOCOLOR": "1",
                    "ANSIBLE_FORCE_COLOR": "0", "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
        self.pki = os.path.join(tmp, "pki")       # the cell's CA and certificates, on the controller
        self.extra = {"cellbed_source_dir": source, "cellbed_pki_dir": self.pki,
                      "cellbed_controller_wheelhouse": os.path.join(REPO, "build", "wheelhouse"),
                      "cellbed_controller_guest_dir": os.path.join(REPO, "build", "guest")}
        self.timings: dict[str, float] = {}

    def play(self, playbook: str, *args: str, inventory: str | None = None, check: bool = True,
             label: str = "") -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        r = subprocess.run([PLAYBOOK, "-i", inventory or self.inventory, playbook, "-e", json.dumps(self.extra),
                            *args], cwd=ANSIBLE_DIR, env=self.env, capture_output=True, text=True, timeout=900)
        self.timings[label or playbook] = round(time.monotonic() - t0, 1)
        with open(os.path.join(self.tmp, f"{label or playbook}.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if check and r.returncode != 0:
            pytest.fail(f"ansible-playbook {playbook} failed ({r.returncode}):\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}")
        return r

    def admin(self) -> Security:
        """The admin's certificate that site.yml made on the controller (roles/cellbed/tasks/pki_admin.yml)."""
        return Security.mtls(CELL, TlsFiles(*(os.path.join(self.pki, f) for f in
                                              ("ca.crt", "admin-admin.crt", "admin-admin.key"))))

    def ssh(self, host: str, command: str) -> str:
        r = subprocess.run(["ssh", "-F", self.st["ssh"]["config"], "-o", "ControlMaster=no", host, command],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (host, command, r.stderr)
        return r.stdout

    def close_connections(self) -> None:
        """End the SSH master connections that ansible-playbook keeps open (ControlPersist)."""
        cp = self.env["ANSIBLE_SSH_CONTROL_PATH_DIR"]
        for sock in os.listdir(cp) if os.path.isdir(cp) else []:
            subprocess.run(["ssh", "-S", os.path.join(cp, sock), "-O", "exit", "cellbed-host"],
                           capture_output=True, timeout=30)

    def private_files(self, host: str) -> dict[str, str]:
        """What the host wrote into its private overlays (/etc, /opt, /var): {path: type}."""
        out = self.ssh(host, "cd /run/cellbed-host && find . -mindepth 3 -path './*/upper/*' -printf '%y %P\\n'")
        files = {}
        for line in out.splitlines():
            kind, rel = line.split(" ", 1)
            top, _, path = rel.partition("/upper/")
            files[f"{top.replace('-', '/')}/{path}"] = kind
        return files


@pytest.fixture(scope="module")
def ans(state_root, tmp_path_factory):
    why = _can_run_cells() or ("" if os.path.exists(PLAYBOOK) else "ansible-playbook is not in the venv")
    if why:
        pytest.fail(f"ansible integration cannot run: {why}")
    tmp = str(tmp_path_factory.mktemp("ansible"))
    source = snapshot_source(os.path.join(tmp, "src"))
    st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[1.0], host_mem_mib=[1024], root=state_root,
                    ssh=True, bare=True)
    inventory = os.path.join(ANSIBLE_DIR, "inventories", "local", f"test-{CELL}.yml")
    a = None
    try:
        with open(inventory, "w") as f:
            f.write(inventory_yaml(make_inventory(st)))
        a = Ansible(st, inventory, tmp, source)
        a.before = {h: a.private_files(h) for h in st["hosts"]}
        a.etc_libvirt = {h: files_below(os.path.join(state_root, CELL, h, "etc-libvirt")) for h in st["hosts"]}
        yield a
    finally:
        if a is not None:
            a.close_connections()
            print(f"\nansible timings (s): {a.timings}")
        if os.path.exists(inventory):
            os.remove(inventory)
        cellmod.down(CELL, state_root)


@pytest.mark.parametrize("case, args, expect", [
    ("missing address", [], r"h2: cellbed_node_address is missing or not an IPv4 address"),
    ("wrong port", ["-e", "cellbed_node_grpc_port=http"], r"invalid node variable: cellbed_node_grpc_port=http"),
    ("too little memory", ["-e", "common_min_memory_mib=100000000"],
     r"h1: needs at least 100000000 MiB of memory \(common_min_memory_mib\)"),
    ("kvm required", ["-e", '{"common_kvm_required": true}'], r"h1: KVM is required \(common_kvm_required\) but unusable"),
])
def test_bad_inventory_fails_early_naming_host_and_requirement(ans, case, args, expect):
    if case == "kvm required" and probe("auto").accel == "kvm":
        pytest.skip("this machine has usable KVM: the requirement is met")
    inventory = ans.inventory
    if case == "missing address":   # the generated inventory without h2's address
        inv = make_inventory(ans.st)
        del inv["all"]["children"]["cellbed_nodes"]["hosts"]["h2"]["cellbed_node_address"]
        inventory = ans.inventory.replace(".yml", "-noaddr.yml")
        with open(inventory, "w") as f:
            f.write(inventory_yaml(inv))
    try:
        r = ans.play("site.yml", *args, inventory=inventory, check=False, label=f"bad-{case.replace(' ', '-')}")
    finally:
        if inventory != ans.inventory:
            os.remove(inventory)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and re.search(expect, out), out[-4000:]
    assert "PLAY [Provision the libvirt hosts]" not in out      # stopped before any change
    assert all(v["changed"] == 0 for v in recap(out).values()), recap(out)
    for h in ans.st["hosts"]:
        assert ans.private_files(h) == ans.before[h]


def test_site_converges_and_a_second_run_changes_nothing(ans):
    first = recap(ans.play("site.yml", label="site-1").stdout)
    assert set(first) == {"h1", "h2"} and all(v["failed"] == v["unreachable"] == 0 for v in first.values()), first
    assert all(v["changed"] > 0 for v in first.values()), first
    second = recap(ans.play("site.yml", label="site-2").stdout)
    assert {h: v["changed"] for h, v in second.items()} == {"h1": 0, "h2": 0}, (
        second, open(os.path.join(ans.tmp, "site-2.log")).read()[-6000:])
    print(f"\nsite.yml first run {ans.timings['site-1']} s (changed {first['h1']['changed']}+{first['h2']['changed']}),"
          f" second run {ans.timings['site-2']} s (changed 0)")


def _health(target: str, channel: grpc.Channel, service: str = "cellbed.v1.NodeAgent") -> int:
    with channel as ch:
        return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def _refused(target: str, channel: grpc.Channel) -> grpc.StatusCode | None:
    """The status of a health call that the server refuses (None if it answers)."""
    try:
        _health(target, channel)
    except grpc.RpcError as e:
        return e.code()
    return None


async def _mqtt_refused(host: str, port: int, tls) -> bool:
    try:
        async with aiomqtt.Client(host, port, timeout=5, tls_params=tls):
            return False
    except (aiomqtt.MqttError, ssl.SSLError, OSError):
        return True


async def test_the_cell_takes_only_clients_with_a_certificate_of_its_ca(ans):
    hosts = ans.st["hosts"]
    admin = ans.admin()
    rogue = CellCA.create(os.path.join(ans.tmp, "rogue"), CELL)      # the right identity, another CA
    rogue_admin = Security.mtls(CELL, rogue.issue(Identity(CELL, Role.ADMIN, "admin")))
    for name, h in hosts.items():
        target = f"{h['address']}:50051"
        assert _refused(target, grpc.insecure_channel(target)) == grpc.StatusCode.UNAVAILABLE, name
        no_cert = grpc.ssl_channel_credentials(root_certificates=admin.tls.read()[0])
        assert _refused(target, grpc.secure_channel(target, no_cert)) == grpc.StatusCode.UNAVAILABLE, name
        assert _refused(target, rogue_admin.sync_channel(target)) == grpc.StatusCode.UNAVAILABLE, name
        assert _health(target, admin.sync_channel(target)) == health_pb2.HealthCheckResponse.SERVING, name
        with pytest.raises(grpc.RpcError) as e:             # a secure daemon does not report itself insecure
            _health(target, admin.sync_channel(target), INSECURE_HEALTH_SERVICE)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND, name
        # On the host: its own certificates only, in a folder for root alone.
        got = ans.ssh(name, "stat -c '%a %U %n' /etc/cellbed/pki /etc/cellbed/pki/*").split("\n")
        assert sorted(filter(None, got)) == sorted([
            "700 root /etc/cellbed/pki", "644 root /etc/cellbed/pki/ca.crt",
            f"644 root /etc/cellbed/pki/node-{name}.crt", f"600 root /etc/cellbed/pki/node-{name}.key"]), got
    # mosquitto (on h1): TLS with a certificate of the cell's CA only, and the ACL lets the nodes publish
    # their state, which the admin reads.
    mqtt = hosts["h1"]["address"]
    assert await _mqtt_refused(mqtt, MQTT_PLAIN_PORT, None)
    assert await _mqtt_refused(mqtt, MQTT_TLS_PORT, None)
    assert await _mqtt_refused(mqtt, MQTT_TLS_PORT, mqtt_tls(rogue_admin))
    seen: set[str] = set()
    async with aiomqtt.Client(mqtt, MQTT_TLS_PORT, timeout=10, tls_params=mqtt_tls(admin)) as client:
        await client.subscribe(f"cellbed/{CELL}/node/+/state")

        async def both_nodes():
            async for m in client.messages:
                seen.add(json.loads(m.payload)["host"])
                if seen == set(hosts):
                    return
        await asyncio.wait_for(both_nodes(), 60)
    got = ans.ssh("h1", "stat -c '%a %U %G %n' /etc/mosquitto/cellbed /etc/mosquitto/cellbed/*").split("\n")
    assert sorted(filter(None, got)) == sorted([
        "750 root mosquitto /etc/mosquitto/cellbed", "640 root mosquitto /etc/mosquitto/cellbed/acl",
        "640 root mosquitto /etc/mosquitto/cellbed/ca.crt", "640 root mosquitto /etc/mosquitto/cellbed/server.crt",
        "640 root mosquitto /etc/mosquitto/cellbed/server.key"]), got


async def test_verify_sees_every_daemon_serving_and_a_verified_live_migration(ans):
    report = os.path.join(ans.tmp, "verify.json")
    ans.play("verify.yml", "-e", f"cellbed_verify_report={report}", label="verify")
    with open(report) as f:
        got = json.load(f)
    rec = got["record"]
    assert rec["outcome"] == "MIGRATION_OUTCOME_SUCCEEDED", rec
    assert (rec["src"], rec["dst"], rec["vm"]) == ("h1", "h2", "verify-vm")
    assert int(rec["heartbeat_after"]) > int(rec["heartbeat_before"]) and int(rec["integrity_bad"]) == 0
    assert int(rec["data_total_bytes"]) > 0 and rec["downtime_ms"] > 0
    assert rec["tls"] is True                   # the migration data went over TLS, not only libvirt's connection
    # Independently of verify.yml: the daemons the roles started answer the admin here, and h1
    # keeps the record.
    hosts, admin = ans.st["hosts"], ans.admin()
    for h in hosts.values():
        target = f"{h['address']}:50051"
        assert _health(target, admin.sync_channel(target)) == health_pb2.HealthCheckResponse.SERVING
    async with NodeClient(f"{hosts['h1']['address']}:50051", "h1", admin) as c:
        hist = (await c.call("ListMigrations", npb.ListMigrationsRequest())).records
    assert [(r.outcome, r.tls) for r in hist if r.id == rec["id"]] == [(npb.MIGRATION_OUTCOME_SUCCEEDED, True)]
    for h in ("h1", "h2"):    # verify.yml stopped its guest
        async with NodeClient(f"{hosts[h]['address']}:50051", h, admin) as c:
            assert not (await c.call("ListVms", npb.ListVmsRequest())).vms
    print(f"\nverify.yml {ans.timings['verify']} s; migration h1->h2 of a 128 MiB guest over TLS: "
          f"elapsed {rec['time_elapsed_ms']:.0f} ms, downtime {rec['downtime_ms']:.0f} ms, "
          f"{int(rec['data_total_bytes']) / 2**20:.1f} MiB, {rec['memory_iteration']} iterations, "
          f"wall {rec['wall_ms']:.0f} ms, heartbeat {rec['heartbeat_before']}->{rec['heartbeat_after']}, "
          f"boot-to-heartbeat {got['boot_to_heartbeat_s']} s")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")
    except FileNotFoundError:
        return "(gone)"


def _port_closed(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return False
    except OSError:
        return True


async def test_teardown_leaves_no_service_config_or_process(ans, state_root):
    r = ans.play("teardown.yml", label="teardown")
    assert all(v["failed"] == 0 for v in recap(r.stdout).values())
    ans.close_connections()
    for name, h in ans.st["hosts"].items():
        # Processes: only the cell's own sshd is left in the host's cgroup (nothing the roles
        # started); the sessions of the closed SSH connections end on their own.
        with open(os.path.join(state_root, CELL, name, "pids.json")) as f:
            sshd = json.load(f)["sshd"]["pid"]
        cg = HostCgroup(f"cellbed/{CELL}/{name}")

        async def only_sshd_left():
            return cg.pids() == {sshd}
        try:
            await wait_until(only_sshd_left, 30, f"{name}: only sshd in its cgroup")
        except pytest.fail.Exception:
            pytest.fail(f"{name}: left in its cgroup: " + repr({p: _cmdline(p) for p in cg.pids() - {sshd}}))
        # Services: nothing listens on gRPC, libvirt or MQTT ports any more.
        for port in (50051, 16509, 16514, MQTT_PLAIN_PORT, MQTT_TLS_PORT):
            assert _port_closed(h["address"], port), (name, port)
        # Files: the private overlays hold what they held before site.yml, plus sshd's login
        # records, plus folders that also exist on the box (an overlay keeps a copied-up folder).
        after = ans.private_files(name)
        new = {p: k for p, k in after.items() if p not in ans.before[name] and p not in SSHD_RECORDS}
        assert all(k == "d" and os.path.isdir("/" + p) for p, k in new.items()), new
        # /etc/libvirt is the host's own folder (a bind mount, not an overlay): the same files as before.
        assert files_below(os.path.join(state_root, CELL, name, "etc-libvirt")) == ans.etc_libvirt[name]
    again = recap(ans.play("teardown.yml", label="teardown-2").stdout)
    assert {h: v["changed"] for h, v in again.items()} == {"h1": 0, "h2": 0}, again
    print(f"\nteardown.yml {ans.timings['teardown']} s; second teardown {ans.timings['teardown-2']} s (changed 0)")
