"""The pre-copy cost model (DESIGN §11), its arithmetic and its calibration on measured records."""
import csv
import dataclasses
import glob
import math
import os

import pytest

from cellbed.policy.migration.cost import PrecopyParams, calibrate, estimate, precopy, records_from_csv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_idle_guest_is_one_round_of_memory():
    c = precopy(512, 0, 0, PrecopyParams(bandwidth_mib_s=128, setup_ms=0))
    assert c.rounds == 1 and c.converged and c.downtime_ms == 0
    assert c.total_ms == pytest.approx(4000.0) and c.bytes == 512 * 2**20     # 512 MiB at 128 MiB/s


def test_dirtying_guest_converges_geometrically():
    p = PrecopyParams(bandwidth_mib_s=100, max_downtime_ms=100, setup_ms=0)
    c = precopy(100, 50, 20, p)
    # round 0: 1 s, dirties 20 MiB > the 10 MiB budget; round 1: 0.2 s, dirties 4 MiB -> stop-and-copy
    assert c.rounds == 2 and c.converged
    assert c.total_ms == pytest.approx(1000 + 200 + 40) and c.downtime_ms == pytest.approx(40)
    assert c.bytes == int((100 + 20 + 4) * 2**20)


def test_a_guest_dirtying_faster_than_the_link_never_converges():
    c = precopy(256, 200, math.inf, PrecopyParams(bandwidth_mib_s=100, max_downtime_ms=300, max_rounds=5))
    assert not c.converged and c.rounds == 5 and c.downtime_ms == pytest.approx(2000)


def test_bad_input_names_the_values():
    with pytest.raises(ValueError, match="bandwidth"):
        precopy(1, 0, 0, PrecopyParams(bandwidth_mib_s=0))


def test_calibration_on_this_projects_measured_records():
    rows = []
    for f in glob.glob(os.path.join(ROOT, "docs", "bench", "*.csv")):
        with open(f) as fh:
            rows += [r for r in csv.DictReader(fh) if r.get("outcome") == "succeeded"]
    recs = records_from_csv(rows)
    assert len(recs) >= 2
    cal = calibrate(recs)
    print(f"\ncalibrated on {cal.n} measured migrations: bandwidth {cal.params.bandwidth_mib_s:.0f} MiB/s, "
          f"setup {cal.params.setup_ms:.0f} ms, mean abs error {cal.mean_abs_error_pct:.1f}% "
          f"(accuracy {cal.accuracy_pct:.1f}%)")
    assert cal.params.bandwidth_mib_s > 0 and 0 <= cal.mean_abs_error_pct < 100


# --- hand-worked rows of the calibrated model (cost.estimate) -------------------------------------
# One parameter set, every term on: what a calibration file holds (cellctl bench migration --fit).
CAL = PrecopyParams(bandwidth_mib_s=200, setup_ms=100, resident_base_mib=60, resident_wss_share=1.0,
                    resident_mem_share=0.1, resident_overlap_mib=20, zero_scan_mib_s=1000, downtime_fixed_ms=20,
                    downtime_tail_share=0.5, downtime_tail_power=2.0, iteration_offset=2, wall_overhead_ms=1500)

