"""SSH access to the namespace hosts of a single-box cell, so that Ansible provisions them
exactly as it provisions lab servers (DESIGN §15, issue 6).

`cellctl cell up --ssh` gives every namespace host an sshd listening on that host's own
address (port 22), with a host key per host and one client keypair per cell, all under the
cell's state folder (`<state>/ssh/`). `--bare` additionally leaves libvirtd, the node daemon
and the cell's mosquitto out: the host is a machine with an address, a shell and Debian's
software, and a playbook installs the rest.

A bare host shares the box's /usr (the software) but owns its configuration and state: on top
of hostinit's private /run and libvirt folders it gets an overlay on /etc, /opt and /var whose
upper layer lives in its private /run. What a playbook writes there is private to the host,
disappears with it, and can be inspected (`/run/cellbed-host/<dir>/upper`) to prove that a
teardown left nothing behind. Package state (/var/lib/dpkg, apt's lists and caches) stays the
box's, so that dpkg's view matches the shared /usr, and so does the cell's own state folder.

Every process the host starts (sshd, and whatever Ansible starts through it) lives in the
host's cgroup, which `cellctl cell down` empties and removes: nothing is found by name.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time

SSH_PORT = 22
SSHD = "/usr/sbin/sshd"
OVERLAY_SCRATCH = "/run/cellbed-host"
# Private overlays of a bare host: the box's folder below, the host's writes above.
PRIVATE_OVERLAYS = ("/etc", "/opt", "/var")
# Folders below those overlays that stay the box's own (bind-mounted back through the overlay).
SHARED_STATE = ("/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/var/cache/debconf", "/var/lib/ucf")


# --- pure parts ---------------------------------------------------------------------------
def ssh_dir(sdir: str) -> str:
    return os.path.join(sdir, "ssh")


def overlay_dirs(target: str, scratch: str = OVERLAY_SCRATCH) -> tuple[str, str]:
    """(upperdir, workdir) of the private overlay on *target*."""
    name = target.strip("/").replace("/", "-") or "root"
    return os.path.join(scratch, name, "upper"), os.path.join(scratch, name, "work")


def under(path: str, top: str) -> bool:
    path, top = os.path.normpath(path), os.path.normpath(top)
    return path == top or path.startswith(top.rstrip("/") + "/")


def shared_under_overlays(paths: list[str], overlays: tuple[str, ...] = PRIVATE_OVERLAYS) -> list[str]:
    """The folders of *paths* that an overlay would hide, parents first, without duplicates."""
    out = []
    for p in sorted(dict.fromkeys(os.path.normpath(p) for p in paths)):
        if any(under(p, o) for o in overlays) and not any(under(p, q) for q in out):
            out.append(p)
    return out


def sshd_config(address: str, host_key: str, authorized_keys: str, port: int = SSH_PORT) -> str:
    return f"""# Written by cellctl cell up --ssh: root by key only, on this host's own address.
