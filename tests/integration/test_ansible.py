"""ansible/ against two namespace hosts reached over SSH (cellctl cell up --ssh --bare, cell ans on
10.231.30.0/24), exactly as against lab servers, with every role of a cell that sweeps: the node
daemons and libvirt on h1 and h2, mosquitto on h1, and a Dask cluster for cellctl sweep (the
scheduler on h1, a worker on each host; issue 16):

- bad input (an inventory or a Dask variable) fails early, naming the host and the requirement,
  before any host is changed;
- site.yml converges and a second run changes nothing;
- the cell is secure by default (issue 13): the node daemons and mosquitto take only clients with
  a certificate of the cell's CA, and the admin's certificate reads the nodes' state over MQTT;
  Dask's scheduler refuses plaintext, a client without a certificate and another CA's;
- verify.yml sees every daemon SERVING and live-migrates a guest over TLS, and runs a task on
  every Dask worker as the cell's admin, over TLS;
- a real `cellctl sweep` (1 scenario x 2 seeds at the smoke scale) runs on the deployed workers;
- teardown.yml leaves nothing the roles created (issue 6), and a second one changes nothing.

Until issue 27 the Dask roles had a bare cell and two site.yml runs of their own (275 s), so the
common base and Cellbed's venv were provisioned twice. The tests run in file order on one cell;
each prints its figures."""
from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import aiomqtt
import dask
import distributed
import grpc
import pytest
from cryptography import x509
from distributed import Client
from distributed.security import Security as DaskSecurity
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.cell.accel import probe
from cellbed.cell import cell as cellmod
from cellbed.cell.mqtt_conf import MQTT_PLAIN_PORT, MQTT_TLS_PORT
from cellbed.cell.ssh import inventory as make_inventory, inventory_yaml
from cellbed.domain.identity import Identity, Role
from cellbed.runtime.authz import INSECURE_HEALTH_SERVICE, Security, mqtt_tls
from cellbed.runtime.cgroups import HostCgroup
from cellbed.runtime.client import NodeClient
from cellbed.runtime.pki import CellCA, identity_of
from cellbed.v1 import node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.ansible_kit import (ANSIBLE_DIR, PLAYBOOK, SSHD_RECORDS, Ansible, _cmdline, _port_closed,
                                          files_below, recap, snapshot_source)
from tests.integration.conftest import REPO, _can_run_cells

pytestmark = pytest.mark.integration

CELL, SUBNET, DASK_PORT = "ans", "10.231.30.0/24", 8786
SMOKE = Path(REPO) / "scenarios" / "smoke.toml"


def cell_inventory(st: dict) -> dict:
    """The cell's generated inventory (node daemons and libvirt on both hosts, mosquitto on h1),
    plus the Dask groups: the scheduler on h1, a worker on h1 and h2."""
    inv = make_inventory(st)
    inv["all"]["vars"]["dask_worker_nthreads"] = 1          # one run at a time per host: 2 cores, shared
    # The hosts' variables (address, SSH port) are cellbed_nodes': a host's are the same in every group.
    inv["all"]["children"]["dask_scheduler"] = {"hosts": {"h1": {}}}
    inv["all"]["children"]["dask_workers"] = {"hosts": {"h1": {}, "h2": {}}}
    return inv


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
            f.write(inventory_yaml(cell_inventory(st)))
        a = Ansible(st, inventory, tmp, source)
        a.before = {h: a.private_files(h) for h in st["hosts"]}
        a.etc_libvirt = {h: files_below(os.path.join(state_root, CELL, h, "etc-libvirt")) for h in st["hosts"]}
        a.scheduler = f"tls://{st['hosts']['h1']['address']}:{DASK_PORT}"
        yield a
    finally:
        if a is not None:
            a.close_connections()
            print(f"\nansible timings (s): {a.timings}")
        if os.path.exists(inventory):
            os.remove(inventory)
        cellmod.down(CELL, state_root)


def admin_files(a: Ansible) -> tuple[str, str, str]:
    """The admin's certificate that site.yml made on the controller: what cellctl sweep uses."""
    return tuple(os.path.join(a.pki, f) for f in ("ca.crt", "admin-admin.crt", "admin-admin.key"))


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
        inv = cell_inventory(ans.st)
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


def test_a_bad_dask_variable_fails_before_any_change(ans):
    r = ans.play("site.yml", "-e", "dask_scheduler_port=http", check=False, label="bad-port")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "h1: invalid Dask variable" in out and "dask_scheduler_port=http (1..65535)" in out, \
        out[-4000:]
    assert "PLAY [Provision the libvirt hosts]" not in out and "PLAY [Run Dask for cellctl sweep]" not in out
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


