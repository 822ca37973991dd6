"""A small clusterdata-2011-2 sample for the trace-replay tests, written line by line here (not
with cellbed's own TraceWriter, so the reader is checked against the format, not against its
inverse): no header, the column order of digest §E.2, empty optional fields, gzip parts named
``part-NNNNN-of-MMMMM.csv.gz``. Times are µs; machines are there at 0, tasks arrive from 1 s.

The story (seconds):

* machines m1 (1.0, 1.0), m2 and m3 (0.25, 0.25), m4 with no capacity (a missing field);
  attribute ``rack``: a on m1, b on m2, c on m3 and m4. m3 grows to (1.0, 1.0) at 200 (its
  UPDATE row comes after m1's REMOVE row: out of order); m1 leaves at 300.
* A (job 10/0) and B (10/1) run on m1 in the trace: at 300 A is LOST, B is EVICTed and
  submitted again at 320, runs on m2 and finishes at 900.
* D (20/0) asks for 0.6 CPU: only m1 can hold it until m3 grows; the trace has it on m2 until
  it finishes at 1500, so its fate at 300 is not the trace's to give: a model that put it on
  m1 must place it again (on m3).
* E (30/0) is constrained to rack z (no machine) until a constraint update at 100 sets rack b.
* F (40/0) wants 0.3 CPU on rack b (m2 has 0.25) until an UPDATE_PENDING at 150 asks for 0.1.
* G (50/0) runs, and an UPDATE_RUNNING at 250 doubles its request.
* H (60/0) runs from 10 to 50 on rack a; its constraint row comes after a row at 100 (out of
  order): a reader that clamped it would find H ended and drop it.
* I (70/0) has no CPU request (a missing field); its SUBMIT row comes after a row at 50.
* one task_events row has no priority (malformed); usage rows include a task never submitted,
  one out of start order, and one that closes with A's LOST.
"""
from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

S = 1_000_000
TASK_EVENT_COLUMNS = 13


def usage(start_s, end_s, job, idx, machine, cpu, mem) -> str:
    cols = [start_s * S, end_s * S, job, idx, machine, cpu, mem, mem, "", "", mem, "", "", cpu, "", "", "", "", "",
            cpu]
    return ",".join(str(c) for c in cols)


def task(t_s, job, idx, etype, machine="", cpu="0.02", mem="0.02", prio="5", user="u1") -> str:
    return f"{int(t_s * S)},,{job},{idx},{machine},{etype},{user},1,{prio},{cpu},{mem},0,0"


SUBMIT, SCHEDULE, EVICT, FINISH, LOST, UPDATE_PENDING, UPDATE_RUNNING = 0, 1, 2, 4, 6, 7, 8

TABLES = {
    "machine_events": [
        "0,1,0,pa,1.0,1.0",
        "0,2,0,pa,0.25,0.25",
        "0,3,0,pa,0.25,0.25",
        "0,4,0,pa,,",                                   # no capacity: a missing field
        f"{300 * S},1,1,,,",                            # m1 leaves
        f"{200 * S},3,2,pa,1.0,1.0",                    # m3 grows (out of order: after 300)
    ],
    "machine_attributes": [
        "0,1,rack,a,0",
        "0,2,rack,b,0",
        "0,3,rack,c,0",
        "0,4,rack,c,0",
        f"{500 * S},2,kernel,5,0",
        f"{400 * S},4,rack,,1",                         # deletion at 400 (out of order: after 500)
    ],
    "task_events": [
        task(1, 10, 0, SUBMIT, cpu="0.05", mem="0.05"), task(1, 10, 0, SCHEDULE, 1, cpu="0.05", mem="0.05"),
        task(1, 10, 1, SUBMIT, cpu="0.05", mem="0.05"), task(1, 10, 1, SCHEDULE, 1, cpu="0.05", mem="0.05"),
        task(1, 20, 0, SUBMIT, cpu="0.6", mem="0.1"), task(1, 20, 0, SCHEDULE, 2, cpu="0.6", mem="0.1"),
        task(1, 50, 0, SUBMIT), task(1, 50, 0, SCHEDULE, 3),
        task(2, 30, 0, SUBMIT, cpu="0.05", mem="0.05"),
        task(3, 40, 0, SUBMIT, cpu="0.3", mem="0.05"),
        task(10, 60, 0, SUBMIT), task(10, 60, 0, SCHEDULE, 1),
        task(50, 60, 0, FINISH, 1),
        task(20, 70, 0, SUBMIT, cpu=""),                # no CPU request; out of order (after 50)
        task(40, 80, 0, SUBMIT, prio=""),               # no priority: malformed
        task(150, 40, 0, UPDATE_PENDING, cpu="0.1", mem="0.05"),
        task(250, 50, 0, UPDATE_RUNNING, 3, cpu="0.04", mem="0.03"),
        task(300, 10, 0, LOST, 1, cpu="0.05", mem="0.05"),
        task(300, 10, 1, EVICT, 1, cpu="0.05", mem="0.05"),
        task(320, 10, 1, SUBMIT, cpu="0.05", mem="0.05"),
        task(330, 10, 1, SCHEDULE, 2, cpu="0.05", mem="0.05"),
        task(900, 10, 1, FINISH, 2, cpu="0.05", mem="0.05"),
        task(1500, 20, 0, FINISH, 2, cpu="0.6", mem="0.1"),
    ],
    "task_constraints": [
        f"{2 * S},30,0,0,rack,z",                       # E: a rack no machine has
        f"{3 * S},40,0,0,rack,b",                       # F
        f"{100 * S},30,0,0,rack,b",                     # E's constraint update
        f"{10 * S},60,0,0,rack,a",                      # H (out of order: after 100)
    ],
    "task_usage": [
        usage(1, 300, 10, 0, 1, 0.01, 0.01),            # closes with A's LOST
        usage(1, 300, 20, 0, 2, 0.2, 0.05),
        usage(300, 600, 20, 0, 2, 0.25, 0.05),
        usage(100, 400, 999, 0, 2, 0.1, 0.1),           # a task never submitted; out of start order
    ],
}

# what a reader must count, and where the first example is (1-based lines of the files above)
EXPECTED_ANOMALIES = {
    "out_of_order_rows": (5, "machine_events/part-00000-of-00001.csv.gz:6"),
    "machine_missing_capacity": (1, "machine_events/part-00000-of-00001.csv.gz:4"),
    "missing_request": (1, "task_events/part-00000-of-00001.csv.gz:14"),
    "malformed_rows.task_events": (1, "task_events/part-00000-of-00001.csv.gz:15"),
    "usage_unknown_task": (1, "task_usage/part-00000-of-00001.csv.gz:4"),
    "usage_after_remove": (1, "task_usage/part-00000-of-00001.csv.gz:1"),
}
LOST, EVICTED, RESUBMIT_S, REMOVE_S, GROW_S = "t10-0", "t10-1", 320.0, 300.0, 200.0
BIG, CONSTRAINED, SHRUNK, GROWN, SHORT = "t20-0", "t30-0", "t40-0", "t50-0", "t60-0"


@dataclasses.dataclass(frozen=True)
class Sample:
    root: Path
    constraint_rows: int


def write_sample(root: Path) -> Sample:
    """Write the sample above under *root*; every table in one gzip part."""
    for table, lines in TABLES.items():
        d = root / table
        d.mkdir(parents=True, exist_ok=True)
        (d / "part-00000-of-00001.csv.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return Sample(root, len(TABLES["task_constraints"]))
