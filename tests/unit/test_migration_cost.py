"""The pre-copy cost model (DESIGN §11), its arithmetic and its calibration on measured records."""
import csv
import glob
import math
import os

import pytest

from cellbed.policy.migration.cost import PrecopyParams, calibrate, precopy, records_from_csv

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
