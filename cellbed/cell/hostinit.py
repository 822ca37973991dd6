"""Runs inside one emulated host: `ip netns exec NS unshare --mount --uts --propagation
private --fork -- python -m cellbed.cell.hostinit HOSTDIR`.

It gives the host a private /run and private libvirt folders, its own hostname, passwd
with the libvirt-qemu user and the cell's hosts file; then starts libvirtd (inside the
host's cgroup, so every QEMU it spawns is capped by the host's capacity) and the node
daemon, supervises the daemon, and on SIGTERM stops both after destroying the domains.
It records every PID it starts in HOSTDIR/pids.json.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from cellbed.cell.procs import proc_identity
from cellbed.cell.ssh import mount_private, run_bare, start_sshd


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


class _Host:
    """The host's folder, the cgroups its processes join and the PIDs recorded in pids.json."""

    def __init__(self, hostdir: str, hd: dict) -> None:
        self.dir, self.cg = hostdir, hd.get("cgroup_procs", [])
        self.logs = os.path.join(hostdir, "logs")
        self.pids: dict = {"hostinit": proc_identity(os.getpid())}

    def join_cgroup(self) -> None:  # runs in the child before exec
        for p in self.cg:
            with open(p, "w") as f:
                f.write(str(os.getpid()))

    def record(self, key: str, proc: subprocess.Popen) -> None:
        self.pids[key] = proc_identity(proc.pid)
        tmp = os.path.join(self.dir, "pids.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.pids, f)
        os.replace(tmp, os.path.join(self.dir, "pids.json"))


def start_libvirtd(host: _Host) -> subprocess.Popen:
    libvirtd = subprocess.Popen(["libvirtd", "--listen", "-f", "/etc/libvirt/libvirtd.conf"],
                                stdout=open(os.path.join(host.logs, "libvirtd.log"), "ab"), stderr=subprocess.STDOUT,
                                preexec_fn=host.join_cgroup)
    host.record("libvirtd", libvirtd)
    return libvirtd


def supervise(host: _Host, libvirtd: subprocess.Popen) -> tuple[subprocess.Popen | None, subprocess.Popen]:
    """Run the node daemon, restarting it (and libvirtd) when it exits, until SIGTERM or SIGINT.
    A restarted libvirtd finds its running QEMUs again (their state is under /run/libvirt)."""
    stopping = False
    daemon: subprocess.Popen | None = None

    def on_term(_sig, _frm) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    restarts = 0
    while not stopping:
        if libvirtd.poll() is not None:
            print(f"libvirtd exited with {libvirtd.returncode}; restarting it", flush=True)
            with contextlib.suppress(FileNotFoundError):   # a stale socket would look ready at once
                os.unlink("/run/libvirt/libvirt-sock")
            libvirtd = start_libvirtd(host)
            try:
                wait_socket("/run/libvirt/libvirt-sock", libvirtd, 60)
            except SystemExit as e:
                print(e, flush=True)
        if daemon is None or daemon.poll() is not None:
            if daemon is not None:
                restarts += 1
                print(f"node daemon exited with {daemon.returncode}; restart #{restarts}", flush=True)
                time.sleep(min(5.0, 0.5 * restarts))  # restart backoff of a supervisor
            daemon = subprocess.Popen([sys.executable, "-m", "cellbed.daemon.main", "--config",
                                       os.path.join(host.dir, "node.toml")],
                                      stdout=open(os.path.join(host.logs, "node.log"), "ab"), stderr=subprocess.STDOUT)
            host.record("node", daemon)
        try:
            daemon.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    return daemon, libvirtd


def stop_all(daemon: subprocess.Popen | None, libvirtd: subprocess.Popen, sshd: subprocess.Popen | None) -> None:
    """Orderly stop: daemon, then the domains, then libvirtd (and sshd)."""
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


def main() -> None:
    hostdir = sys.argv[1]
    with open(os.path.join(hostdir, "host.json")) as f:
        hd = json.load(f)
    setup_mounts(hd)
    host = _Host(hostdir, hd)
    os.makedirs(host.logs, exist_ok=True)
    sshd: subprocess.Popen | None = None
    if hd.get("sshd"):   # cellctl cell up --ssh: an sshd on this host's address, in its cgroup
        sshd = start_sshd(hd, os.path.join(host.logs, "sshd.log"), preexec_fn=host.join_cgroup)
        host.record("sshd", sshd)
        if hd.get("bare"):   # no libvirtd, no node daemon: a playbook provisions them through sshd
            run_bare(sshd)
            return
    libvirtd = start_libvirtd(host)
    wait_socket("/run/libvirt/libvirt-sock", libvirtd, 60)
    daemon, libvirtd = supervise(host, libvirtd)
    stop_all(daemon, libvirtd, sshd)


if __name__ == "__main__":
    main()
