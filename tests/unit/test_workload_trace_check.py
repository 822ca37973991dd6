"""The check a trace folder passes before a run (cellbed.workload.trace_check): complete part
series, readable, non-empty, complete gzip, the right column count on every row; the first
problem is one InvalidArgument naming the file, the line and the problem."""
import gzip

import pytest

from cellbed.domain.errors import InvalidArgument
from cellbed.workload.trace_check import check_trace

MACHINE = "0,1,0,p,0.5,0.5"
USAGE20 = ",".join(["0", "300000000", "7", "0", "1"] + ["0.1"] * 15)
USAGE19 = ",".join(USAGE20.split(",")[:19])


def put(root, table, data: bytes, name="part-00000-of-00001.csv.gz"):
    d = root / table
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)
    return d / name


def gz(*lines: str) -> bytes:
    return gzip.compress(("\n".join(lines) + "\n").encode())


def test_a_good_folder_passes_with_its_parts_and_rows(tmp_path):
    put(tmp_path, "machine_events", gz(MACHINE, "", MACHINE))                  # a blank line is skipped
    put(tmp_path, "task_usage", gz(USAGE20, USAGE19), "part-00000-of-00002.csv.gz")   # 2011-2 and 2011-1 layouts
    put(tmp_path, "task_usage", gzip.compress(b"") + gz(USAGE20), "part-00001-of-00002.csv.gz")  # two gzip members
    put(tmp_path, "machine_attributes", b'0,1,"a,b",1,0\n', "part-00000-of-00001.csv")   # plain csv, quoted field
    c = check_trace(tmp_path)
    assert c.parts == {"machine_events": 1, "machine_attributes": 1, "task_usage": 2}
    assert c.rows == {"machine_events": 2, "machine_attributes": 1, "task_usage": 3}


@pytest.mark.parametrize("setup, message", [
    (lambda r: put(r, "machine_events", gz(MACHINE), "part-00001-of-00002.csv.gz"),
     "machine_events/part-00000-of-00002.csv.gz: missing (part 0 of 2 of machine_events)"),
    (lambda r: put(r, "machine_events", gz(MACHINE), "notes.csv"), "notes.csv: not a machine_events part file name"),
    (lambda r: (put(r, "machine_events", gz(MACHINE), "part-00000-of-00001.csv.gz"),
                put(r, "machine_events", gz(MACHINE), "part-00001-of-00002.csv.gz")), "disagree on the number of parts"),
    (lambda r: put(r, "machine_events", b""), "empty file (0 bytes)"),
    (lambda r: put(r, "machine_events", gzip.compress(b"")), "empty: the gzip stream holds no data"),
    (lambda r: put(r, "machine_events", gz("")), "no rows (only blank lines)"),
    (lambda r: put(r, "machine_events", MACHINE.encode() + b"\n"), "not a gzip file"),
    (lambda r: put(r, "machine_events", gz(MACHINE), "part-00000-of-00001.csv"), "gzip data in a file named .csv"),
    (lambda r: put(r, "machine_events", gz(*[MACHINE] * 2000)[:-30]), "truncated"),
    (lambda r: put(r, "machine_events", gz(MACHINE)[:-8] + b"\0\0\0\0" + gz(MACHINE)[-4:]), "corrupt gzip data"),
    (lambda r: put(r, "machine_events", gz(MACHINE, MACHINE, "0,1,0,p,0.5")), ".csv.gz:3: 5 columns; machine_events rows have 6"),
    (lambda r: put(r, "task_usage", gz(USAGE20, USAGE20 + ",x")), ":2: 21 columns; task_usage rows have 19 or 20"),
    (lambda r: put(r, "machine_events", b"\xff\xfe\n", "part-00000-of-00001.csv"), "not UTF-8 text"),
    (lambda r: (r / "task_events").mkdir(), "the task_events folder holds no part files"),
    (lambda r: None, "no GCD-2011 tables"),
])
def test_each_problem_is_one_line_naming_the_file(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(InvalidArgument) as e:
        check_trace(tmp_path)
    text = str(e.value)
    assert message in text and "\n" not in text and text.startswith(f"trace file {tmp_path}")


def test_a_missing_folder(tmp_path):
    with pytest.raises(InvalidArgument, match="no such trace folder"):
        check_trace(tmp_path / "absent")
