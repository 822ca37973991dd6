"""The `ip` command, and the checks a cell makes of the machine's links, namespaces and routes."""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess

from cellbed.domain import errors


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def link_exists(name: str) -> bool:
    return ip("link", "show", "dev", name, check=False).returncode == 0


def netns_exists(name: str) -> bool:
    return os.path.exists(f"/run/netns/{name}")


def check_subnet_free(subnet: str) -> None:
    net = ipaddress.ip_network(subnet)
    out = json.loads(ip("-j", "route", "show", "table", "all").stdout or "[]")
    for r in out:
        dst = r.get("dst", "")
        if dst in ("default", "") or ":" in dst:
            continue
        try:
            other = ipaddress.ip_network(dst if "/" in dst else dst + "/32", strict=False)
        except ValueError:
            continue
        if other.version == 4 and other.overlaps(net):
            raise errors.FailedPrecondition(
                f"subnet {subnet} overlaps the existing route {dst} on {r.get('dev', '?')}: choose another --subnet")
