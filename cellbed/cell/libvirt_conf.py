"""The libvirt configuration of one namespace host: libvirtd.conf and qemu.conf in the host's
private /etc/libvirt (bind-mounted by cellbed/cell/hostinit.py), and the passwd/group copies
libvirtd needs. Written by `cellctl cell up` before the host starts."""
from __future__ import annotations

import os
import uuid


def write_host_files(hdir: str, host: str, address: str) -> None:
    """libvirtd.conf, qemu.conf and the passwd/group copies of one host, under *hdir*."""
    etc = os.path.join(hdir, "etc-libvirt")
    for sub in ("etc-libvirt", "var-lib-libvirt/qemu/channel/cellbed", "var-log-libvirt/qemu",
                "var-cache-libvirt/qemu", "logs"):
        os.makedirs(os.path.join(hdir, sub), exist_ok=True)
    with open(os.path.join(etc, "libvirtd.conf"), "w") as f:
        f.write(f"""# Written by cellctl cell up for host {host}
listen_tls = 0
listen_tcp = 1
listen_addr = "{address}"
tcp_port = "16509"
auth_tcp = "none"
auth_unix_rw = "none"
unix_sock_group = "root"
host_uuid = "{uuid.uuid4()}"
log_outputs = "3:stderr"
""")
    with open(os.path.join(etc, "qemu.conf"), "w") as f:
        f.write(f"""# Written by cellctl cell up for host {host}
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
migration_host = "{address}"
migration_address = "{address}"
migration_port_min = 49152
migration_port_max = 49215
""")
    # libvirtd refuses to start without a libvirt-qemu user: give the host its own copy.
    with open("/etc/passwd") as f:
        passwd = f.read()
    with open("/etc/group") as f:
        group = f.read()
    if "\nlibvirt-qemu:" not in "\n" + passwd:
        passwd += "libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin\n"
    for g, gid in (("kvm", 64054), ("libvirt-qemu", 64055), ("libvirt", 64056)):
        if f"\n{g}:" not in "\n" + group:
            group += f"{g}:x:{gid}:\n"
    for fn, content in (("passwd", passwd), ("group", group)):
        with open(os.path.join(hdir, fn), "w") as f:
            f.write(content)
