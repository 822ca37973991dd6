"""Table tests of the six policies, with the arithmetic in the comments. They use Cellbed's public
API only, as the package does."""
import random

import numpy as np
import pytest

from cellbed.policy import api
from refarch_policies import allocation, sorting

# four machines: 4, 2, 4 and 2 cores, 8 GiB each; free cores 3.0, 1.0, 2.0, 2.0; the third is not offered
HOSTS = api.Hosts(offered=np.array([True, True, False, True]),
                  free=np.array([[3.0, 8192.0], [1.0, 8192.0], [2.0, 8192.0], [2.0, 8192.0]]),
                  capacity=np.array([[4.0, 8192.0], [2.0, 8192.0], [4.0, 8192.0], [2.0, 8192.0]]))
ONE_CORE = np.array([1.0, 512.0])


@pytest.mark.parametrize("policy, want", [
    (allocation.first_fit, 0),   # the first offered machine
    (allocation.best_fit, 1),    # cores left: 3-1=2, 1-1=0, (not offered), 2-1=1 -> the fewest is machine 1 (0)
    (allocation.worst_fit, 0),   # the most is machine 0 (2 left)
])
def test_allocation_table(policy, want):
    assert policy(HOSTS, ONE_CORE, random.Random(0)) == want


def test_ties_go_to_machine_order_and_none_offered_is_minus_one():
    tie = api.Hosts(np.array([True, True]), np.array([[2.0, 1.0], [2.0, 1.0]]), np.array([[4.0, 1.0], [4.0, 1.0]]))
    assert allocation.best_fit(tie, ONE_CORE, random.Random(0)) == 0 == allocation.worst_fit(tie, ONE_CORE, random.Random(0))
    none = api.Hosts(np.array([False]), np.array([[4.0, 1.0]]), np.array([[4.0, 1.0]]))
    assert [p(none, ONE_CORE, random.Random(0)) for p in (allocation.first_fit, allocation.best_fit,
                                                          allocation.worst_fit)] == [-1, -1, -1]


def _task(seq, arrival, duration):
    return api.QueuedTask(f"t{seq}", "u", seq, arrival, duration, (1.0, 512.0))


def test_sorting_keys():
    a, b = _task(1, 10.0, 300.0), _task(2, 5.0, 60.0)      # b was submitted first and is shorter
    assert sorting.fifo(a, None) == 10.0 and sorting.fifo(b, None) == 5.0        # b first
    assert sorting.srtf(a, None) == 300.0 and sorting.srtf(b, None) == 60.0      # b first
    r1, r2 = random.Random(7), random.Random(7)
    assert sorting.random_order(a, r1) == random.Random(7).random()               # the rng's next draw
    assert sorting.random_order(a, r2) == sorting.random_order(b, random.Random(7))   # not the task's fields