HAND_WORKED = [
    # name, (mem, wss, dirty), params, options, want: total_ms, downtime_ms, MiB sent, iterations, postcopy switched
    (
        "idle guest: only its non-zero pages are sent, the zero ones scanned",
        # non-zero = 60 + 1.0·(64 − 20) + 0.1·256 = 129.6 MiB (within [wss 64, mem 256])
        # round 0  = 129.6 / 200 + (256 − 129.6) / 1000 = 0.648 + 0.1264 = 0.7744 s; nothing dirty: 1 pass
        # downtime = 20 ms fixed + 0 / 200 + the tail of pages QEMU still had to scan when they fitted the
        #            300 ms limit: 0.5 · (129.6/256)² · min(256, 0.3 · 200) = 7.688599 MiB / 200 = 38.443 ms
        #          = 58.443 ms
        # total    = 0.7744 + 0.020 (the fixed stop) + 0.100 setup = 0.8944 s; iterations = 1 + 2
        (256, 64, 0), CAL, {},
        (894.4, 58.443359, 129.6, 3, False),
    ),
    (
        "dirtying guest under a bandwidth limit, converging after two more passes",
        # bandwidth = min(0.9 · 100, 200) = 90 MiB/s; round 0 = 129.6 / 90 + 126.4 / 1000 = 1.5664 s
        # dirty    = 0.5 · 40 = 20 MiB/s: min(20 · 1.5664, 64) = 31.328 MiB, of which the last 0.3 s · 90 = 27 MiB
        #            of pages were still unsent (first_pass_tail 1): 31.328 · (1 − 27/256) = 28.023869 MiB
        # converged once a pass leaves ≤ 0.050 s · 90 = 4.5 MiB:
        #   pass 2: 28.023869 / 90 = 0.3113763 s, dirties 20 · 0.3113763 = 6.227527 MiB > 4.5
        #   pass 3:  6.227527 / 90 = 0.0691947 s, dirties 1.383894 MiB ≤ 4.5: stop
        # sent     = 129.6 + 28.023869 + 6.227527 + 1.383894 = 165.235290 MiB
        # stop     = QEMU lifts the limit: 20 ms + 1.383894 / 200 = 26.9195 ms
        # downtime = 26.9195 + the tail: 0.5 · (129.6/256)² · min(256, 27) = 3.459869 MiB / 200 = 17.2993 ms
        #          = 44.219 ms
        # total    = 1.5664 + 0.3113763 + 0.0691947 + 0.0269195 (stop) + 2 · 0.200 (passes after the first)
        #            + 0.100 setup = 2.4738905 s; iterations = 3 + 2
        (256, 64, 40), dataclasses.replace(CAL, limit_efficiency=0.9, dirty_scale=0.5, first_pass_tail=1.0,
                                           converge_ms=50, iteration_ms=200),
        {"bandwidth_limit_mib_s": 100},
        (2473.890617, 44.218987, 165.235297, 5, False),
    ),
    (
        "post-copy: dirtying as fast as it can, it switches after the first pass",
        # non-zero = 60 + (256 − 20) + 51.2 = 347.2 MiB; round 0 = 347.2 / 200 + 164.8 / 1000 = 1.9008 s
        # max = 1000 MiB/s: min(1900.8, 256) = 256 MiB dirty > 0.3 · 200 = 60: switch; the guest stops 8 ms
        # and the 256 MiB follow at 200 MiB/s: total = 1.9008 + 0.008 + 1.28 + 0.100 = 3.2888 s
        (512, 256, math.inf), dataclasses.replace(CAL, max_dirty_mib_s=1000, postcopy_downtime_ms=8),
        {"postcopy": True},
        (3288.8, 8.0, 603.2, 3, True),
    ),
    (
        "auto-converge: QEMU's throttle, 20 % then +10 %, every second pass that dirtied > half it sent",
        # plain model, 100 MiB/s, limit 100 ms: budget 10 MiB; 100 MiB, all of it dirtied at 90 MiB/s
        #   pass 1: 100 MiB in 1 s, dirties 90;  90 > 50: high 1
        #   pass 2:  90 MiB, 0.9 s, dirties 81;  81 > 45: high 2 → throttle 20 %: 72 MiB/s
        #   pass 3:  81 MiB, 0.81 s → 58.32;  58.32 > 40.5: high 1
        #   pass 4:  58.32, 0.5832 s → 41.9904; > 29.16: high 2 → throttle 30 %: 63 MiB/s
        #   pass 5:  41.9904, 0.419904 s → 26.453952; > 20.9952: high 1
        #   pass 6:  26.453952, 0.26453952 s → 16.66599; > 13.227: high 2 → throttle 40 %: 54 MiB/s
        #   pass 7:  16.66599, 0.1666599 s → 8.999634 ≤ 10: stop and copy it (90.0 ms)
        # total = 1 + 0.9 + 0.81 + 0.5832 + 0.419904 + 0.26453952 + 0.1666599 + 0.0899963 = 4.2342998 s
        # (without auto-converge: 22 passes and 9.1 s)
        (100, 100, 90), PrecopyParams(bandwidth_mib_s=100, max_downtime_ms=100, setup_ms=0),
        {"auto_converge": True},
        (4234.299762, 89.996345, 423.430, 7, False),
    ),
]


@pytest.mark.parametrize("name,guest,params,options,want", HAND_WORKED, ids=[r[0] for r in HAND_WORKED])
def test_hand_worked_rows(name, guest, params, options, want):
    c = estimate(*guest, params, **options)
    total, down, mib, iterations, switched = want
    assert c.total_ms == pytest.approx(total, abs=1e-3)
    assert c.downtime_ms == pytest.approx(down, abs=1e-3)
    assert c.bytes / 2**20 == pytest.approx(mib, abs=1e-3)
    assert (c.iterations, c.postcopy_switched, c.converged) == (iterations, switched, True)
    assert c.wall_ms == pytest.approx(c.total_ms + params.wall_overhead_ms)


def test_the_defaults_are_the_plain_model():
    # every calibrated term off: estimate() is precopy(), and a limit above the link cannot raise it
    for guest in ((512, 0, 0), (100, 50, 20), (256, 200, math.inf)):
        assert estimate(*guest) == precopy(*guest)
    assert estimate(512, 0, 0, bandwidth_limit_mib_s=5000).total_ms == precopy(512, 0, 0).total_ms
    assert estimate(512, 0, 0, bandwidth_limit_mib_s=128, max_downtime_ms=50).total_ms == pytest.approx(
        precopy(512, 0, 0, PrecopyParams(bandwidth_mib_s=128, max_downtime_ms=50)).total_ms)
