"""nested.yml for real on this box (issue 6, acceptance 4): build 2 L1 guests (debootstrap root
file system, direct kernel boot on a private bridge), provision them with site.yml, live-migrate
an L2 guest between them with verify.yml, then remove them with nested_state=absent.

Optional and slow: L1 guests run under TCG where L0 has no usable vmx/svm (their L2 guests then
get KVM on TCG's emulated SVM). It took 34 minutes on a shared 2-core box
(docs/results/nested-run.md), so it runs only with CELLBED_NESTED=1:

    CELLBED_NESTED=1 ./cellbed.sh test -m nested tests/integration/test_nested.py

The tests run in file order; the second removes what the first built (and so does the module's
finaliser, should the first fail half-way)."""
import json
import os
import re
import subprocess
import sys
import time

import pytest
import yaml

from tests.integration.conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.nested,
    pytest.mark.skipif(os.environ.get("CELLBED_NESTED") != "1",
                       reason="set CELLBED_NESTED=1 to run nested.yml for real (2 L1 guests, about 35 min on 2 cores)"),
]

ANSIBLE_DIR = os.path.join(REPO, "ansible")
BIN = os.path.dirname(sys.executable)
PLAYBOOK = os.path.join(BIN, "ansible-playbook")
L0_INVENTORY = "inventories/nested-l0/hosts.yml"
L1_INVENTORY = os.path.join(ANSIBLE_DIR, "inventories", "nested", "hosts.yml")
# The nested role's defaults (roles/nested/defaults/main.yml) that name what it creates.
NESTED_DIR = "/var/lib/cellbed/nested"
BRIDGE = "cbnest0"
L1S = [("l1-1", "cbnestt1"), ("l1-2", "cbnestt2")]
TIMEOUT_S = 3 * 3600
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(out: str) -> dict[str, dict[str, int]]:
    return {m[1]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()[1:])))
            for m in RECAP.finditer(out)}


def play(tmp: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """Runs nested.yml; its output goes, each line stamped with the UTC time, to
    TMP/nested-<unix time>.log while it runs (to follow it, and for the time of each phase)."""
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_LOCAL_TEMP": os.path.join(tmp, "local"),
           "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    argv = [PLAYBOOK, "-i", L0_INVENTORY, "nested.yml", "-e", "nested_l1_count=2", *args]
    log = os.path.join(tmp, f"nested-{int(time.time())}.log")
    print(f"\n{' '.join(argv)}: log in {log}")
    t0 = time.monotonic()
    out = []
    with subprocess.Popen(argv, cwd=ANSIBLE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as p, open(log, "w") as f:
        for line in p.stdout:
            out.append(line)
            f.write(time.strftime("%H:%M:%S ", time.gmtime()) + line)
            f.flush()
            if time.monotonic() - t0 > TIMEOUT_S:
                p.kill()
                break
        rc = p.wait()
    return subprocess.CompletedProcess(argv, rc, "".join(out), ""), time.monotonic() - t0


def l1_qemu_pids() -> list[int]:
    """QEMU processes of the L1 guests (their command line carries -name l1-N)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"qemu-system-x86_64") and any(
                argv[i] == b"-name" and argv[i + 1].decode() in dict(L1S) for i in range(len(argv) - 1)):
            pids.append(int(pid))
    return pids


def links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout


def absent(tmp: str) -> subprocess.CompletedProcess:
    return play(tmp, "-e", "nested_state=absent")[0]


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("nested.yml needs root on L0")
    tmp = str(tmp_path_factory.mktemp("nested"))
    report = os.path.join(tmp, "migration.json")
    state = {"tmp": tmp, "report": report, "torn_down": False}
    r, wall = play(tmp, "-e", f"cellbed_verify_report={report}")
    state.update(run=r, wall_s=wall)
    try:
        yield state
    finally:
        if not state["torn_down"]:
            absent(tmp)


def test_nested_yml_builds_two_l1_hosts_provisions_them_and_migrates_an_l2_guest(nested):
    r = nested["run"]
    print(f"nested.yml wall time: {nested['wall_s'] / 60:.1f} min")
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    rc = recap(r.stdout)
    assert {"localhost", "l1-1", "l1-2"} <= set(rc), rc
    assert all(v["failed"] == 0 and v["unreachable"] == 0 for v in rc.values()), rc

    with open(L1_INVENTORY) as f:
        inv = yaml.safe_load(f)
    hosts = inv["all"]["children"]["cellbed_nodes"]["hosts"]
    assert sorted(hosts) == ["l1-1", "l1-2"], hosts
    assert len({h["ansible_host"] for h in hosts.values()}) == 2

    for line in re.findall(r"\S+ \(\S+\) runs under \w+ on \S+; it [^\"\n]*", r.stdout):
        print(line)
    with open(nested["report"]) as f:
        out = json.load(f)
    rec = out["record"]
    print(json.dumps(out, indent=1))
    assert rec["outcome"] == "MIGRATION_OUTCOME_SUCCEEDED", rec
    assert {rec["src"], rec["dst"]} == {"l1-1", "l1-2"}
    assert int(rec["heartbeat_after"]) > int(rec["heartbeat_before"]), rec
    assert int(rec["integrity_pages"]) > 0 and int(rec["integrity_bad"]) == 0, rec


def test_nested_state_absent_removes_what_the_role_created(nested):
    r = absent(nested["tmp"])
    nested["torn_down"] = True
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert l1_qemu_pids() == []
    names = {line.split(": ")[1].split("@")[0] for line in links().splitlines()}
    assert not names & ({BRIDGE} | {tap for _, tap in L1S}), names
    assert not os.path.exists(L1_INVENTORY)
    for name, _ in L1S:
        for path in (f"{NESTED_DIR}/{name}.qcow2", f"{NESTED_DIR}/{name}.console.log",
                     f"/etc/cellbed/supervisor.d/cellbed-{name}.conf",
                     f"/etc/systemd/system/cellbed-{name}.service"):
            assert not os.path.exists(path), path
    assert not os.path.exists(f"{NESTED_DIR}/known_hosts")
    # Only the cache the role keeps on purpose (nested_keep_cache) may stay.
    left = set(os.listdir(NESTED_DIR)) if os.path.isdir(NESTED_DIR) else set()
    assert left <= {"rootfs", "base.img", "id_ed25519", "id_ed25519.pub"}, left
    assert not os.path.exists(f"{NESTED_DIR}/rootfs.partial")
