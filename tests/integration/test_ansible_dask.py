"""ansible/roles/dask (issue 16, part 4) against two namespace hosts reached over SSH (`cellctl cell
up --ssh --bare`, cell adask on 10.231.33.0/24), as against lab servers: the inventory has only the
Dask groups (the scheduler on h1, workers on h1 and h2), so site.yml runs the common base, Cellbed's
venv and the dask role, nothing else.

- a bad Dask variable fails before any host is changed, naming the host and the variable;
- site.yml converges and a second run changes nothing;
- verify.yml runs a task on every worker as the cell's admin, over TLS;
- a real `cellctl sweep` of a tiny spec (1 scenario x 2 seeds at the smoke scale) completes on the
  deployed scheduler and workers, over TLS with the admin's certificate, and runs on both hosts; the
  cluster has the controller's Dask; nothing listens on 0.0.0.0; a client without a certificate of
  the cell's CA (plaintext, no certificate, another CA's) is refused;
- teardown.yml leaves no process, port or file the roles created, and a second one changes nothing.

The tests run in file order on one cell; each prints its figures."""
from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import dask
import distributed
import pytest
from cryptography import x509
from distributed import Client
from distributed.security import Security

from cellbed.cell import cell as cellmod
from cellbed.cell.ssh import inventory as make_inventory, inventory_yaml
from cellbed.domain.identity import Identity, Role
from cellbed.runtime.cgroups import HostCgroup
from cellbed.runtime.pki import CellCA, identity_of
from tests.conftest import wait_until
from tests.integration.conftest import REPO, _can_run_cells
from tests.integration.test_ansible import (ANSIBLE_DIR, PLAYBOOK, SSHD_RECORDS, Ansible, _cmdline, _port_closed,
                                            recap, snapshot_source)

pytestmark = pytest.mark.integration

CELL, SUBNET, PORT = "adask", "10.231.33.0/24", 8786
SMOKE = Path(REPO) / "scenarios" / "smoke.toml"


@pytest.fixture(scope="module")
def ad(state_root, tmp_path_factory):
    why = _can_run_cells() or ("" if os.path.exists(PLAYBOOK) else "ansible-playbook is not in the venv")
    if why:
        pytest.fail(f"ansible integration cannot run: {why}")
    tmp = str(tmp_path_factory.mktemp("ansible-dask"))
    source = snapshot_source(os.path.join(tmp, "src"))
    st = cellmod.up(CELL, 2, subnet=SUBNET, host_cpus=[1.0], host_mem_mib=[1024], root=state_root,
                    ssh=True, bare=True)
    inventory = os.path.join(ANSIBLE_DIR, "inventories", "local", f"test-{CELL}.yml")
    a = None
    try:
        inv = make_inventory(st)
        hv = {h: {k: v[k] for k in ("ansible_host", "ansible_port", "cellbed_node_address")}
              for h, v in inv["all"]["children"]["cellbed_nodes"]["hosts"].items()}
        inv["all"]["vars"]["dask_worker_nthreads"] = 1          # one run at a time per host: 2 cores, shared
        # No Cellbed agents (their groups empty, as in a cell's inventory without brokers), only Dask.
        inv["all"]["children"] = {**{g: {"hosts": {}} for g in inv["all"]["children"]},
                                  "dask_scheduler": {"hosts": {"h1": hv["h1"]}},
                                  "dask_workers": {"hosts": {"h1": {}, "h2": hv["h2"]}}}
        with open(inventory, "w") as f:
            f.write(inventory_yaml(inv))
        a = Ansible(st, inventory, tmp, source)
        a.before = {h: a.private_files(h) for h in st["hosts"]}
        a.scheduler = f"tls://{st['hosts']['h1']['address']}:{PORT}"
        yield a
    finally:
        if a is not None:
            a.close_connections()
            print(f"\nansible timings (s): {a.timings}")
        if os.path.exists(inventory):
            os.remove(inventory)
        cellmod.down(CELL, state_root)


