"""Agents that join a running cell (say, GMs and LMs the user starts with cellbed-controller):
their certificates from the cell's CA, and their identities in the cell's MQTT ACL, which
mosquitto reloads on SIGHUP (sent to the recorded mosquitto only, checked by pid and start time).
"""
from __future__ import annotations

import os
import signal

from cellbed.cell import mqtt_conf, procs
from cellbed.cell.record import Recorder, load_state, state_dir
from cellbed.domain import errors
from cellbed.domain.identity import Identity, Role
from cellbed.runtime.pki import CellCA


def write_acl(sdir: str, cell: str, acl: dict) -> str:
    """The ACL file from the cell state's ``mqtt_acl`` entry (nodes, brokers, gms, lm_of)."""
    path = os.path.join(sdir, "mosquitto.acl")
    with open(path, "w") as f:
        f.write(mqtt_conf.acl_text(cell, acl["nodes"], acl["brokers"], acl["gms"], acl["lm_of"]))
    return path


def add_agents(name: str, root: str, *, gms: list[str] = (), lm_of: dict[str, str] | None = None,
               brokers: list[str] = ()) -> dict:
    """Issue certificates for extra GMs (*gms*), LM instances (*lm_of*: instance -> LM) and
    brokers of cell *name*, add them to its MQTT ACL and reload mosquitto. Returns the state."""
    st = load_state(name, root)
    if st is None:
        raise errors.NotFound(f"no cell {name!r} under {root}")
    if st.get("insecure") or "pki" not in st:
        return st                       # an insecure cell: anonymous MQTT, no certificates
    sdir = state_dir(name, root)
    ca = CellCA.load(st["pki"]["dir"])
    bridge = st["bridge_address"]
    for role, names in ((Role.GM, gms), (Role.LM, list(lm_of or {})), (Role.BROKER, brokers)):
        for n in names:
            f = ca.issue(Identity(name, role, n), [bridge])
            st["pki"]["certs"][f"{role.value}/{n}"] = vars(f)
    acl = st["mqtt_acl"]
    acl["gms"] = sorted({*acl["gms"], *gms})
    acl["brokers"] = sorted({*acl["brokers"], *brokers})
    acl["lm_of"] = {**acl["lm_of"], **(lm_of or {})}
    write_acl(sdir, name, acl)
    Recorder(os.path.join(sdir, "cell.json"), st)
    for res in st["resources"]:
        if res.get("kind") == "process" and res.get("name") == "mosquitto" and "pid" in res and procs.alive(res):
            os.kill(res["pid"], signal.SIGHUP)      # mosquitto re-reads its ACL file
    return st
