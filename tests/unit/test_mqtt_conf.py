"""The cell's mosquitto configuration (issue 13): TLS with client certificates as identities, no
anonymous access, and an ACL in which every identity publishes only its own topics."""
from __future__ import annotations

from cellbed.cell.mqtt_conf import acl_text, mosquitto_conf
from cellbed.runtime.pki import TlsFiles


def acl_rules(text: str) -> dict[str, list[str]]:
    rules, user = {}, None
    for line in text.splitlines():
        if line.startswith("user "):
            user = line.split()[1]
            rules[user] = []
        elif line.startswith("topic "):
            rules[user].append(line[len("topic "):])
    return rules


def test_acl_each_identity_publishes_only_its_own_topics():
    r = acl_rules(acl_text("c1", ["h1", "h2"], ["ba1"], ["gm1"], {"lm1a": "lm1", "lm1b": "lm1"}))
    assert r["h1"] == ["write cellbed/c1/node/h1/#", "write cellbed/c1/masb/report/h1"]
    assert r["h2"] == ["write cellbed/c1/node/h2/#", "write cellbed/c1/masb/report/h2"]
    assert r["ba1"] == ["read cellbed/c1/masb/report/+"]
    assert r["gm1"] == ["read cellbed/c1/megha/lm/+/state"]
    assert r["lm1a"] == r["lm1b"] == ["write cellbed/c1/megha/lm/lm1/state"]
    assert r["admin"] == ["read cellbed/c1/#"]
    assert not any("write" in x for x in r["admin"] + r["ba1"] + r["gm1"])


def test_tls_listener_requires_certificates_and_no_anonymous():
    conf = mosquitto_conf("10.231.0.1", TlsFiles("/p/ca.crt", "/p/s.crt", "/p/s.key"), "/p/acl")
    lines = set(conf.splitlines())
    assert {"listener 8883 10.231.0.1", "require_certificate true", "use_identity_as_username true",
            "allow_anonymous false", "acl_file /p/acl", "cafile /p/ca.crt"} <= lines
    assert not any(x.startswith("listener 1883") for x in lines)


def test_insecure_is_explicit_and_says_so():
    conf = mosquitto_conf("10.231.0.1", None, "/p/acl")
    assert conf.startswith("# INSECURE") and "listener 1883 10.231.0.1" in conf and "allow_anonymous true" in conf
