"""The pure checks at the services' boundaries (issue 13, part 5): cellbed.domain.validate and
the message checks built on it. Each refusal names the field and what is allowed, in one line,
and carries the reason an MQTT handler counts it under. The fuzz over the real servers is
tests/component/test_rpc_fuzz.py."""
from __future__ import annotations

import math

import pytest

from cellbed.domain import validate as v, wire_checks as wc, wire_checks_megha as wcm
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.wire import resources
from cellbed.runtime.status import MAX_DETAILS, details
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb, megha_pb2 as meghapb, node_pb2 as npb

NOW = 1_700_000_000.0


def refused(fn, *args, **kw) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as ei:
        fn(*args, **kw)
    assert "\n" not in str(ei.value)
    return ei.value


@pytest.mark.parametrize(("value", "reason"), [(math.nan, "not_finite"), (math.inf, "not_finite"),
                                               (-math.inf, "not_finite"), (-0.5, "out_of_range"),
                                               (2.5, "out_of_range")])
def test_finite_in_range_refuses_with_the_field_the_range_and_a_reason(value, reason):
    e = refused(v.finite_in_range, "task.cpu_load", value, 0.0, 1.0)
    assert str(e).startswith(f"task.cpu_load={value!r}") and "allowed 0.0..1.0" in str(e)
    assert e.reason == reason


def test_finite_in_range_passes_the_bounds():
    assert v.finite_in_range("x", 0.0, 0.0, 1.0) == 0.0 and v.finite_in_range("x", 1.0, 0.0, 1.0) == 1.0


@pytest.mark.parametrize("value", [0.0, -0.0, -1.0, math.nan, 2e8])
def test_positive_refuses_zero_negative_nan_and_too_big(value):
    e = refused(v.positive, "capacity.cpu_cores", value, 1e8, "cores")
    assert "capacity.cpu_cores" in str(e) and "allowed > 0" in str(e)


def test_bounded_str_never_echoes_the_string():
    e = refused(v.bounded_str, "host", "x" * 100_000, 63)
    assert str(e) == "host is 100000 characters long: allowed at most 63" and e.reason == "too_long"
    assert refused(v.bounded_str, "host", "", 63, required=True).reason == "missing"
    assert v.bounded_str("host", "h1", 63, required=True) == "h1"


def test_bounded_list():
    e = refused(v.bounded_list, "constraints", [1] * 65, 64)
    assert str(e) == "constraints has 65 items: allowed at most 64" and e.reason == "too_many"
    assert v.bounded_list("constraints", [1] * 64, 64) == [1] * 64


@pytest.mark.parametrize(("t", "reason"), [(NOW + 30.5, "future_timestamp"), (math.nan, "not_finite"),
                                           (-1.0, "out_of_range")])
def test_timestamp_refuses_the_future_beyond_the_skew_and_nonsense(t, reason):
    e = refused(v.timestamp, "report.sampled_unix_s", t, NOW, 30.0)
    assert e.reason == reason and "report.sampled_unix_s" in str(e)


def test_timestamp_accepts_the_past_zero_and_the_skew():
    for t in (0.0, 1.0, NOW - 1e6, NOW, NOW + 30.0):
        assert v.timestamp("t", t, NOW, 30.0) == t


def test_enum_value():
    d = cpb.AsrClass.DESCRIPTOR
    assert v.enum_value("asr_class", 3, d) == 3 and v.enum_value("asr_class", 0, d) == 0
    e = refused(v.enum_value, "asr_class", 7, d)
    assert e.reason == "unknown_enum" and "ASR_CLASS_DA (6)" in str(e)
    assert "UNSPECIFIED" not in str(refused(v.enum_value, "asr_class", 0, d, unspecified=False))


@pytest.mark.parametrize("text", ["", "abc", "1.5", "9" * 20, "1" * 5000])
def test_integer_text_refuses_what_is_not_a_64_bit_integer(text):
    e = refused(v.integer_text, "value", text)
    assert e.reason in ("malformed", "out_of_range") and len(str(e)) < 200


def test_integer_text_reads_64_bit_integers():
    assert v.integer_text("v", "-9223372036854775808") == -2 ** 63 and v.integer_text("v", "42") == 42


def test_status_details_are_one_line_and_bounded():
    assert details("a\nb") == "a b"
    long = details("x" * 100_000)
    assert len(long) <= MAX_DETAILS and long.endswith("(100000 characters)")


# --- message checks --------------------------------------------------------------------------------

