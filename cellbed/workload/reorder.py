"""Bounded reordering of a nearly time-ordered stream of rows (pure: no I/O).

A GCD-2011 table is sorted by time, but not perfectly: a row may come after rows with a later
time. :func:`reorder` puts such rows back in time order, holding at most ``window`` (in the
key's unit, µs for the trace) of rows: a row is released once the latest key seen is at least
``window`` past it. Rows with equal keys keep their input order (a stable sort).

A row that comes later than the window allows (its key is below that of a row already
released) cannot be put in order any more: it is released at once with its key raised to the
last released key (the old clamp), and counted as *late*. With ``window = 0`` every
out-of-order row is late.

    stats = ReorderStats()
    for row in reorder(rows, window=600_000_000, stats=stats): ...
    stats.out_of_order, stats.late, stats.max_distance     # rows moved, rows clamped, µs

``max_distance`` is the largest distance between a row's key and the latest key seen before
it: the window that would have put every row in order.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterable, Iterator

__all__ = ["ReorderStats", "reorder"]


@dataclass
class ReorderStats:
    """What :func:`reorder` did (filled as the rows go through)."""

    rows: int = 0
    out_of_order: int = 0          # rows whose key is below the latest key seen before them
    late: int = 0                  # ...of which, rows beyond the window: released with a raised key
    max_distance: int = 0          # the largest such gap (0 when the input was in order)
    first_out_of_order: tuple | None = None    # the first out-of-order row, as it came in
    first_late: tuple | None = None            # the first late row, as it came in


def _with_key(row: tuple, index: int, value: int) -> tuple:
    return row[:index] + (value,) + row[index + 1:]


def reorder(rows: Iterable[tuple], window: int, *, index: int = 0,
            stats: ReorderStats | None = None) -> Iterator[tuple]:
    """*rows* (tuples whose element *index* is an int key) in key order, holding at most
    *window* of keys back; see the module docstring.

    The rows held are two parallel lists sorted by key (keys, rows) read from ``head``: a row in
    order is appended, a row out of order is inserted after the equal keys already held
    (stable), and released rows are dropped from the front in blocks."""
    if window < 0:
        raise ValueError(f"reorder window must be >= 0, got {window!r}")
    st = stats if stats is not None else ReorderStats()
    keys: list[int] = []
    held: list[tuple] = []
    head = 0
    high = None           # latest key seen
    released = None       # key of the last row released
    for row in rows:
        k = row[index]
        st.rows += 1
        if high is None or k >= high:
            high = k
            keys.append(k)
            held.append(row)
        else:
            st.out_of_order += 1
            if st.first_out_of_order is None:
                st.first_out_of_order = row
            st.max_distance = max(st.max_distance, high - k)
            if released is not None and k < released:
                st.late += 1
                if st.first_late is None:
                    st.first_late = row
                yield _with_key(row, index, released)
                continue
            i = bisect.bisect_right(keys, k, head)
            keys.insert(i, k)
            held.insert(i, row)
        horizon = high - window
        end = len(keys)
        while head < end and keys[head] <= horizon:
            released = keys[head]
            yield held[head]
            head += 1
        if head > 4096 and head * 2 > end:
            del keys[:head], held[:head]
            head = 0
    for i in range(head, len(keys)):
        released = keys[i]
        yield held[i]
