"""The run view's replay of hosts and VMs at a time t (cellbed/ui/replay.py), and where `cellctl ui`
may listen (cellbed/ui/listen.py)."""
from __future__ import annotations

import numpy as np
import pytest

from cellbed.domain import errors
from cellbed.ui import listen, replay


def cols(**kw):
    return {k: np.array(v, dtype=object if isinstance(v[0], str) else np.float64) for k, v in kw.items()}


def test_a_model_run_is_replayed_from_placements_and_completed_migrations():
    alloc = cols(task=["t1", "t2", "t3", "t4"], host=["n0", "n1", "n0", ""], start_s=[0.0, 5.0, 10.0, np.nan],
                 outcome=["placed", "placed", "placed", "pending"])
    mig = cols(t_s=[20.0, 30.0], vm=["t1", "t2"], src=["n0", "n1"], dst=["n1", "n0"], outcome=["succeeded", "refused"],
               time_ms=[1000.0, np.nan])
    r = replay.from_model(alloc, mig, nodes=3)
    assert r.hosts == ["n0", "n1", "n2"] and not r.exact and "upper bound" in r.note
    assert r.counts_at(-1).tolist() == [0, 0, 0]
    assert r.counts_at(0).tolist() == [1, 0, 0]
    assert r.counts_at(10).tolist() == [2, 1, 0]
    assert r.counts_at(20.5).tolist() == [2, 1, 0]           # the move is done at t_s + time_ms
    assert r.counts_at(21).tolist() == [1, 2, 0]
    assert r.counts_at(40).tolist() == [1, 2, 0]             # a refused migration moves nothing
    assert r.vms_on("n0", 20) == ["t1", "t3"]
    assert r.vms_on("n1", 21) == ["t1", "t2"]
    assert r.vms_on("n2", 21) == [] and r.vms_on("absent", 21) == []


def test_host_names_are_in_natural_order_and_cover_the_whole_model_cell():
    alloc = cols(task=["a", "b"], host=["n10", "n2"], start_s=[0.0, 0.0], outcome=["placed", "placed"])
    mig = {k: np.array([], dtype=object if k in ("vm", "src", "dst", "outcome") else np.float64)
           for k in ("t_s", "vm", "src", "dst", "outcome", "time_ms")}
    r = replay.from_model(alloc, mig, nodes=12)
    assert r.hosts == [f"n{i}" for i in range(12)]
    assert r.counts_at(0)[[2, 10]].tolist() == [1, 1] and r.counts_at(0).sum() == 2


def test_a_real_run_is_replayed_exactly_from_its_vm_samples(tmp_path):
    p = tmp_path / "vms.csv"
    p.write_text("t_s,host,vm,state\n60,h1,a,running\n60,h2,b,running\n120,h2,a,running\n120,h2,b,running\n")
    r = replay.from_vms_csv(p)
    assert r.hosts == ["h1", "h2"] and r.exact
    assert r.counts_at(30).tolist() == [0, 0]
    assert r.counts_at(90).tolist() == [1, 1]                # the sample at 60
    assert r.counts_at(120).tolist() == [0, 2]
    assert r.vms_on("h2", 130) == ["a", "b"] and r.vms_on("h1", 61) == ["a"] and r.vms_on("h1", 120) == []


@pytest.mark.parametrize("text,host,port,loop", [
    ("127.0.0.1", "127.0.0.1", listen.DEFAULT_PORT, True), ("127.0.0.1:0", "127.0.0.1", 0, True),
    ("localhost:9000", "localhost", 9000, True), ("[::1]:8000", "::1", 8000, True),
    ("0.0.0.0:8443", "0.0.0.0", 8443, False), ("10.231.60.1:1", "10.231.60.1", 1, False)])
def test_listen_addresses(text, host, port, loop):
    w = listen.parse_listen(text)
    assert (w.host, w.port, w.loopback) == (host, port, loop)


@pytest.mark.parametrize("text,why", [("", "HOST:PORT"), (":80", "HOST:PORT"), ("host.example:80", "IP address"),
                                      ("127.0.0.1:http", "0..65535"), ("127.0.0.1:70000", "0..65535")])
def test_bad_listen_addresses_are_refused_naming_the_flag(text, why):
    with pytest.raises(errors.InvalidArgument, match=why) as e:
        listen.parse_listen(text)
    assert str(e.value).startswith("--listen")


def test_plaintext_is_allowed_on_loopback_only():
    assert listen.tls_for(listen.parse_listen("127.0.0.1:0"), "", "", None) is None
    for where, state in (("0.0.0.0:1", None), ("10.231.60.1:1", None), ("10.231.60.1:1", {"insecure": True}),
                         ("0.0.0.0:1", {"pki": {"dir": "/nonexistent"}})):
        with pytest.raises(errors.InvalidArgument, match="plaintext"):
            listen.tls_for(listen.parse_listen(where), "", "", state)
    with pytest.raises(errors.InvalidArgument, match="both or neither"):
        listen.tls_for(listen.parse_listen("127.0.0.1:0"), "cert.pem", "", None)
