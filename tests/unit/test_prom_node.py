"""daemon/prom.py: the node daemon's collector on NodeAgents built by cellbed.assembly on the model
backend (virtual time, in-process network): host figures, VM states, migrations by outcome and
their histograms, and the SAN's counters."""
from __future__ import annotations

import pytest

from cellbed import assembly
from cellbed.daemon.prom import DOWNTIME_BUCKETS, DURATION_BUCKETS, NodeCollector
from cellbed.daemon.san import SanConfig
from cellbed.domain import errors
from cellbed.domain.vm import MigrationOptions, VmSpec
from cellbed.runtime import run_virtual
from cellbed.runtime.prom import MIB
from cellbed.v1 import node_pb2 as npb
from tests.unit.promtools import scrape, series, value


async def two_hosts():
    env = assembly.model_env(3, 0.001)
    h1 = await assembly.model_host(env, assembly.model_config("h1", 2.0, 2048, monitor_period_s=10.0,
                                                              admission="requested"))
    h2 = await assembly.model_host(env, assembly.model_config("h2", 1.0, 512, monitor_period_s=10.0,
                                                              admission="requested"))
    return env, h1.agent, h2.agent


def bucket_of(bounds, v) -> str:
    """The le label of the first bucket that holds *v* (by hand: Prometheus' le is inclusive)."""
    for b in bounds:
        if v <= b:
            return repr(float(b))
    return "+Inf"


def test_host_figures_and_vm_states_follow_the_agent():
    specs = [VmSpec("a", mem_mib=256, vcpus=1, cpu_load=0.5, wss_mib=64),
             VmSpec("b", mem_mib=512, vcpus=2, cpu_load=0.25, wss_mib=128, req_cpu_cores=0.75)]

    async def main():
        env, h1, h2 = await two_hosts()
        c = NodeCollector(h1)
        _, empty = scrape(c)
        for s in specs:
            await h1.start_vm(s)
        await h1.pause_vm("b")
        _, s = scrape(c)
        used, versions = h1.used(), (h1.hv.accel, *h1.hv.versions())
        await h1.stop()
        await h2.stop()
        return empty, s, used, versions
    empty, s, used, versions = run_virtual(main())
    assert value(empty, "cellbed_host_vms", host="h1", vm_state="running") == 0
    assert value(s, "cellbed_host_cpu_capacity_cores", host="h1") == 2.0
    assert value(s, "cellbed_host_memory_capacity_bytes", host="h1") == 2048 * MIB
    assert value(s, "cellbed_host_cpu_requested_cores", host="h1") == pytest.approx(0.5 + 0.75)
    assert value(s, "cellbed_host_memory_requested_bytes", host="h1") == (256 + 512) * MIB
    assert value(s, "cellbed_host_cpu_used_cores", host="h1") == pytest.approx(used[0])
    assert value(s, "cellbed_host_memory_used_bytes", host="h1") == pytest.approx(used[1] * MIB)
    assert value(s, "cellbed_host_vms", host="h1", vm_state="running") == 1
    assert value(s, "cellbed_host_vms", host="h1", vm_state="paused") == 1
    assert value(s, "cellbed_host_vms", host="h1", vm_state="migrating_in") == 0
    assert {lb["vm_state"] for lb in series(s, "cellbed_host_vms")} >= {
        "running", "paused", "shutoff", "crashed", "migrating_out", "migrating_in"}
    assert value(s, "cellbed_host_info", host="h1", accel=versions[0], qemu_version=versions[1],
                 libvirt_version=versions[2]) == 1


def test_migrations_are_counted_by_outcome_and_measured_in_histograms():
    async def main():
        env, h1, h2 = await two_hosts()
        c = NodeCollector(h1)
        await h1.start_vm(VmSpec("a", mem_mib=256, vcpus=1, cpu_load=0.2, wss_mib=64))
        await h1.start_vm(VmSpec("big", mem_mib=1024, vcpus=1, cpu_load=0.2, wss_mib=64))
        _, before = scrape(c)
        rec = await h1.migrate("a", "h2", MigrationOptions())
        with pytest.raises(errors.FailedPrecondition):
            await h1.migrate("big", "h2", MigrationOptions())     # 1024 MiB does not fit in h2's 512
        _, after = scrape(c)
        _, again = scrape(c)                                      # nothing new: the same figures
        await h1.stop()
        await h2.stop()
        return before, rec, after, again
    before, rec, after, again = run_virtual(main())
    assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED
    assert value(before, "cellbed_migrations_total", host="h1", outcome="succeeded") == 0
    assert value(before, "cellbed_migration_duration_seconds_count", host="h1") == 0
    assert value(after, "cellbed_migrations_total", host="h1", outcome="succeeded") == 1
    assert value(after, "cellbed_migrations_total", host="h1", outcome="refused") == 1
    assert value(after, "cellbed_migrations_total", host="h1", outcome="failed") == 0
    secs = rec.time_elapsed_ms / 1000
    assert secs > 0 and rec.data_total_bytes > 0
    assert value(after, "cellbed_migration_duration_seconds_count", host="h1") == 1      # refused: not measured
    assert value(after, "cellbed_migration_duration_seconds_sum", host="h1") == pytest.approx(secs)
    assert value(after, "cellbed_migration_duration_seconds_bucket", host="h1",
                 le=bucket_of(DURATION_BUCKETS, secs)) == 1
    lower = [b for b in DURATION_BUCKETS if b < secs]
    if lower:
        assert value(after, "cellbed_migration_duration_seconds_bucket", host="h1", le=repr(float(lower[-1]))) == 0
    assert value(after, "cellbed_migration_downtime_seconds_sum", host="h1") == pytest.approx(rec.downtime_ms / 1000)
    assert value(after, "cellbed_migration_downtime_seconds_bucket", host="h1",
                 le=bucket_of(DOWNTIME_BUCKETS, rec.downtime_ms / 1000)) == 1
    assert value(after, "cellbed_migration_transferred_bytes_sum", host="h1") == rec.data_total_bytes
    assert again == after


def test_the_san_counters_become_rounds_by_outcome_and_events():
    async def main():
        env, h1, h2 = await two_hosts()
        san, _ = assembly.build_san(env, h1, SanConfig(), [], "cell")
        c = NodeCollector(h1, san)
        _, fresh = scrape(c)
        san.counters.update({"sans_started": 4, "sans_migrated": 2, "sans_gave-up": 1, "sans_cancelled": 1,
                             "scs_runs": 3, "bytes_moved": 5 * MIB, "rejections_no_room": 2})
        _, s = scrape(c)
        await san.stop()
        await h1.stop()
        await h2.stop()
        return fresh, s
    fresh, s = run_virtual(main())
    assert value(fresh, "cellbed_san_negotiations_total", host="h1", outcome="migrated") == 0
    assert value(s, "cellbed_san_negotiations_started_total", host="h1") == 4
    assert value(s, "cellbed_san_negotiations_total", host="h1", outcome="migrated") == 2
    assert value(s, "cellbed_san_negotiations_total", host="h1", outcome="gave-up") == 1
    assert value(s, "cellbed_san_negotiations_total", host="h1", outcome="failed") == 0
    assert value(s, "cellbed_san_negotiations_active", host="h1") == 0
    assert value(s, "cellbed_san_events_total", host="h1", event="scs_runs") == 3
    assert value(s, "cellbed_san_events_total", host="h1", event="rejections_no_room") == 2
    assert value(s, "cellbed_san_moved_bytes_total", host="h1") == 5 * MIB
    assert "sans_started" not in {lb.get("event") for lb in series(s, "cellbed_san_events_total")}
