"""The trace reader's bounded reorder window (cellbed.workload.reorder): rows within the window
come out in key order, equal keys keep their input order, rows beyond it are released with a
raised key and counted as late, and the largest distance is kept."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellbed.workload.reorder import ReorderStats, reorder


def run(keys, window, index=0):
    stats = ReorderStats()
    rows = [(k, i) if index == 0 else (i, k) for i, k in enumerate(keys)]
    return list(reorder(rows, window, index=index, stats=stats)), stats


def test_an_ordered_stream_passes_unchanged():
    out, s = run([0, 1, 1, 5, 9], 100)
    assert out == [(0, 0), (1, 1), (1, 2), (5, 3), (9, 4)]
    assert (s.rows, s.out_of_order, s.late, s.max_distance) == (5, 0, 0, 0)
    assert s.first_out_of_order is None and s.first_late is None


def test_a_row_within_the_window_is_put_back_in_order():
    # 5 comes after 9: 9 − 5 = 4 ≤ window 10, so 9 is still held when 5 arrives
    out, s = run([0, 9, 5, 12], 10)
    assert [k for k, _ in out] == [0, 5, 9, 12]
    assert (s.out_of_order, s.late, s.max_distance) == (1, 0, 4)
    assert s.first_out_of_order == (5, 2)


def test_equal_keys_keep_their_input_order():
    out, _ = run([3, 7, 3, 3, 7], 10)
    assert out == [(3, 0), (3, 2), (3, 3), (7, 1), (7, 4)]


def test_a_row_beyond_the_window_is_released_at_once_with_a_raised_key():
    # window 3: 20 releases 9 (20 − 3 ≥ 9); 5 then comes after a released 9 and is raised to 9
    out, s = run([0, 9, 20, 5], 3)
    assert out == [(0, 0), (9, 1), (9, 3), (20, 2)]
    assert (s.out_of_order, s.late, s.max_distance) == (1, 1, 15)
    assert s.first_late == (5, 3)            # as it came in, before its key was raised


def test_window_zero_is_the_old_clamp():
    out, s = run([0, 9, 5, 12], 0)
    assert [k for k, _ in out] == [0, 9, 9, 12]
    assert (s.out_of_order, s.late) == (1, 1)


def test_the_key_may_be_any_column():
    out, s = run([4, 2, 8], 10, index=1)
    assert out == [(1, 2), (0, 4), (2, 8)] and s.out_of_order == 1


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError, match="window must be >= 0"):
        list(reorder([(1,)], -1))


def test_the_window_bounds_what_is_held():
    """Rows are released as soon as the window has passed them: with window 10 and one row per
    key unit, at most 11 rows are ever held back."""
    held, worst = [], 0
    source = ((k,) for k in range(100))

    def counting():
        for r in source:
            held.append(r)
            yield r
    released = 0
    for _ in reorder(counting(), 10):
        released += 1
        worst = max(worst, len(held) - released)
    assert worst <= 11 and released == 100


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1000), max_size=60), st.integers(0, 1200))
def test_property_output_is_sorted_and_complete(keys, window):
    out, s = run(keys, window)
    ks = [k for k, _ in out]
    assert ks == sorted(ks)                                   # always time-ordered
    assert sorted(i for _, i in out) == list(range(len(keys)))   # nothing lost, nothing doubled
    if window >= max([0] + [max(keys[:i] or [k]) - k for i, k in enumerate(keys)]):
        assert s.late == 0 and ks == sorted(keys)             # a wide enough window loses no time
    assert s.max_distance == max([0] + [max(keys[:i] or [k]) - k for i, k in enumerate(keys)])
