"""Issue 16: the model cell's fast paths, piece by piece.

Exact ones: a broker's report check (one pass, no per-field strings) passes exactly the reports
the field-by-field check passes; a sync entry equal to the entry the receiver holds is checked
for its time only. Statistical ones (event-driven sampling, drawn scan order): their mechanism —
the backend's change count, the skip rule, the measurement after skipped periods (the same as a
periodic sample's), and the drawn head's law."""
import math

import numpy as np
import pytest

from cellbed import assembly
from cellbed.broker.cache import NodeCache
from cellbed.domain import wire, wire_checks
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.overhead import GuestOverhead
from cellbed.domain.vm import MigrationOptions, VmSpec
from cellbed.policy.masb.broker_select import random_head
from cellbed.runtime.clock import run_virtual
from cellbed.v1 import masb_pb2 as masbpb

NOW = 1_700_000_000.0


def report(**kw) -> masbpb.NodeReport:
    base = dict(host="n1", capacity=wire.resources(32.0, 65536), used=wire.resources(3.0, 1000),
                requested=wire.resources(4.0, 2000), prod_requested=wire.resources(1.0, 500), task_count=3,
                attributes=wire.attributes_pb({"rack": "a", "kernel": 7}), asr_class=2, sampled_unix_s=NOW)
    base.update(kw)
    return masbpb.NodeReport(**base)


