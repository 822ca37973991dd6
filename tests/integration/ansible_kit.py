"""What the Ansible integration test drives: ansible-playbook against a bare SSH cell (`cellctl cell
up --ssh --bare`), with its recap parsed, its timings kept, and the hosts' private overlays read."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from cellbed.runtime.authz import Security
from cellbed.runtime.pki import TlsFiles
from tests.integration.conftest import REPO

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
        return Security.mtls(self.st["name"], TlsFiles(*(os.path.join(self.pki, f) for f in
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


