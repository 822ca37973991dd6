"""Golden runs (issue 11): seeded model-cell runs must give byte-identical results files after
any re-homing of the code. The fixtures in tests/fixtures/golden/ were recorded before the move,
from the commit that introduced this test:

    cellctl run scenarios/smoke.toml --out OUT --no-report
    cellctl run scenarios/masb-table3-masb.toml --set cell.nodes=300 --set run.duration_s=1800 ...
    cellctl run scenarios/megha-10k.toml --set cell.nodes=300 --set run.duration_s=1800 \
        --set policy.megha.gms=2 --set policy.megha.lms=3 ...

Only ``ticks.csv``'s ``wall_s`` column (wall-clock seconds, different on every run) is left out
of the comparison. A legitimate trajectory change (an ordering fix) must re-record the fixtures
with ``CELLBED_GOLDEN_RECORD=1`` and say why in the commit.
"""
import csv
import os
from pathlib import Path

import pytest

from cellbed.cli.main import main as cellctl

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "golden"
RUNS = {
    "smoke": ["scenarios/smoke.toml"],
    "masb300": ["scenarios/masb-table3-masb.toml", "--set", "cell.nodes=300", "--set", "run.duration_s=1800"],
    "megha300": ["scenarios/megha-10k.toml", "--set", "cell.nodes=300", "--set", "run.duration_s=1800",
                 "--set", "policy.megha.gms=2", "--set", "policy.megha.lms=3"],
}
FILES = ("ticks.csv", "migrations.csv", "allocations.csv")


def _without_wall(path: Path) -> str:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if rows and "wall_s" in rows[0]:
        i = rows[0].index("wall_s")
        rows = [r[:i] + r[i + 1:] for r in rows]
    return "".join(",".join(r) + "\n" for r in rows)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_seeded_run_matches_its_golden_files(name, tmp_path):
    out = tmp_path / name
    args = RUNS[name]
    cellctl(["run", str(REPO / args[0]), *args[1:], "--out", str(out), "--no-report", "--quiet"])
    for f in FILES:
        got = _without_wall(out / f)
        want_path = GOLDEN / name / f
        if os.environ.get("CELLBED_GOLDEN_RECORD") == "1":
            want_path.parent.mkdir(parents=True, exist_ok=True)
            want_path.write_text(got)
        want = want_path.read_text()
        assert got.count("\n") == want.count("\n"), f"{name}/{f}: {got.count(chr(10))} rows, golden {want.count(chr(10))}"
        if got != want:
            g, w = got.splitlines(), want.splitlines()
            k = next(i for i, (a, b) in enumerate(zip(g, w)) if a != b)
            pytest.fail(f"{name}/{f} differs first at line {k + 1}:\n  got    {g[k]}\n  golden {w[k]}")
