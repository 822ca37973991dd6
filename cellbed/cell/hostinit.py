"""Runs inside one emulated host: `ip netns exec NS unshare --mount --uts --propagation
private --fork -- python -m cellbed.cell.hostinit HOSTDIR`.

It gives the host a private /run and private libvirt folders, its own hostname, passwd
with the libvirt-qemu user and the cell's hosts file; then starts libvirtd (inside the
host's cgroup, so every QEMU it spawns is capped by the host's capacity) and the node
daemon, supervises the daemon, and on SIGTERM stops both after destroying the domains.
It records every PID it starts in HOSTDIR/pids.json.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from cellbed.cell.procs import proc_identity
from cellbed.cell.ssh import run_bare, start_sshd
from cellbed.cell.ssh import mount_private


def _bind(src: str, dst: str) -> None:
    subprocess.run(["mount", "--bind", src, dst], check=True)


def setup_mounts(hd: dict) -> None:
    root = hd["dir"]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run"], check=True)
    if hd.get("overlays"):   # a bare host, provisioned over SSH (cellbed/cell/ssh.py)
        mount_private(hd["overlays"], hd.get("keep_shared", []))
    for sub, target in (("etc-libvirt", "/etc/libvirt"), ("var-lib-libvirt", "/var/lib/libvirt"),
                        ("var-log-libvirt", "/var/log/libvirt"), ("var-cache-libvirt", "/var/cache/libvirt")):
        os.makedirs(target, exist_ok=True)
        _bind(os.path.join(root, sub), target)
    _bind(os.path.join(root, "passwd"), "/etc/passwd")
    _bind(os.path.join(root, "group"), "/etc/group")
    _bind(hd["hosts_file"], "/etc/hosts")
    socket.sethostname(hd["name"])


def wait_socket(path: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise SystemExit(f"libvirtd exited with {proc.returncode} before creating {path}")
        if time.monotonic() > deadline:
            raise SystemExit(f"libvirtd did not create {path} within {timeout_s} s")
        time.sleep(0.05)


def main() -> None:
    hostdir = sys.argv[1]
    with open(os.path.join(hostdir, "host.json")) as f:
        hd = json.load(f)
    setup_mounts(hd)
    logs = os.path.join(hostdir, "logs")
    os.makedirs(logs, exist_ok=True)
    cg = hd.get("cgroup_procs", [])

    def join_cgroup() -> None:  # runs in the child before exec
        for p in cg:
            with open(p, "w") as f:
                f.write(str(os.getpid()))

    pids: dict = {"hostinit": proc_identity(os.getpid())}

    def save() -> None:
        tmp = os.path.join(hostdir, "pids.json.tmp")
        with open(tmp, "w") as f:
            json.dump(pids, f)
        os.replace(tmp, os.path.join(hostdir, "pids.json"))

    sshd: subprocess.Popen | None = None
    if hd.get("sshd"):   # cellctl cell up --ssh: an sshd on this host's address, in its cgroup
        sshd = start_sshd(hd, os.path.join(logs, "sshd.log"), preexec_fn=join_cgroup)
        pids["sshd"] = proc_identity(sshd.pid)
        save()
        if hd.get("bare"):   # no libvirtd, no node daemon: a playbook provisions them through sshd
            run_bare(sshd)
            return

    libvirtd = subprocess.Popen(["libvirtd", "--listen", "-f", "/etc/libvirt/libvirtd.conf"],
                                stdout=open(os.path.join(logs, "libvirtd.log"), "ab"), stderr=subprocess.STDOUT,
                                preexec_fn=join_cgroup)
    pids["libvirtd"] = proc_identity(libvirtd.pid)
    save()
    wait_socket("/run/libvirt/libvirt-sock", libvirtd, 60)

    stopping = False
    daemon: subprocess.Popen | None = None

    def on_term(_sig, _frm) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    restarts = 0
    while not stopping:
        if daemon is None or daemon.poll() is not None:
            if daemon is not None:
                restarts += 1
                print(f"node daemon exited with {daemon.returncode}; restart #{restarts}", flush=True)
                time.sleep(min(5.0, 0.5 * restarts))  # restart backoff of a supervisor
            daemon = subprocess.Popen([sys.executable, "-m", "cellbed.daemon.main", "--config",
                                       os.path.join(hostdir, "node.toml")],
                                      stdout=open(os.path.join(logs, "node.log"), "ab"), stderr=subprocess.STDOUT)
            pids["node"] = proc_identity(daemon.pid)
            save()
        try:
            daemon.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    # Orderly stop: daemon, then the domains, then libvirtd.
    if daemon is not None and daemon.poll() is None:
        daemon.terminate()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
    virsh = shutil.which("virsh")
    if virsh and libvirtd.poll() is None:
        names = subprocess.run([virsh, "-c", "qemu:///system", "list", "--all", "--name"],
                               capture_output=True, text=True, timeout=30).stdout.split()
        for n in names:
            subprocess.run([virsh, "-c", "qemu:///system", "destroy", n], capture_output=True, timeout=30)
            subprocess.run([virsh, "-c", "qemu:///system", "undefine", n], capture_output=True, timeout=30)
    libvirtd.terminate()
    try:
        libvirtd.wait(timeout=15)
    except subprocess.TimeoutExpired:
        libvirtd.kill()
    if sshd is not None:
        sshd.terminate()
        sshd.wait(timeout=10)


if __name__ == "__main__":
    main()
