"""The model twin's guest overhead and migration link, fitted from a real run's samples
(cellbed/experiment/twin/fit.py): hand-made rows whose answer is worked out here."""
import pytest

from cellbed.domain.overhead import GuestOverhead
from cellbed.experiment.twin import fit as twin_fit


def row(vm="a", state="running", age=100.0, load=0.1, used=0.1, mem=128, rss=240.0, boot=6.0, t=60.0):
    return {"t_s": str(t), "host": "h1", "vm": vm, "state": state, "age_s": str(age), "vcpus": "1",
            "cpu_load": str(load), "cpu_used_cores": str(used), "mem_mib": str(mem), "wss_mib": "48",
            "rss_mib": str(rss), "boot_s": str(boot)}


def test_linear_fit_recovers_base_and_gain():
    # used = 0.05 + 0.5 × load; rss = 100 + 1.0 × mem
    rows = [row(vm=f"v{i}", load=x, used=0.05 + 0.5 * x, mem=m, rss=100 + m)
            for i, (x, m) in enumerate([(0.0, 96), (0.2, 128), (0.4, 96), (0.8, 128)])]
    g, info = twin_fit.fit(rows, period_s=5.0)
    assert (g.cpu_base_cores, g.cpu_gain) == (pytest.approx(0.05), pytest.approx(0.5))
    assert (g.mem_base_mib, g.mem_gain) == (pytest.approx(100.0), pytest.approx(1.0))
    assert g.boot_s == 6.0 and info["booted_samples"] == 4 and info["cpu_residual_median"] == 0


def test_samples_of_booting_or_paused_vms_are_left_out():
    good = [row(vm=f"v{i}", load=x, used=0.05 + 0.5 * x) for i, x in enumerate([0.0, 0.2, 0.4])]
    bad = [row(vm="young", age=8.0, used=3.0),             # younger than boot 6 + period 5
           row(vm="p", state="paused", used=3.0),
           row(vm="nb", boot=0.0, used=3.0)]               # never answered: no boot time
    g, info = twin_fit.fit(good + bad, period_s=5.0)
    assert g.cpu_gain == pytest.approx(0.5) and info["booted_samples"] == 3


def test_without_spread_the_gain_is_one_and_the_base_the_median_excess():
    rows = [row(vm=f"v{i}", load=0.1, used=u, mem=128, rss=r) for i, (u, r) in
            enumerate([(0.15, 230.0), (0.16, 240.0), (0.30, 250.0)])]
    g, _ = twin_fit.fit(rows, period_s=5.0)
    assert (g.cpu_gain, g.cpu_base_cores) == (1.0, pytest.approx(0.06))
    assert (g.mem_gain, g.mem_base_mib) == (1.0, pytest.approx(112.0))


def test_boot_cpu_is_the_median_first_sample_after_boot():
    rows = [row(vm=f"v{i}", load=x, used=0.05 + 0.5 * x) for i, x in enumerate([0.0, 0.2, 0.4])]
    rows += [row(vm="v0", age=8.0, used=0.30), row(vm="v1", age=9.0, used=0.40), row(vm="v2", age=10.0, used=0.2)]
    g, info = twin_fit.fit(rows, period_s=5.0)
    assert g.boot_cpu_cores == pytest.approx(0.30) and info["boot_cpu_samples"] == 3


def test_too_few_samples_is_refused():
    with pytest.raises(ValueError, match="at least 3"):
        twin_fit.fit([row(), row(age=8.0)], period_s=5.0)


def test_link_rate_is_bytes_over_sending_time():
    ok = "MIGRATION_OUTCOME_SUCCEEDED"
    recs = [{"outcome": ok, "memoryProcessedBytes": str(100 * 2**20), "timeElapsedMs": 5010, "setupTimeMs": 10},
            {"outcome": ok, "memoryProcessedBytes": str(60 * 2**20), "timeElapsedMs": 2010, "setupTimeMs": 10},
            {"outcome": ok, "memoryProcessedBytes": str(80 * 2**20), "timeElapsedMs": 4010, "setupTimeMs": 10},
            {"outcome": "MIGRATION_OUTCOME_FAILED", "memoryProcessedBytes": "1", "timeElapsedMs": 1}]
    rate, info = twin_fit.fit_link(recs)
    assert rate == pytest.approx(20.0) and info == {"migrations": 3, "min_mib_s": 20.0, "max_mib_s": 30.0,
                                                    "setup_ms": 0.0}
    assert twin_fit.fit_link(recs[3:]) == (None, {"migrations": 0})
    # the model's own setup term comes off the time first: 100 MiB in 5.01 s less 1.01 s -> 25 MiB/s
    assert twin_fit.fit_link(recs[:1], setup_ms=1010.0)[0] == pytest.approx(25.0)


def test_guest_overhead_arithmetic_and_range():
    g = GuestOverhead(cpu_base_cores=0.06, cpu_gain=0.5, mem_base_mib=110, mem_gain=1.0)
    assert g.cpu(0.2) == pytest.approx(0.16) and g.mem(128) == 238 and not g.identity
    assert GuestOverhead().identity and GuestOverhead().cpu(0.3) == 0.3
    with pytest.raises(Exception, match="guest.cpu_gain"):
        GuestOverhead(cpu_gain=-1).validate()


def test_moved_guests_memory_and_the_cpu_noise():
    # v0..v3 never move: rss = 110 + mem; m moves from h1 to h2 at t=120 and then holds mem + 57.
    # A guest that migrated in has no age on its new host (NaN) and no boot time there (0).
    rows = [row(vm=f"v{i}", load=x, used=0.05 + 0.5 * x + e, mem=m, rss=110 + m)
            for i, (x, m, e) in enumerate([(0.0, 96, 0.01), (0.2, 128, -0.01), (0.4, 96, 0.01), (0.8, 128, -0.01)])]
    rows += [row(vm="m", t=60, mem=128, rss=238, used=0.1, load=0.1),
             dict(row(vm="m", t=120, mem=128, rss=185, used=0.1, load=0.1, age="nan", boot=0.0), host="h2"),
             dict(row(vm="m", t=180, mem=128, rss=185, used=0.1, load=0.1, age="nan", boot=0.0), host="h2")]
    assert twin_fit.moved_flags(rows)[-3:] == [False, True, True]
    g, info = twin_fit.fit(rows, period_s=5.0)
    assert g.mem_base_mib == pytest.approx(110.0) and g.moved_mem_base_mib == pytest.approx(57.0)
    assert info["moved_samples"] == 2 and info["booted_samples"] == 7
    assert g.cpu_noise_sd > 0.005 and g.host_cpu_cap
    assert g.mem(128, moved=True) == pytest.approx(185.0) and g.mem(128) == pytest.approx(238.0)
