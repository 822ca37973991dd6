"""Fitting the migration cost model (costfit.py): the records it reads, the split rule, that the fit
recovers known parameters from records the model itself made, and its error statistics."""
import dataclasses
import hashlib
import math

import pytest

from cellbed.policy.migration import costfit
from cellbed.policy.migration.cost import MIB, PrecopyParams, estimate, link_bandwidth

TRUE = PrecopyParams(bandwidth_mib_s=200.0, setup_ms=400.0, max_rounds=60, limit_efficiency=0.95,
                     resident_base_mib=80.0, resident_wss_share=1.0, resident_mem_share=0.02,
                     resident_overlap_mib=24.0, first_pass_tail=0.8, zero_scan_mib_s=900.0, dirty_scale=1.1,
                     max_dirty_mib_s=3000.0, downtime_fixed_ms=60.0, downtime_tail_share=0.9,
                     downtime_tail_power=2.0, iteration_ms=150.0, converge_ms=40.0, postcopy_downtime_ms=6.0,
                     postcopy_switch_ms=150.0, iteration_offset=2, wall_overhead_ms=1500.0)


def _row(mode, mem, wss, dirty, bw=0, limit=0, params=TRUE, repeat=0, **over):
    """A bench CSV row (strings, as csv.DictReader gives them) of what *params* predicts."""
    c = estimate(mem, wss, dirty, params, bandwidth_limit_mib_s=bw, max_downtime_ms=limit,
                 auto_converge=mode == "auto-converge", postcopy=mode == "postcopy")
    row = {"mem_mib": mem, "wss_mib": wss, "dirty_mib_s": "max" if math.isinf(dirty) else dirty,
           "guest_dirty_mib_s": params.max_dirty_mib_s if math.isinf(dirty) else dirty, "bandwidth_mib_s": bw,
           "max_downtime_ms": limit, "postcopy": mode == "postcopy", "auto_converge": mode == "auto-converge",
           "tls": True, "repeat": repeat, "outcome": "succeeded", "time_elapsed_ms": c.total_ms,
           "downtime_ms": c.downtime_ms, "memory_processed_bytes": c.bytes, "memory_iteration": c.iterations,
           "wall_ms": c.wall_ms, "postcopy_switched": c.postcopy_switched,
           # QEMU measures its rate over its last pass: below the link's on a short migration
           "memory_bps": link_bandwidth(params, bw) * MIB * (0.6 if bw == 0 else 1.0)}
    row.update(over)
    return {k: str(v) for k, v in row.items()}


def _synthetic() -> list[dict]:
    rows = []
    for mem, wss in [(128, 16), (128, 48), (256, 16), (256, 48), (256, 160), (512, 48), (512, 160), (512, 320)]:
        for dirty in (0, 16, 64):
            rows.append(_row("precopy", mem, wss, dirty))
        rows += [_row("precopy", mem, wss, 0, bw=64), _row("precopy", mem, wss, 8, bw=32),
                 _row("precopy", mem, wss, 16, limit=50), _row("postcopy", mem, wss, math.inf),
                 _row("postcopy", mem, wss, 64)]
    return rows


def test_the_fit_recovers_the_parameters_that_made_the_records():
    p = costfit.fit_params(costfit.records_from_rows(_synthetic()))
    for f in dataclasses.fields(TRUE):
        want, got = getattr(TRUE, f.name), getattr(p, f.name)
        if f.name == "postcopy_switch_ms":      # any delay between the passes' lengths switches the same ones
            sw = [estimate(m, w, d, TRUE, postcopy=True).postcopy_switched
                  for m, w, d in ((128, 16, 64), (256, 160, 64), (512, 320, 64), (128, 48, math.inf))]
            assert [estimate(m, w, d, p, postcopy=True).postcopy_switched
                    for m, w, d in ((128, 16, 64), (256, 160, 64), (512, 320, 64), (128, 48, math.inf))] == sw
            assert not all(sw) and any(sw)
            continue
        assert got == pytest.approx(want, rel=0.03, abs=1e-6), f.name
    errs = costfit.error_summary(costfit.records_from_rows(_synthetic()), p)
    assert all(e["max_pct"] < 1.0 for e in errs.values()), errs


