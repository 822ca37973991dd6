"""VmSpec and MigrationOptions: validation at every boundary, defaults, JSON round trip
(DESIGN §6, §13: a bad field fails with a message naming the field and its range)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from cellbed.domain.vm import (
    MigrationOptions,
    TimeoutPolicy,
    VmSpec,
    max_wss_mib,
)
from cellbed.domain.errors import InvalidArgument

NAN = float("nan")

# Kubernetes-style table. Each row: case name, VmSpec overrides (on top of name="vm"),
# None if valid, else (field named in the message, allowed range text in the message).
# The default spec is mem 128 MiB, 1 vCPU, cpu 0.1, wss 16 MiB, dirty 0, priority 0.
SPEC_CASES = [
    # --- mem_mib: 64..8192 MiB (wss must fit: max_wss = mem - 80, so 64 MiB needs wss 0)
    ("mem 63", dict(mem_mib=63, wss_mib=0), ("mem_mib", "64..8192")),
    ("mem 64", dict(mem_mib=64, wss_mib=0), None),
    ("mem 8192", dict(mem_mib=8192), None),
    ("mem 8193", dict(mem_mib=8193), ("mem_mib", "64..8192")),
    # --- vcpus: 1..8
    ("vcpus 0", dict(vcpus=0), ("vcpus", "1..8")),
    ("vcpus 1", dict(vcpus=1), None),
    ("vcpus 8", dict(vcpus=8), None),
    ("vcpus 9", dict(vcpus=9), ("vcpus", "1..8")),
    # --- cpu_load: 0..1 fraction of each vCPU; NaN compares false with everything
    ("cpu -0.1", dict(cpu_load=-0.1), ("cpu_load", "0.0..1.0")),
    ("cpu 0", dict(cpu_load=0.0), None),
    ("cpu 1", dict(cpu_load=1.0), None),
    ("cpu 1.1", dict(cpu_load=1.1), ("cpu_load", "0.0..1.0")),
    ("cpu NaN", dict(cpu_load=NAN), ("cpu_load", "0.0..1.0")),
    # --- wss_mib: 0..max_wss_mib(mem) = mem - 80
    ("wss 0", dict(wss_mib=0), None),
    ("wss 48 = 128-80", dict(mem_mib=128, wss_mib=48), None),
    ("wss 49 > 128-80", dict(mem_mib=128, wss_mib=49), ("wss_mib", "0..48")),
    ("wss 944 = 1024-80", dict(mem_mib=1024, wss_mib=944), None),
    ("wss 945 > 1024-80", dict(mem_mib=1024, wss_mib=945), ("wss_mib", "0..944")),
    ("wss 1 > 64-80 clamps to 0", dict(mem_mib=64, wss_mib=1), ("wss_mib", "0..0")),
    ("wss -1", dict(wss_mib=-1), ("wss_mib", "0..48")),
    # --- dirty_mib_s: 0..65536 MiB/s, or +inf ("max")
    ("dirty -0.5", dict(dirty_mib_s=-0.5), ("dirty_mib_s", "0.0..65536.0")),
    ("dirty 0", dict(dirty_mib_s=0.0), None),
    ("dirty 65536", dict(dirty_mib_s=65536.0), None),
    ("dirty 65536.5", dict(dirty_mib_s=65536.5), ("dirty_mib_s", "0.0..65536.0")),
    ("dirty NaN", dict(dirty_mib_s=NAN), ("dirty_mib_s", "0.0..65536.0")),
    ("dirty +inf = max", dict(dirty_mib_s=math.inf), None),
    # --- name: [a-z0-9][a-z0-9-]{0,30}, i.e. 1..31 characters
    ("name 1 char", dict(name="a"), None),
    ("name 31 chars", dict(name="a" * 31), None),
    ("name 32 chars", dict(name="a" * 32), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    ("name empty", dict(name=""), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    ("name leading dash", dict(name="-vm"), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    ("name digit first", dict(name="0vm-1"), None),
    ("name upper", dict(name="Vm"), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    ("name underscore", dict(name="vm_1"), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    ("name slash", dict(name="vm/1"), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    ("name quote", dict(name="vm'1"), ("name", "[a-z0-9][a-z0-9-]{0,30}")),
    # --- priority: 0..11 (GCD bands)
    ("priority -1", dict(priority=-1), ("priority", "0..11")),
    ("priority 0", dict(priority=0), None),
    ("priority 11", dict(priority=11), None),
    ("priority 12", dict(priority=12), ("priority", "0..11")),
    # --- req_cpu_cores: 0..vcpus
    ("req cpu 2 of 2 vcpus", dict(vcpus=2, req_cpu_cores=2.0), None),
    ("req cpu 2.5 of 2 vcpus", dict(vcpus=2, req_cpu_cores=2.5), ("req_cpu_cores", "0.0..2.0")),
    ("req cpu -1", dict(req_cpu_cores=-1.0), ("req_cpu_cores", "0.0..1.0")),
]


@pytest.mark.parametrize(("overrides", "want"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_vmspec_validate(overrides, want):
    spec = VmSpec(**{"name": "vm", **overrides})
    if want is None:
        assert spec.validate() is spec
        return
    field, allowed = want
    with pytest.raises(InvalidArgument) as ei:
        spec.validate()
    msg = str(ei.value)
    assert msg.startswith(f"{field}="), msg
    assert f"allowed {allowed}" in msg, msg


def test_vmspec_name_with_trailing_newline_is_rejected():
    with pytest.raises(InvalidArgument, match="name="):
        VmSpec(name="vm\n").validate()


def test_vmspec_negative_infinite_dirty_rate_is_rejected():
    with pytest.raises(InvalidArgument, match="dirty_mib_s"):
        VmSpec(name="vm", dirty_mib_s=-math.inf).validate()


def test_max_wss_mib_keeps_80_mib_for_the_guest():
    # mem - 80, never negative
    assert [max_wss_mib(m) for m in (64, 80, 81, 128, 8192)] == [0, 0, 1, 48, 8112]


REQUESTED = [
    # vcpus, cpu_load, req_cpu_cores, requested_cpu, arithmetic
    (1, 0.1, 0.0, 0.1, "default: 1 × 0.1"),
    (2, 0.25, 0.0, 0.5, "default: 2 × 0.25"),
    (4, 1.0, 0.0, 4.0, "default: 4 × 1.0"),
    (2, 0.25, 1.5, 1.5, "explicit request wins over 2 × 0.25 = 0.5"),
    (8, 0.0, 0.0, 0.0, "default: 8 × 0 = 0"),
]


@pytest.mark.parametrize(("vcpus", "cpu", "req", "want"), [r[:4] for r in REQUESTED], ids=[r[4] for r in REQUESTED])
def test_requested_cpu(vcpus, cpu, req, want):
    spec = VmSpec(name="vm", vcpus=vcpus, cpu_load=cpu, req_cpu_cores=req).validate()
    assert spec.requested_cpu == pytest.approx(want)


def test_with_workload_changes_only_given_fields():
    base = VmSpec(name="vm", mem_mib=256, cpu_load=0.2, wss_mib=32, dirty_mib_s=4.0, priority=5)
    assert base.with_workload(cpu_load=0.7) == dataclasses.replace(base, cpu_load=0.7)
    assert base.with_workload(wss_mib=176) == dataclasses.replace(base, wss_mib=176)  # 256 - 80
    assert base.with_workload(dirty_mib_s=math.inf).dirty_mib_s == math.inf
    # zero is a value, not "unchanged"
    assert base.with_workload(cpu_load=0.0, wss_mib=0, dirty_mib_s=0.0) == dataclasses.replace(
        base, cpu_load=0.0, wss_mib=0, dirty_mib_s=0.0)
    assert base.with_workload() == base
    assert base.cpu_load == 0.2  # frozen: the original is untouched


@pytest.mark.parametrize(("kw", "field"), [
    (dict(cpu_load=1.5), "cpu_load"),
    (dict(wss_mib=177), "wss_mib"),          # > 256 - 80 = 176
    (dict(dirty_mib_s=-1.0), "dirty_mib_s"),
])
def test_with_workload_validates(kw, field):
    base = VmSpec(name="vm", mem_mib=256)
    with pytest.raises(InvalidArgument, match=f"^{field}="):
        base.with_workload(**kw)


@pytest.mark.parametrize("spec", [
    VmSpec(name="vm"),
    VmSpec(name="big-1", mem_mib=8192, vcpus=8, cpu_load=1.0, wss_mib=8112, dirty_mib_s=65536.0,
           production=True, priority=11, req_cpu_cores=7.5, created_unix_s=1712345678.25),
    VmSpec(name="hot", dirty_mib_s=math.inf),
], ids=["defaults", "all fields", "dirty inf"])
def test_json_round_trip(spec):
    s = spec.to_json()
    back = VmSpec.from_json(s)
    assert back == spec
    assert back.to_json() == s


def test_json_writes_inf_as_max_and_ignores_unknown_keys():
    s = VmSpec(name="hot", dirty_mib_s=math.inf).to_json()
    assert '"dirty_mib_s": "max"' in s
    assert "Infinity" not in s  # not valid JSON for other readers
    # metadata written by a newer daemon with an extra field still loads
    newer = s[:-1] + ', "future_field": 1}'
    assert VmSpec.from_json(newer) == VmSpec(name="hot", dirty_mib_s=math.inf)


# MigrationOptions: bandwidth 0..100000 MiB/s, downtime 0..60000 ms, parallel 0..16,
# completion timeout 0..3600 s.
OPT_CASES = [
    ("defaults", dict(), None),
    ("bandwidth -1", dict(bandwidth_mib_s=-1), ("bandwidth_mib_s", "0..100000")),
    ("bandwidth 0 = unlimited", dict(bandwidth_mib_s=0), None),
    ("bandwidth 100000", dict(bandwidth_mib_s=100_000), None),
    ("bandwidth 100001", dict(bandwidth_mib_s=100_001), ("bandwidth_mib_s", "0..100000")),
    ("downtime -1", dict(max_downtime_ms=-1), ("max_downtime_ms", "0..60000")),
    ("downtime 60000", dict(max_downtime_ms=60_000), None),
    ("downtime 60001", dict(max_downtime_ms=60_001), ("max_downtime_ms", "0..60000")),
    ("parallel -1", dict(parallel_connections=-1), ("parallel_connections", "0..16")),
    ("parallel 16", dict(parallel_connections=16), None),
    ("parallel 17", dict(parallel_connections=17), ("parallel_connections", "0..16")),
    ("timeout -0.1", dict(completion_timeout_s=-0.1), ("completion_timeout_s", "0.0..3600.0")),
    ("timeout 0 = never", dict(completion_timeout_s=0.0), None),
    ("timeout 3600", dict(completion_timeout_s=3600.0), None),
    ("timeout 3600.1", dict(completion_timeout_s=3600.1), ("completion_timeout_s", "0.0..3600.0")),
    ("timeout NaN", dict(completion_timeout_s=NAN), ("completion_timeout_s", "0.0..3600.0")),
]


@pytest.mark.parametrize(("overrides", "want"), [c[1:] for c in OPT_CASES], ids=[c[0] for c in OPT_CASES])
def test_migration_options_validate(overrides, want):
    opts = MigrationOptions(**overrides)
    if want is None:
        assert opts.validate() is opts
        return
    field, allowed = want
    with pytest.raises(InvalidArgument) as ei:
        opts.validate()
    msg = str(ei.value)
    assert msg.startswith(f"{field}="), msg
    assert f"allowed {allowed}" in msg, msg


def test_migration_options_as_dict_uses_policy_value():
    d = MigrationOptions(timeout_policy=TimeoutPolicy.AUTO_CONVERGE, bandwidth_mib_s=50).as_dict()
    assert d["timeout_policy"] == "auto-converge"
    assert d["bandwidth_mib_s"] == 50