Port {port}
ListenAddress {address}
HostKey {host_key}
PidFile /run/sshd.pid
AuthorizedKeysFile {authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The keys live in the cell's state folder, whose parents (e.g. /tmp) are not root-only.
StrictModes no
X11Forwarding no
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
"""


def client_config(hosts: dict, key: str, known_hosts: str) -> str:
    """An ssh_config for `ssh -F <state>/ssh/config h1`."""
    out = ["# Written by cellctl cell up --ssh"]
    for name, h in hosts.items():
        out += [f"Host {name}", f"  HostName {h['address']}", f"  Port {h.get('ssh_port', SSH_PORT)}",
                "  User root", f"  IdentityFile {key}", "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {known_hosts}", "  StrictHostKeyChecking yes"]
    return "\n".join(out) + "\n"


def known_hosts_line(name: str, address: str, pubkey: str, port: int = SSH_PORT) -> str:
    keytype, blob = pubkey.split()[:2]
    addr = address if port == 22 else f"[{address}]:{port}"
    return f"{name},{addr} {keytype} {blob}\n"


def inventory(state: dict, *, node_group: str = "cellbed_nodes", mqtt_host: str | None = None) -> dict:
    """An Ansible inventory (as a dict, to dump as YAML or JSON) for a cell brought up with --ssh.

    Every host is in *node_group*; the first host also runs mosquitto (group cellbed_mqtt)
    unless *mqtt_host* names another. Broker and controller groups are empty.
    """
    ssh = state.get("ssh")
    if not ssh:
        raise ValueError(f"cell {state['name']!r} was not brought up with --ssh")
    names = list(state["hosts"])
    mqtt = mqtt_host or names[0]
    if mqtt not in names:
        raise ValueError(f"mqtt host {mqtt!r} is not in cell {state['name']}: {', '.join(names)}")
    common_args = (f"-o UserKnownHostsFile={ssh['known_hosts']} -o StrictHostKeyChecking=yes "
                   f"-o IdentitiesOnly=yes")
    cgroups = {r["rel"].rsplit("/", 1)[-1]: r["rel"] for r in state.get("resources", []) if r["kind"] == "cgroup"}
    hosts = {}
    for n, h in state["hosts"].items():
        hosts[n] = {"ansible_host": h["address"], "ansible_port": h.get("ssh_port", SSH_PORT),
                    "cellbed_node_address": h["address"], "cellbed_node_cpu_cores": h["cpu_cores"],
                    "cellbed_node_mem_mib": h["mem_mib"], "cellbed_node_cgroup": cgroups.get(n, "")}
    return {"all": {
        "vars": {"ansible_user": "root", "ansible_ssh_private_key_file": ssh["key"],
                 "ansible_ssh_common_args": common_args, "cellbed_cell_name": state["name"],
                 "cellbed_cell_subnet": state["subnet"]},
        "children": {
            node_group: {"hosts": hosts},
            "cellbed_mqtt": {"hosts": {mqtt: {}}},
            "cellbed_brokers": {"hosts": {}},
            "cellbed_controllers": {"hosts": {}},
        }}}


def inventory_yaml(inv: dict) -> str:
    """YAML for *inv* (nested dicts of strings and numbers); strings are JSON-quoted, which YAML reads."""
    def emit(d: dict, indent: int) -> list[str]:
        out = []
        for k, v in d.items():
            pad = "  " * indent
            if isinstance(v, dict):
                out += [f"{pad}{k}:" + (" {}" if not v else "")] + (emit(v, indent + 1) if v else [])
            elif isinstance(v, bool):
                out.append(f"{pad}{k}: {'true' if v else 'false'}")
            elif isinstance(v, (int, float)):
                out.append(f"{pad}{k}: {v!r}")
            else:
                out.append(f"{pad}{k}: {json.dumps(str(v))}")
        return out
    return "# Written by cellctl cell inventory\n---\n" + "\n".join(emit(inv, 0)) + "\n"


# --- the cell side (root namespace) --------------------------------------------------------
def _keygen(path: str, comment: str) -> str:
    if not os.path.exists(path):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path],
                       check=True, capture_output=True)
    with open(path + ".pub") as f:
        return f.read().strip()


def preflight() -> list[str]:
    return [t for t in (SSHD, "ssh-keygen", "ssh") if not shutil.which(t)]


def make_cell_keys(sdir: str, cell: str) -> dict:
    """The cell's client keypair and an authorized_keys with it; returns the paths."""
    d = ssh_dir(sdir)
    os.makedirs(d, mode=0o700, exist_ok=True)
    key = os.path.join(d, "id_ed25519")
    pub = _keygen(key, f"cellbed-{cell}")
    with open(os.path.join(d, "authorized_keys"), "w") as f:
        f.write(pub + "\n")
    os.chmod(os.path.join(d, "authorized_keys"), 0o600)
    return {"dir": d, "key": key, "authorized_keys": os.path.join(d, "authorized_keys"),
            "known_hosts": os.path.join(d, "known_hosts"), "config": os.path.join(d, "config")}


def prepare_host(sdir: str, hdir: str, name: str, address: str, bare: bool) -> dict:
    """The host's key and sshd_config; for a bare host, a fresh install's /etc/libvirt.

    Returns the keys to merge into the host's host.json (read by hostinit)."""
    keys = ssh_dir(sdir)
    hk = os.path.join(hdir, "ssh", "ssh_host_ed25519_key")
    os.makedirs(os.path.dirname(hk), mode=0o700, exist_ok=True)
    pub = _keygen(hk, f"{name}@cellbed")
    conf = os.path.join(hdir, "ssh", "sshd_config")
    with open(conf, "w") as f:
        f.write(sshd_config(address, hk, os.path.join(keys, "authorized_keys")))
    with open(os.path.join(keys, "known_hosts"), "a") as f:
        f.write(known_hosts_line(name, address, pub))
    extra = {"sshd": [SSHD, "-D", "-e", "-f", conf]}
    if bare:
        # The host gets libvirt's packaged defaults, not the cell's config: the playbook writes its own.
        etc = os.path.join(hdir, "etc-libvirt")
        shutil.rmtree(etc)
        shutil.copytree("/etc/libvirt", etc, symlinks=True)
        extra.update(bare=True, overlays=list(PRIVATE_OVERLAYS),
                     keep_shared=shared_under_overlays([*SHARED_STATE, sdir]))
    return extra


def write_client_files(info: dict, hosts: dict) -> None:
    with open(info["config"], "w") as f:
        f.write(client_config(hosts, info["key"], info["known_hosts"]))


def wait_sshd(addresses: list[str], timeout_s: float, port: int = SSH_PORT) -> list[str]:
    """Wait until every address accepts TCP on *port*; return those that never did."""
    pending = list(addresses)
    deadline = time.monotonic() + timeout_s
    while pending:
        for a in list(pending):
            try:
                with socket.create_connection((a, port), timeout=1):
                    pending.remove(a)
            except OSError:
                pass
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # polling interval while sshd starts
    return pending


# --- the host side (inside the host's namespaces, called by hostinit) -----------------------
def mount_private(overlays: list[str], keep_shared: list[str], scratch: str = OVERLAY_SCRATCH) -> None:
    """Overlay each folder of *overlays* with a private upper layer in *scratch* (which must be
    on the host's private tmpfs), then bind the folders of *keep_shared* back to the box's own."""
    fds = {}
    for p in keep_shared:
        if os.path.exists(p):
            fds[p] = os.open(p, os.O_PATH)   # the box's folder, before an overlay hides it
    try:
        for target in overlays:
            upper, work = overlay_dirs(target, scratch)
            os.makedirs(upper, exist_ok=True)
            os.makedirs(work, exist_ok=True)
            subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                            f"lowerdir={target},upperdir={upper},workdir={work}", target], check=True)
        for p, fd in fds.items():
            subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{fd}", p], check=True, pass_fds=(fd,))
    finally:
        for fd in fds.values():
            os.close(fd)


def start_sshd(hd: dict, log_path: str, preexec_fn=None) -> subprocess.Popen:
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privilege separation folder
    return subprocess.Popen(hd["sshd"], stdout=open(log_path, "ab"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)


def run_bare(sshd: subprocess.Popen) -> None:
    """A bare host's init: wait for SIGTERM (from `cell down`), then stop sshd. What a playbook
    started is in the host's cgroup; teardown.yml stops it, or `cell down` empties the cgroup."""
    sigs = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    signal.sigwait(sigs)
    sshd.terminate()
    try:
        sshd.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sshd.kill()