BAD = {
    "no host": dict(host=""), "long host": dict(host="h" * 64), "long via": dict(via_broker="b" * 64),
    "zero capacity": dict(capacity=wire.resources(0.0, 65536)),
    "nan used": dict(used=wire.resources(math.nan, 1)), "negative requested": dict(requested=wire.resources(-1, 1)),
    "huge prod": dict(prod_requested=wire.resources(1, 1e13)), "inf mem": dict(used=wire.resources(1, math.inf)),
    "unknown asr": dict(asr_class=99), "future": dict(sampled_unix_s=NOW + 31), "nan time": dict(sampled_unix_s=math.nan),
    "negative time": dict(sampled_unix_s=-1.0),
    "long attribute": dict(attributes=[wire.attributes_pb({"a" * 256: "x"})[0]]),
    "long value": dict(attributes=wire.attributes_pb({"a": "x" * 256})),
    "integer not one": dict(attributes=[masbpb.NodeReport().attributes.add(name="k", value="7x", integer=True)]),
    "integer too big": dict(attributes=[masbpb.NodeReport().attributes.add(name="k", value=str(2 ** 63), integer=True)]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_one_pass_check_refuses_what_the_field_checks_refuse(case):
    r = report(**BAD[case])
    with pytest.raises(InvalidArgument) as slow:
        wire_checks._node_report("report", r, NOW, 30.0)
    with pytest.raises(InvalidArgument) as fast:
        wire_checks.node_report("report", r, NOW, 30.0)
    assert str(fast.value) == str(slow.value) and fast.value.reason == slow.value.reason


def test_the_one_pass_check_passes_what_the_field_checks_pass():
    for r in (report(), report(attributes=[]), report(sampled_unix_s=NOW + 30), report(asr_class=0)):
        wire_checks._node_report("report", r, NOW, 30.0)
        wire_checks.node_report("report", r, NOW, 30.0)


def test_a_sync_entry_the_broker_holds_is_checked_for_its_time_only():
    cache = NodeCache()
    held = report()
    cache.update(held)
    req = masbpb.SyncCacheRequest(broker="ba1", entries=[held, report(host="n2")])
    wire_checks.sync_cache(req, NOW, 30.0, checked=cache.holds)
    assert cache.holds(req.entries[0]) and not cache.holds(req.entries[1])
    # the same report, a receiver whose clock is now far behind: its time is still checked
    with pytest.raises(InvalidArgument, match=r"entries\[0\].sampled_unix_s"):
        wire_checks.sync_cache(req, NOW - 100, 30.0, checked=cache.holds)
    bad = masbpb.SyncCacheRequest(broker="ba1", entries=[held, report(host="n3", asr_class=99)])
    with pytest.raises(InvalidArgument, match=r"entries\[1\].asr_class"):
        wire_checks.sync_cache(bad, NOW, 30.0, checked=cache.holds)
    changed = report(used=wire.resources(3.5, 1000))          # same host and time, other content
    assert not cache.holds(changed)


def test_the_model_backend_counts_the_changes_a_sample_would_see():
    async def main():
        env = assembly.model_env(0)
        hv = env.fabric.backend("h1")
        other = env.fabric.backend("h2")
        c0 = hv.changes(0.0)
        await hv.start(VmSpec(name="a", mem_mib=512, vcpus=2, cpu_load=0.5, wss_mib=256))
        c1 = hv.changes(0.0)
        assert c1 > c0
        hv.set_usage("a", 1.0, 256.0)                  # the same use as now: nothing changes
        assert hv.changes(0.0) == c1
        hv.set_usage("a", 1.5, 256.0)
        assert hv.changes(0.0) > c1
        c2, o2 = hv.changes(0.0), other.changes(0.0)
        await hv.migrate("a", "model://h2", MigrationOptions())
        assert hv.changes(0.0) > c2 and other.changes(0.0) > o2
    run_virtual(main())


def test_a_booting_guest_makes_its_host_unquiet_until_its_boot_has_ended():
    async def main():
        env = assembly.model_env(0, guest=GuestOverhead(boot_s=20.0, boot_cpu_cores=1.0))
        hv = env.fabric.backend("h1")
        await hv.start(VmSpec(name="a", mem_mib=512, vcpus=1, cpu_load=0.5, wss_mib=256))
        assert hv.changes(10.0) is None
        after = hv.changes(25.0)
        assert after is not None and hv.changes(30.0) == after
    run_virtual(main())


async def _host(env, name: str, skip: bool, period: float = 60.0):
    cfg = assembly.model_config(name, 8.0, 16384, monitor_period_s=period, skip_quiet_samples=skip)
    h = await assembly.model_host(env, cfg, start=False)
    return h


def test_a_quiet_host_skips_samples_and_then_measures_the_last_period_as_a_periodic_one_would():
    """Two hosts, one per path, the same task and the same use changes; after skipped periods
    the event-driven host measures what the periodic one does."""
    async def main():
        env = assembly.model_env(0)
        hosts = [await _host(env, "p", False), await _host(env, "e", True)]
        for h in hosts:
            h.agent.add_sample_listener(lambda: None, lambda: True, lambda: None)
            await h.agent.start(first_sample_delay_s=60.0)
            await h.agent.start_vm(VmSpec(name=f"t{h.name}", mem_mib=1024, vcpus=4, cpu_load=0.25, wss_mib=512))
        clock = env.clock
        await clock.sleep(60.0 * 6 + 1)                   # 6 periods at a constant use
        p, e = (h.agent for h in hosts)
        assert p.samples_skipped == 0 and e.samples_skipped >= 3
        await clock.sleep(30.0)                           # t = 391, mid-period: the use changes
        for h in hosts:
            env.fabric.set_usage(f"t{h.name}", 3.0, 900.0)
        await clock.sleep(30.0)                           # the sample at 420 sees 31 s of 1 core, 29 s of 3
        pe, ee = p.vms["tp"], e.vms["te"]
        assert ee.cpu_used_cores == pytest.approx(pe.cpu_used_cores, rel=1e-9)
        assert pe.cpu_used_cores == pytest.approx((31 * 1.0 + 29 * 3.0) / 60, rel=1e-6)
        await clock.sleep(60.0)
        assert ee.cpu_used_cores == pytest.approx(pe.cpu_used_cores, rel=1e-9) == pytest.approx(3.0)
        skipped = e.samples_skipped
        await clock.sleep(60.0)
        assert e.samples_skipped == skipped + 1           # quiet again after two equal samples
        for h in hosts:
            await h.agent.stop()
    run_virtual(main())


def test_a_listener_without_a_skip_rule_keeps_every_sample():
    async def main():
        env = assembly.model_env(0)
        h = await _host(env, "e", True)
        calls = []
        h.agent.add_sample_listener(lambda: calls.append(1))
        await h.agent.start(first_sample_delay_s=60.0)
        await env.clock.sleep(60.0 * 5 + 1)
        assert h.agent.samples_skipped == 0 and len(calls) == 5
        await h.agent.stop()
    run_virtual(main())


def test_the_drawn_head_has_the_law_of_a_permutations_head():
    rng = np.random.default_rng(7)
    n, head, draws = 50, 10, 4000
    first = np.zeros(n)
    anywhere = np.zeros(n)
    for _ in range(draws):
        h = random_head(n, head, rng)
        assert len(set(h.tolist())) == head and h.min() >= 0 and h.max() < n
        first[h[0]] += 1
        anywhere[h] += 1
    # chi-square against uniform, 49 degrees of freedom: the 0.999 quantile is 85.4
    for counts, total in ((first, draws), (anywhere, draws * head)):
        exp = total / n
        assert ((counts - exp) ** 2 / exp).sum() < 85.4
    assert len(random_head(5, 10, rng)) == 5
