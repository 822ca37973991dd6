"""The cell's mosquitto configuration: a TLS listener that takes each client's identity from its
certificate (the CN, which is the identity's name: h1, ba1, gm1, lm1a, admin), no anonymous
access, and an ACL that lets every identity publish only its own topics:

- a node publishes only under ``cellbed/<cell>/node/<its host>/...`` and its own MASB report
  ``cellbed/<cell>/masb/report/<its host>``;
- an LM instance publishes only its LM's state topic ``cellbed/<cell>/megha/lm/<its LM>/state``;
- brokers read the reports, GMs the LM states, the admin reads everything of the cell.

Plaintext (port 1883, anonymous) only with ``insecure``, on an isolated box.
"""
from __future__ import annotations

from cellbed.domain.topics import node_topic, report_topic
from cellbed.runtime.tlsfiles import TlsFiles

MQTT_TLS_PORT = 8883
MQTT_PLAIN_PORT = 1883


def lm_state_topic(cell: str, lm: str) -> str:
    # Same string as controller/megha/lm_wire.state_topic (kept here to stay below the agents' layer).
    return f"cellbed/{cell}/megha/lm/{lm}/state"


def acl_text(cell: str, nodes: list[str], brokers: list[str] = (), gms: list[str] = (),
             lm_instances: dict[str, str] | None = None, admins: list[str] = ("admin",)) -> str:
    """mosquitto acl_file for the cell's identities; *lm_instances* maps instance -> LM name."""
    out = [f"# Written by cellctl cell up for cell {cell}: each identity publishes only its own topics."]
    for h in nodes:
        out += ["", f"user {h}", f"topic write {node_topic(cell, h)}/#", f"topic write {report_topic(cell, h)}"]
    for b in brokers:
        out += ["", f"user {b}", f"topic read {report_topic(cell, '+')}"]
    for g in gms:
        out += ["", f"user {g}", f"topic read {lm_state_topic(cell, '+')}"]
    for inst, lm in (lm_instances or {}).items():
        out += ["", f"user {inst}", f"topic write {lm_state_topic(cell, lm)}"]
    for a in admins:
        out += ["", f"user {a}", f"topic read cellbed/{cell}/#"]
    return "\n".join(out) + "\n"


def mosquitto_conf(address: str, tls: TlsFiles | None, acl_file: str) -> str:
    """The listener on the cell's bridge *address*: TLS with client certificates, or plaintext."""
    # `user root`: mosquitto would otherwise drop to the `mosquitto` user after reading this file,
    # and then could not read its key, certificates and ACL in the cell's 0700 state folders. It
    # runs as the rest of the cell does (root: namespaces), bound to the bridge address only.
    common = "user root\nper_listener_settings false\npersistence false\nlog_dest stderr\n"
    if tls is None:
        return (f"# INSECURE (cell up --insecure): plaintext, anonymous\n{common}"
                f"listener {MQTT_PLAIN_PORT} {address}\nallow_anonymous true\n")
    return (f"{common}listener {MQTT_TLS_PORT} {address}\n"
            f"cafile {tls.ca}\ncertfile {tls.cert}\nkeyfile {tls.key}\n"
            "require_certificate true\nuse_identity_as_username true\ntls_version tlsv1.2\n"
            f"allow_anonymous false\nacl_file {acl_file}\n")