def admin_files(ad: Ansible) -> tuple[str, str, str]:
    """The admin's certificate that site.yml made on the controller: what cellctl sweep uses."""
    return tuple(os.path.join(ad.pki, f) for f in ("ca.crt", "admin-admin.crt", "admin-admin.key"))


def test_a_bad_dask_variable_fails_before_any_change(ad):
    r = ad.play("site.yml", "-e", "dask_scheduler_port=http", check=False, label="bad-port")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "h1: invalid Dask variable" in out and "dask_scheduler_port=http (1..65535)" in out, \
        out[-4000:]
    assert "PLAY [Run Dask for cellctl sweep]" not in out
    assert all(v["changed"] == 0 for v in recap(out).values()), recap(out)
    for h in ad.st["hosts"]:
        assert ad.private_files(h) == ad.before[h]


def test_site_converges_and_a_second_run_changes_nothing(ad):
    first = recap(ad.play("site.yml", label="site-1").stdout)
    assert set(first) == {"h1", "h2"} and all(v["failed"] == v["unreachable"] == 0 for v in first.values()), first
    assert all(v["changed"] > 0 for v in first.values()), first
    second = recap(ad.play("site.yml", label="site-2").stdout)
    assert {h: v["changed"] for h, v in second.items()} == {"h1": 0, "h2": 0}, (
        second, open(os.path.join(ad.tmp, "site-2.log")).read()[-6000:])
    # What runs where: the scheduler on h1 only, a worker on both, and certificates for root alone.
    for h in ("h1", "h2"):
        got = ad.ssh(h, "stat -c '%a %U %n' /etc/cellbed/dask/pki /etc/cellbed/dask/pki/*").split("\n")
        want = ["700 root /etc/cellbed/dask/pki", "644 root /etc/cellbed/dask/pki/ca.crt",
                "644 root /etc/cellbed/dask/pki/worker.crt", "600 root /etc/cellbed/dask/pki/worker.key"]
        if h == "h1":
            want += ["644 root /etc/cellbed/dask/pki/scheduler.crt", "600 root /etc/cellbed/dask/pki/scheduler.key"]
        assert sorted(filter(None, got)) == sorted(want), got
    # The scheduler's certificate (made on the controller) names h1's address, and no Cellbed identity.
    with open(os.path.join(ad.pki, "service-dask-scheduler.crt"), "rb") as f:
        pem = f.read()
    sans = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == [ad.st["hosts"]["h1"]["address"]]
    assert identity_of(pem) is None
    print(f"\nsite.yml first run {ad.timings['site-1']} s (changed {first['h1']['changed']}+{first['h2']['changed']}),"
          f" second run {ad.timings['site-2']} s (changed 0)")


def test_verify_runs_a_task_on_every_worker_over_tls(ad):
    report = os.path.join(ad.tmp, "dask-verify.json")
    ad.play("verify.yml", "-e", f"dask_verify_report={report}", label="verify")
    with open(report) as f:
        got = json.load(f)
    assert got["scheduler"] == ad.scheduler and got["tls"] is True and got["plaintext_refused"] is True, got
    assert sorted(w["host"] for w in got["workers"].values()) == ["h1", "h2"], got
    assert all(w.startswith("tls://") for w in got["workers"]), got
    assert (got["versions"]["dask"], got["versions"]["distributed"]) == (dask.__version__, distributed.__version__)
    print(f"\nverify.yml {ad.timings['verify']} s; workers {sorted(got['workers'])}")


def _refused(address: str, security: Security | None) -> bool:
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


