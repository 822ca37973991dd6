"""Issue 16: ``cell.arrival_window`` bounds how many new tasks' placements are in flight at once.

Without it the warm start sends every initial task's AllocateTask at t=0 (about 11 per node), so
at 100,000 nodes over a million placements, each with its messages and timers, are alive together.
With it the stream waits for room and the warm start goes in waves. It changes behaviour (the
brokers place the warm start in another order; docs/results/scale-benchmark.md has the measured
shift), so it is off by default and not part of the equivalent fast path. This checks the
mechanism on a small cell: the bound holds and is reached, the stream did wait, every task of the
stream is added and none is lost or duplicated, and the same stream without a window really had
more in flight.
"""
import pytest

from cellbed.domain.errors import InvalidArgument
from cellbed.experiment.runner import model_cell_params
from cellbed.experiment.scenario.file import load_scenario
from cellbed.model.cell import ModelCell
from cellbed.runtime.clock import run_virtual
from tests.component.test_scale_equivalence import SCENARIO

WINDOW = 300


def _run(window: int):
    # 100 nodes for 3 minutes: what is checked is the warm start (about 1,100 placements at once
    # without the window: 3.6 x WINDOW) and the ticks after it
    sc = load_scenario(SCENARIO, ["cell.nodes=100", "run.duration_s=180", "run.seed=4",
                                  f"cell.arrival_window={window}"])
    cell = ModelCell(model_cell_params(sc))
    return run_virtual(cell.run()), cell.frontend


def test_the_window_bounds_placements_in_flight_and_loses_no_task():
    s, front = _run(WINDOW)
    s0, front0 = _run(0)
    print(f"\nin flight at most: {front.arrivals_in_flight_max} (window {WINDOW}), "
          f"{front0.arrivals_in_flight_max} without; the stream waited {front.counters['arrival_window_waits']} "
          f"times; tasks {s.tasks_added} / {s0.tasks_added}, pending at the end {s.tasks_pending} / {s0.tasks_pending}")
    assert front0.arrivals_in_flight_max > 2 * WINDOW          # the warm start really is one burst
    assert front.arrivals_in_flight_max == WINDOW              # bounded, and the bound was reached
    assert front.counters["arrival_window_waits"] > 0
    assert "arrival_window_waits" not in front0.counters
    assert s.tasks_added == s0.tasks_added                     # the whole stream, nothing skipped
    assert not s.lost and not s.duplicated and not s0.lost and not s0.duplicated
    assert s.tasks_live == s0.tasks_live


def test_a_negative_window_is_refused_with_its_range():
    with pytest.raises(InvalidArgument, match=r"cell.arrival_window.*0"):
        load_scenario(SCENARIO, ["cell.arrival_window=-1"])