def test_dask_runs_where_the_inventory_says_with_certificates_for_root_alone(ans):
    """The scheduler on h1 only, a worker on both, and the scheduler's certificate (made on the
    controller) names h1's address and no Cellbed identity."""
    for h in ("h1", "h2"):
        got = ans.ssh(h, "stat -c '%a %U %n' /etc/cellbed/dask/pki /etc/cellbed/dask/pki/*").split("\n")
        want = ["700 root /etc/cellbed/dask/pki", "644 root /etc/cellbed/dask/pki/ca.crt",
                "644 root /etc/cellbed/dask/pki/worker.crt", "600 root /etc/cellbed/dask/pki/worker.key"]
        if h == "h1":
            want += ["644 root /etc/cellbed/dask/pki/scheduler.crt", "600 root /etc/cellbed/dask/pki/scheduler.key"]
        assert sorted(filter(None, got)) == sorted(want), got
    with open(os.path.join(ans.pki, "service-dask-scheduler.crt"), "rb") as f:
        pem = f.read()
    sans = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == [ans.st["hosts"]["h1"]["address"]]
    assert identity_of(pem) is None


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
    report, dask_report = os.path.join(ans.tmp, "verify.json"), os.path.join(ans.tmp, "dask-verify.json")
    ans.play("verify.yml", "-e", f"cellbed_verify_report={report}", "-e", f"dask_verify_report={dask_report}",
             label="verify")
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
    # Dask: a task on every worker, as the cell's admin, over TLS; plaintext refused; the
    # cluster's Dask is the controller's.
    with open(dask_report) as f:
        dv = json.load(f)
    assert dv["scheduler"] == ans.scheduler and dv["tls"] is True and dv["plaintext_refused"] is True, dv
    assert sorted(w["host"] for w in dv["workers"].values()) == ["h1", "h2"], dv
    assert all(w.startswith("tls://") for w in dv["workers"]), dv
    assert (dv["versions"]["dask"], dv["versions"]["distributed"]) == (dask.__version__, distributed.__version__)


def _dask_refused(address: str, security: DaskSecurity | None) -> bool:
    try:
        with Client(address, security=security, timeout=5, set_as_default=False):
            return False
    except (OSError, TimeoutError):
        return True


def _tls_without_certificate_refused(host: str, port: int, ca: str) -> bool:
    """A TLS client that trusts the cell's CA but shows no certificate: the scheduler ends the
    connection (with TLS 1.3 after the handshake, at the first read) instead of greeting it."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    try:
        with socket.create_connection((host, port), timeout=10) as raw, ctx.wrap_socket(raw) as s:
            return s.recv(1) == b""
    except (ssl.SSLError, ConnectionError):
        return True


async def test_a_sweep_runs_on_the_deployed_cluster_over_tls_only(ans, tmp_path):
    ca, cert, key = admin_files(ans)
    sec = DaskSecurity(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
    addresses = {ans.st["hosts"][h]["address"] for h in ("h1", "h2")}

    async def two_workers():
        try:
            async with Client(ans.scheduler, security=sec, asynchronous=True, timeout=5) as c:
                return len(await c.nthreads()) == 2
        except OSError:
            return False
    await wait_until(two_workers, 60, "the scheduler on h1 with the workers of h1 and h2")
    async with Client(ans.scheduler, security=sec, asynchronous=True, timeout=10) as c:
        versions = await c.get_versions(check=True)         # raises if the cluster's Dask is not the controller's
    assert versions["scheduler"]["packages"]["distributed"] == distributed.__version__

    # Refused: plaintext, TLS without a certificate, and the right identity from another CA.
    h1 = ans.st["hosts"]["h1"]["address"]
    rogue = CellCA.create(tmp_path / "rogue", CELL).issue(Identity(CELL, Role.ADMIN, "admin"))
    assert _dask_refused(f"tcp://{h1}:{DASK_PORT}", None)
    assert _tls_without_certificate_refused(h1, DASK_PORT, ca)
    assert _dask_refused(ans.scheduler, DaskSecurity(tls_ca_file=ca, tls_client_cert=rogue.cert, tls_client_key=rogue.key,
                                           require_encryption=True))
    # Nothing listens on every interface: the Dask servers and the cell's daemons on the host's
    # address (some through an IPv4-mapped IPv6 socket), Dask's HTTP on loopback.
    for h in ("h1", "h2"):
        local = {line.split()[3].rsplit(":", 1)[0].removeprefix("[::ffff:").rstrip("]")   # an IPv4-mapped socket
                 for line in ans.ssh(h, "ss -Hltn").splitlines() if line.strip()}
        assert local <= {ans.st["hosts"][h]["address"], "127.0.0.1"}, (h, local)
    assert f"{h1}:{DASK_PORT}" in ans.ssh("h1", "ss -Hltn")

    spec = tmp_path / "adask.toml"
    spec.write_text(f'name = "adask"\nscenarios = ["{SMOKE}"]\nseeds = [1, 2]\n'
                    '[set]\n"run.duration_s" = 600\n"cell.nodes" = 60\n')
    out = tmp_path / "sweep"                 # the workers see it at the same path (the box's /tmp)
    p = subprocess.run([sys.executable, "-m", "cellbed.cli.main", "sweep", str(spec), "--out", str(out),
                        "--scheduler", ans.scheduler, "--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key,
                        "--no-report", "--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "plaintext" not in p.stderr
    res = json.loads(p.stdout)
    assert (res["ran"], res["failed"], res["cluster"]) == (2, [], f"the Dask cluster at {ans.scheduler}"), res
    assert {w.split("://")[0] for w in res["workers"]} == {"tls"}, res["workers"]
    ran_on = {r["worker"].split("://")[1].rsplit(":", 1)[0] for r in res["runs"].values()}
    assert ran_on == addresses, res["runs"]
    for seed in (1, 2):
        events = (out / "smoke" / "default" / f"seed-{seed}" / "events.jsonl").read_text().splitlines()
        assert json.loads(events[-1])["kind"] == "run_completed"
    print(f"\nsweep of 2 runs on the deployed cluster: {res['wall_s']} s; ran on {sorted(ran_on)}")


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
        for port in (50051, 16509, 16514, MQTT_PLAIN_PORT, MQTT_TLS_PORT, DASK_PORT):
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