async def test_a_sweep_runs_on_the_deployed_cluster_over_tls_only(ad, tmp_path):
    ca, cert, key = admin_files(ad)
    sec = Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
    addresses = {ad.st["hosts"][h]["address"] for h in ("h1", "h2")}

    async def two_workers():
        try:
            async with Client(ad.scheduler, security=sec, asynchronous=True, timeout=5) as c:
                return len(await c.nthreads()) == 2
        except OSError:
            return False
    await wait_until(two_workers, 60, "the scheduler on h1 with the workers of h1 and h2")
    async with Client(ad.scheduler, security=sec, asynchronous=True, timeout=10) as c:
        versions = await c.get_versions(check=True)         # raises if the cluster's Dask is not the controller's
    assert versions["scheduler"]["packages"]["distributed"] == distributed.__version__

    # Refused: plaintext, TLS without a certificate, and the right identity from another CA.
    h1 = ad.st["hosts"]["h1"]["address"]
    rogue = CellCA.create(tmp_path / "rogue", CELL).issue(Identity(CELL, Role.ADMIN, "admin"))
    assert _refused(f"tcp://{h1}:{PORT}", None)
    assert _tls_without_certificate_refused(h1, PORT, ca)
    assert _refused(ad.scheduler, Security(tls_ca_file=ca, tls_client_cert=rogue.cert, tls_client_key=rogue.key,
                                           require_encryption=True))
    # Nothing listens on every interface: the Dask servers on the host's address, their HTTP on loopback.
    for h in ("h1", "h2"):
        local = {line.split()[3].rsplit(":", 1)[0] for line in ad.ssh(h, "ss -Hltn").splitlines() if line.strip()}
        assert local <= {ad.st["hosts"][h]["address"], "127.0.0.1"}, (h, local)
    assert f"{h1}:{PORT}" in ad.ssh("h1", "ss -Hltn")

    spec = tmp_path / "adask.toml"
    spec.write_text(f'name = "adask"\nscenarios = ["{SMOKE}"]\nseeds = [1, 2]\n'
                    '[set]\n"run.duration_s" = 600\n"cell.nodes" = 60\n')
    out = tmp_path / "sweep"                 # the workers see it at the same path (the box's /tmp)
    p = subprocess.run([sys.executable, "-m", "cellbed.cli.main", "sweep", str(spec), "--out", str(out),
                        "--scheduler", ad.scheduler, "--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key,
                        "--no-report", "--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "plaintext" not in p.stderr
    res = json.loads(p.stdout)
    assert (res["ran"], res["failed"], res["cluster"]) == (2, [], f"the Dask cluster at {ad.scheduler}"), res
    assert {w.split("://")[0] for w in res["workers"]} == {"tls"}, res["workers"]
    ran_on = {r["worker"].split("://")[1].rsplit(":", 1)[0] for r in res["runs"].values()}
    assert ran_on == addresses, res["runs"]
    for seed in (1, 2):
        events = (out / "smoke" / "default" / f"seed-{seed}" / "events.jsonl").read_text().splitlines()
        assert json.loads(events[-1])["kind"] == "run_completed"
    print(f"\nsweep of 2 runs on the deployed cluster: {res['wall_s']} s; ran on {sorted(ran_on)}")


async def test_teardown_leaves_no_process_port_or_file(ad, state_root):
    r = ad.play("teardown.yml", label="teardown")
    assert all(v["failed"] == 0 for v in recap(r.stdout).values())
    ad.close_connections()
    for name, h in ad.st["hosts"].items():
        with open(os.path.join(state_root, CELL, name, "pids.json")) as f:
            sshd = json.load(f)["sshd"]["pid"]
        cg = HostCgroup(f"cellbed/{CELL}/{name}")

        async def only_sshd_left():
            return cg.pids() == {sshd}
        try:
            await wait_until(only_sshd_left, 30, f"{name}: only sshd in its cgroup")
        except pytest.fail.Exception:
            pytest.fail(f"{name}: left in its cgroup: " + repr({p: _cmdline(p) for p in cg.pids() - {sshd}}))
        assert _port_closed(h["address"], PORT), name
        # The private overlays hold what they held before site.yml, plus sshd's login records, plus
        # folders that also exist on the box (an overlay keeps a copied-up folder).
        after = ad.private_files(name)
        new = {p: k for p, k in after.items() if p not in ad.before[name] and p not in SSHD_RECORDS}
        assert all(k == "d" and os.path.isdir("/" + p) for p, k in new.items()), new
    again = recap(ad.play("teardown.yml", label="teardown-2").stdout)
    assert {h: v["changed"] for h, v in again.items()} == {"h1": 0, "h2": 0}, again
    print(f"\nteardown.yml {ad.timings['teardown']} s; second teardown {ad.timings['teardown-2']} s (changed 0)")