def report(**kw) -> masbpb.NodeReport:
    r = masbpb.NodeReport(host="n1", capacity=resources(4.0, 8192), used=resources(1.0, 512), sampled_unix_s=NOW,
                          asr_class=cpb.ASR_CLASS_IDLE)
    for k, x in kw.items():
        if isinstance(x, cpb.Resources):
            getattr(r, k).CopyFrom(x)
        else:
            setattr(r, k, x)
    return r


def test_a_good_node_report_passes():
    wc.node_report("report", report(), NOW, 30.0)


@pytest.mark.parametrize(("kw", "words"), [
    ({"capacity": resources(0.0, 8192)}, "report.capacity.cpu_cores=0.0 cores is out of range"),
    ({"capacity": resources(4.0, 5e-324)}, "report.capacity.mem_mib"),
    ({"used": resources(math.nan, 0)}, "report.used.cpu_cores=nan"),
    ({"sampled_unix_s": NOW + 3600}, "in the future"),
    ({"asr_class": 9}, "report.asr_class=9 is not a known AsrClass"),
    ({"host": "h" * 64}, "report.host is 64 characters long"),
])
def test_a_bad_node_report_is_refused_naming_the_field(kw, words):
    assert words in str(refused(wc.node_report, "report", report(**kw), NOW, 30.0))


def test_an_attribute_marked_integer_must_be_one():
    r = report()
    r.attributes.add(name="attr00", value="12a", integer=True)
    assert "is marked integer but is not one" in str(refused(wc.node_report, "report", r, NOW, 30.0))


def state(**kw) -> meghapb.LmState:
    st = meghapb.LmState(lm="lm1", instance="lm1a", epoch=1, version=(1 << 32) + 5, sent_unix_s=NOW, gms=["gm1"],
                         full=True, owner=[0, 0], free_cpu_cores=[1.0, 2.0], free_mem_mib=[10.0, 20.0])
    for k, x in kw.items():
        if isinstance(x, list):
            del getattr(st, k)[:]
            getattr(st, k).extend(x)
        else:
            setattr(st, k, x)
    return st


def test_a_good_lm_state_passes():
    wcm.lm_state(state(), NOW, 30.0)


@pytest.mark.parametrize(("kw", "words"), [
    ({"version": 5}, "version=5 is out of range for epoch 1"),
    ({"version": 2 ** 64 - 1}, "out of range for epoch 1"),
    ({"free_mem_mib": [1.0]}, "free_mem_mib has 1 items, owner has 2"),
    ({"owner": [0, 1]}, "owner has 1: allowed an index into gms"),
    ({"free_cpu_cores": [1.0, math.inf]}, "free_cpu_cores[1]=inf"),
    ({"sent_unix_s": NOW + 31}, "sent_unix_s"),
])
def test_a_bad_lm_state_is_refused(kw, words):
    assert words in str(refused(wcm.lm_state, state(**kw), NOW, 30.0))


def test_a_started_event_needs_a_host_and_non_negative_times():
    ev = meghapb.TaskEvent(name="t1", kind=meghapb.TASK_EVENT_KIND_STARTED, unix_s=NOW)
    assert "events[0].placement.host must be set" in str(refused(wcm.task_event, "events[0]", ev, NOW, 30.0))
    ev.placement.host = "m1"
    wcm.task_event("events[0]", ev, NOW, 30.0)
    ev.timing.queue_ms = -1.0
    assert "events[0].timing.queue_ms=-1.0 ms" in str(refused(wcm.task_event, "events[0]", ev, NOW, 30.0))


def test_only_the_peer_replicates():
    req = meghapb.ReplicateRequest(instance="lm1a", epoch=2)
    wcm.replicate(req, "lm1a", NOW, 30.0)
    e = refused(wcm.replicate, req, "lm1b", NOW, 30.0)
    assert "not this LM's peer: allowed 'lm1b'" in str(e) and e.reason == "unknown_sender"


def test_a_vm_on_its_way_in_uses_at_most_what_its_spec_can():
    req = masbpb.TaskMigrationProcessRequest(
        san_id="s", src_host="h2", migration_id="m", task=masbpb.TaskInfo(name="t", used=resources(0.5, 300)),
        spec=npb.VmSpec(name="t", mem_mib=128, vcpus=1))
    wc.task_migration_process(req)
    req.task.used.mem_mib = 2 * 128 + 2048 + 1              # 2 × its memory + 2 GiB, and one more
    assert "task.used.mem_mib=2305.0 MiB is out of range" in str(refused(wc.task_migration_process, req))
