"""The numbers cellctl compare puts side by side (cellbed/experiment/compare/table.py), on a
hand-made tick table whose averages are worked out here."""
import math

import numpy as np
import pytest

from cellbed.experiment.compare import table as ct


def ticks():
    # 4 ticks of a 4-host cell
    return {"t_s": np.array([60.0, 120.0, 180.0, 240.0]), "nodes": np.array([4, 4, 4, 4]),
            "idle": np.array([0, 0, 1, 0]), "overloaded": np.array([0, 1, 0, 2]),
            "sta": np.array([0, 0, 0, 0]), "ta": np.array([1, 0, 0, 0]), "pa": np.array([2, 1, 3, 1]),
            "da": np.array([1, 2, 0, 1]), "used_cpu": np.array([0.5, 0.6, 0.4, 0.5]),
            "used_mem": np.array([0.7, 0.7, 0.7, 0.7]), "tasks_running": np.array([3, 4, 4, 5]),
            "migrations_attempted": np.array([0, 2, 1, 0]), "migrations_succeeded": np.array([0, 1, 1, 0]),
            "migrations_refused": np.array([0, 1, 0, 0]), "migrations_failed": np.array([0, 0, 0, 0]),
            "bytes_moved": np.array([0, 2**20, 3 * 2**20, 0])}


def test_tick_metrics_arithmetic():
    m = {k: v for k, (_, v) in ct.tick_metrics(ticks()).items()}
    assert m["overloaded share"] == pytest.approx(100 * (0 + 0.25 + 0 + 0.5) / 4)      # 18.75 %
    assert m["idle share"] == pytest.approx(100 * 0.25 / 4)
    # PA among active hosts: 2/4, 1/3, 3/3, 1/2 -> mean 0.5833
    assert m["PA share"] == pytest.approx(100 * (0.5 + 1 / 3 + 1 + 0.5) / 4)
    assert m["TA share"] == pytest.approx(100 * 0.25 / 4)
    assert m["used CPU"] == pytest.approx(50.0) and m["used memory"] == pytest.approx(70.0)
    assert (m["migrations started"], m["migrations succeeded"], m["SAN refusals"]) == (3, 2, 1)
    assert m["bytes moved"] == 4.0 and m["VMs running"] == 4.0


@pytest.mark.parametrize("real, model, rel, over", [
    (10.0, 11.0, 0.10, False), (10.0, 11.5, 0.15, True), (10.0, 8.0, -0.20, True),
    (0.0, 1.0, None, False), (math.nan, 1.0, None, False)])
def test_relative_difference_and_tolerance(real, model, rel, over):
    r = ct.Row("m", "u", real, model)
    assert (r.rel == pytest.approx(rel)) if rel is not None else r.rel is None
    assert r.over is over
    assert ct.fmt_rel(r).endswith("⚠") is over


def test_windows_cut_the_run_in_equal_parts():
    w = ct.windows(ticks(), parts=2)
    assert [list(x["t_s"]) for x in w] == [[60.0, 120.0], [180.0, 240.0]]
    assert sum(len(x["t_s"]) for x in ct.windows(ticks(), parts=3)) == 4