def test_records_take_the_guests_own_dirty_rate_and_fall_back_to_the_configured_one():
    def rec(**over):
        return costfit.record_from_row(_row("precopy", 256, 48, 16, **over))
    assert rec(guest_dirty_mib_s="14.5").dirty_mib_s == 14.5
    assert rec(guest_dirty_mib_s="-1").dirty_mib_s == 16.0            # the guest did not say
    assert rec(guest_dirty_mib_s="0.0").dirty_mib_s == 16.0           # its workload had not started yet
    assert rec(guest_dirty_mib_s="").dirty_mib_s == 16.0              # an older CSV without the column
    assert costfit.record_from_row(_row("precopy", 256, 48, 0, guest_dirty_mib_s="0")).dirty_mib_s == 0.0
    r = costfit.record_from_row(_row("postcopy", 256, 48, math.inf, guest_dirty_mib_s="-1"))
    assert math.isinf(r.dirty_mib_s) and r.mode == "postcopy"
    assert costfit.record_from_row(_row("precopy", 256, 48, 16, dirty_mib_s="-1")).dirty_cfg == math.inf
    assert costfit.record_from_row(_row("auto-converge", 256, 48, 16)).mode == "auto-converge"
    rows = [_row("precopy", 256, 48, 16), _row("precopy", 256, 48, 16, outcome="aborted")]
    assert len(costfit.records_from_rows(rows)) == 1                  # only completed migrations have a cost
    bad = _row("precopy", 256, 48, 16)
    del bad["downtime_ms"]
    with pytest.raises(ValueError, match="downtime_ms"):
        costfit.record_from_row(bad)


def test_the_split_holds_out_whole_configurations_every_fourth_by_hash_within_each_mode():
    rows = [_row(mode, mem, 48, d, repeat=i) for mode in ("precopy", "postcopy") for mem in (128, 256, 512)
            for d in (0, 16, 64) for i in range(3)]
    recs = costfit.records_from_rows(rows)
    fit, held = costfit.split(recs)
    fit_keys, held_keys = {costfit.config_key(r) for r in fit}, {costfit.config_key(r) for r in held}
    assert not fit_keys & held_keys and len(fit) + len(held) == len(recs)
    for mode in ("precopy", "postcopy"):                  # 9 configurations each: the 4th and the 8th held out
        keys = sorted((k for k in fit_keys | held_keys if k.startswith(mode + "|")),
                      key=lambda k: hashlib.sha256(k.encode()).hexdigest())
        assert [k for k in keys if k in held_keys] == [keys[3], keys[7]]
    assert all(sum(costfit.config_key(r) == k for r in held) == 3 for k in held_keys)   # with all repeats
    assert costfit.split(list(reversed(recs)))[1] == list(reversed(held))               # order does not matter
    assert costfit.config_key(recs[0]) == "precopy|mem=128|wss=48|dirty=0|bw=0|downtime=0|tls=1"


def test_error_statistics():
    assert costfit.percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.5
    assert costfit.percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0], 90) == 10.0
    assert math.isnan(costfit.percentile([], 50))
    # three repeats measuring 1000, 1100 and 1300 ms against a model that says 1000 ms
    recs = [costfit.record_from_row(_row("precopy", 256, 48, 0, repeat=i, time_elapsed_ms=str(t)))
            for i, t in enumerate((1000, 1100, 1300))]
    p = dataclasses.replace(TRUE, setup_ms=TRUE.setup_ms + 1000 - estimate(256, 48, 0, TRUE).total_ms)
    s = costfit.full_summary(recs, p)
    assert s["per_migration"]["time"]["median_pct"] == pytest.approx(100 / 11)          # |1000 − 1100| / 1100
    assert s["per_migration"]["time"]["max_pct"] == pytest.approx(300 / 13)
    assert s["per_configuration"]["time"]["max_pct"] == pytest.approx(100 / 11)         # the median is 1100
    # one repeat against the median of the others:
    # |1000 − 1200| / 1200, |1100 − 1150| / 1150, |1300 − 1050| / 1050
    assert s["repeat_noise"]["time"]["max_pct"] == pytest.approx(250 / 10.5)
    assert s["per_migration"]["bytes"]["max_pct"] == pytest.approx(0.0, abs=1e-6)


def test_too_few_records_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="at least 3"):
        costfit.fit(costfit.records_from_rows(_synthetic()[:2]))
