"""Brokers' pairwise sync with a digest (issue 16, the 12,500-node profile: a sync compared every
entry of two whole caches, a quarter of the model cell's time). A sync request carries the digest
of its entries' (host, time) set; a responder holding the same set answers in_sync without
examining them. That must be exactly what the full comparison gives: the same reply and the same
caches on both sides. Each divergence below is planted on one side, and must take the full path."""
import os
import random
import subprocess
import sys

import pytest

from cellbed import assembly
from cellbed.broker.cache import NodeCache, entry_digest, host_key
from cellbed.domain import wire
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime.clock import run_virtual
from cellbed.v1 import masb_pb2 as masbpb

HOSTS = [f"h{i:02d}" for i in range(20)]


def report(host: str, t: float, cpu: float = 1.0) -> masbpb.NodeReport:
    return masbpb.NodeReport(host=host, capacity=wire.resources(4.0, 8192), used=wire.resources(cpu, 1024),
                             requested=wire.resources(1.0, 1024), prod_requested=wire.resources(0.5, 512),
                             attributes=wire.attributes_pb({"rack": host[-1]}), sampled_unix_s=t)


def recomputed(cache: NodeCache) -> int:
    return sum(entry_digest(host_key(r.host), r.sampled_unix_s) for r in cache.entries()) % 2 ** 64


def test_the_digest_follows_every_store_and_expiry():
    rng = random.Random(4)
    cache = NodeCache(expiry_s=50.0)
    now = 1000.0
    fewest = len(HOSTS)
    for step in range(3000):
        now += rng.random()
        if rng.random() < 0.05:
            cache.expire(now)
        else:                                    # newer, older and equal times, new and known hosts
            cache.update(report(rng.choice(HOSTS), now - rng.choice([0.0, 5.0, 60.0])))
        assert cache.digest == recomputed(cache), f"step {step}"
        fewest = min(fewest, len(cache)) if step > 100 else fewest
    assert cache.expired > 0 and fewest < len(HOSTS), "the sequence never expired an entry"


def test_the_digest_does_not_depend_on_arrival_order_but_on_every_host_and_time():
    reports = [report(h, 1000.0 + i) for i, h in enumerate(HOSTS)]
    a, b = NodeCache(), NodeCache()
    for r in reports:
        a.update(r)
    for r in reversed(reports):
        b.update(r)
    assert a.digest == b.digest != 0
    c = NodeCache()
    for r in reports[:-1] + [report(HOSTS[-1], 1000.0 + len(HOSTS) - 1 + 1e-6)]:   # one host's time 1 µs later
        c.update(r)
    assert c.digest != a.digest
    assert a.in_sync(a.digest, len(a)) and not a.in_sync(a.digest, len(a) - 1) and not a.in_sync(0, 0)


def test_the_digest_is_the_same_in_another_process():
    """Brokers on lab servers compare digests across processes: no salted hash may enter it."""
    code = ("from cellbed.broker.cache import entry_digest, host_key;"
            "print(entry_digest(host_key('h07'), 1700000000.25))")
    outs = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True).stdout.strip() for seed in ("1", "2")}
    assert outs == {str(entry_digest(host_key("h07"), 1700000000.25))}


def _plant(kind: str, a, b, now: float) -> None:
    """Both brokers got the same reports; then one divergence of *kind*."""
    for i, h in enumerate(HOSTS):
        r = report(h, now - 100 + i)
        a.on_report("t", r)
        b.on_report("t", r)
    if kind == "peer newer":
        a.on_report("t", report("h03", now - 1))
    elif kind == "responder newer":
        b.on_report("t", report("h03", now - 1))
    elif kind == "peer extra host":
        a.on_report("t", report("h99", now - 1))
    elif kind == "responder extra host":
        b.on_report("t", report("h99", now - 1))
    elif kind == "responder expired one":
        b.cache.expire(now + b.cache.expiry_s - 100 + 0.5)       # h00 (sampled at now - 100) only
    elif kind == "same set, other loads":                        # broker-local accounting only
        b.cache.add_load("h05", (0.5, 256.0), (0.5, 256.0), production=True)


def _state(broker) -> tuple:
    c = broker.cache
    n = len(c.hosts)
    return ([(r.host, r.SerializeToString()) for r in c.entries()], c.used[:n].tolist(), c.req[:n].tolist(),
            c.prod[:n].tolist(), c.live[:n].tolist(), {k: v for k, v in broker.counters.items() if "in_sync" not in k})


def _sync(kind: str, with_digest: bool):
    async def main():
        env = assembly.model_env(3)
        await env.clock.sleep(200.0)
        a, _ = assembly.build_broker(env, "ba1", params=BrokerParams(), peers=["ba2"], cell="c")
        b, _ = assembly.build_broker(env, "ba2", params=BrokerParams(), peers=["ba1"], cell="c")
        _plant(kind, a, b, env.clock.now())
        req = masbpb.SyncCacheRequest(broker="ba1", entries=a.cache.entries(),
                                      digest=a.cache.digest if with_digest else 0)
        reply = await env.transport_for("ba1").request("ba2", "BrokerAgent/SyncCache", req)
        for r in reply.entries:
            a.cache.update(r)
        return reply, _state(a), _state(b), dict(b.counters)
    return run_virtual(main())


KINDS = ["equal", "same set, other loads", "peer newer", "responder newer", "peer extra host",
         "responder extra host", "responder expired one"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_in_sync_reply_is_what_the_full_comparison_gives(kind):
    fast, a1, b1, counters = _sync(kind, with_digest=True)
    full, a0, b0, _ = _sync(kind, with_digest=False)
    assert fast.in_sync == (kind in ("equal", "same set, other loads")), "in_sync where the sets differ (or not where equal)"
    assert not full.in_sync
    assert [r.SerializeToString() for r in fast.entries] == [r.SerializeToString() for r in full.entries]
    assert fast.accepted == full.accepted
    assert (a1, b1) == (a0, b0)
    assert counters.get("sync_served_in_sync", 0) == int(fast.in_sync)
    if not fast.in_sync:                         # the divergence was real: the full path moved something
        assert full.entries or full.accepted


def test_sync_with_counts_in_sync_replies_on_both_sides():
    async def main():
        env = assembly.model_env(3)
        await env.clock.sleep(200.0)
        a, _ = assembly.build_broker(env, "ba1", params=BrokerParams(), peers=["ba2"], cell="c")
        b, _ = assembly.build_broker(env, "ba2", params=BrokerParams(), peers=["ba1"], cell="c")
        _plant("equal", a, b, env.clock.now())
        first = await a.sync_with("ba2")
        a.on_report("t", report("h04", env.clock.now()))     # only ba1 got it (a lost message)
        second = await a.sync_with("ba2")
        return first, second, dict(a.counters), dict(b.counters), b.cache.holds(report("h04", env.clock.now()))
    first, second, ca, cb, b_has_it = run_virtual(main())
    assert (first, second) == (0, 0)
    assert ca["syncs"] == 2 and ca["syncs_in_sync"] == 1
    assert cb["sync_served"] == 2 and cb["sync_served_in_sync"] == 1
    assert b_has_it, "the full sync did not carry the report the responder missed"
