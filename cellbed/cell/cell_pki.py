"""The certificates of a single-box cell, made by `cellctl cell up` (issue 13): the cell's CA and
one certificate per host (node), agent (broker, GM, LM instance), the admin CLI, and the cell's
MQTT server. Everything lives in ``<state>/<cell>/pki`` (folder 0700, keys 0600), which the cell
records before it is made, so `cell down` removes it with the rest.

The cell state keeps the paths: ``state["pki"] = {"dir", "ca", "certs": {"<role>/<name>": {...}}}``,
and ``state["insecure"]`` says whether the cell chose plaintext instead.
"""
from __future__ import annotations

import os
import time

from cellbed.domain.identity import Identity, Role
from cellbed.runtime.authz import Security
from cellbed.runtime.client import NodeClient
from cellbed.runtime.pki import CellCA, TlsFiles

MQTT_SERVER = "mqtt"
PROMETHEUS = "prometheus"     # the scraper's certificate: of the cell's CA, but no Cellbed identity


def key(role: Role, name: str) -> str:
    return f"{role.value}/{name}"


def issue(sdir: str, cell: str, *, hosts: dict[str, str], bridge_address: str, brokers: list[str] = (),
          gms: list[str] = (), lm_instances: list[str] = (), days: int = 30) -> dict:
    """Create the CA and every certificate the cell needs; returns the ``state["pki"]`` entry
    (with the seconds it took, for the `cell up` benchmark)."""
    t0 = time.monotonic()
    folder = os.path.join(sdir, "pki")
    ca = CellCA.create(folder, cell, days=days)
    certs: dict[str, dict] = {}

    def one(role: Role, name: str, addresses: list[str]) -> None:
        certs[key(role, name)] = vars(ca.issue(Identity(cell, role, name), addresses, days=days))
    for h, addr in hosts.items():
        one(Role.NODE, h, [addr])
    for b in brokers:
        one(Role.BROKER, b, [bridge_address])
    for g in gms:
        one(Role.GM, g, [bridge_address])
    for i in lm_instances:
        one(Role.LM, i, [bridge_address])
    one(Role.ADMIN, "admin", ["127.0.0.1"])
    certs[MQTT_SERVER] = vars(ca.issue_server(MQTT_SERVER, [bridge_address], days=days))
    certs[PROMETHEUS] = vars(ca.issue_server(PROMETHEUS, ["127.0.0.1"], days=days))
    return {"dir": folder, "ca": ca.cert_file, "certs": certs, "days": days,
            "seconds": round(time.monotonic() - t0, 3)}


def files(state: dict, role: Role | str, name: str = "") -> TlsFiles | None:
    """The TLS files of one identity of the cell (None: an insecure cell)."""
    if state.get("insecure") or "pki" not in state:
        return None
    k = role if isinstance(role, str) and not name else key(Role(role), name)
    c = state["pki"]["certs"][k]
    return TlsFiles(c["ca"], c["cert"], c["key"])


def security(state: dict, role: Role, name: str) -> Security:
    """An identity's Security in the cell: mTLS with its certificate, or plaintext for an
    insecure cell (and for a cell recorded before certificates existed)."""
    f, cell = files(state, role, name), state.get("name", "")
    return Security.insecure(cell) if f is None else Security.mtls(cell, f)


def config_lines(f: TlsFiles | None) -> dict:
    """The TLS keys of an agent's TOML config."""
    if f is None:
        return {"insecure": True}
    return {"tls_ca": f.ca, "tls_cert": f.cert, "tls_key": f.key}


def admin(state: dict) -> Security:
    """The operator's identity in a cell (cellctl, the experiment runner, tests)."""
    return security(state, Role.ADMIN, "admin")


def node_client(state: dict, host: str) -> NodeClient:
    """A NodeAgent client for *host* of the cell, as its admin."""
    h = state["hosts"][host]
    return NodeClient(f"{h['address']}:{h['grpc_port']}", host, admin(state))
