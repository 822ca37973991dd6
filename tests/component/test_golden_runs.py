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

**The same bytes on every x86-64 machine.** numpy picks its SIMD kernels by the processor it runs
on, and its sums add in a different order with AVX-512 than with AVX2: the fixtures recorded on
an AVX-512 machine differed here, on an AVX2 one, in the 14th digit of a tick's mean (then in
the trajectory). Each run therefore goes in a process of its own with numpy's dispatch held to
its x86-64-v2 baseline (``NPY_DISABLE_CPU_FEATURES``), which every machine numpy 2 runs on has.
The fixtures were re-recorded that way, from unchanged code.
"""
import csv
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "golden"
RUNS = {
    "smoke": ["scenarios/smoke.toml"],
    "masb300": ["scenarios/masb-table3-masb.toml", "--set", "cell.nodes=300", "--set", "run.duration_s=1800"],
    "megha300": ["scenarios/megha-10k.toml", "--set", "cell.nodes=300", "--set", "run.duration_s=1800",
                 "--set", "policy.megha.gms=2", "--set", "policy.megha.lms=3"],
}
FILES = ("ticks.csv", "migrations.csv", "allocations.csv")
BASELINE_ONLY = "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"
"""numpy 2.4's dispatch targets above its x86-64-v2 baseline (``numpy.show_runtime()`` lists them)."""


def cellctl(args: list[str]) -> None:
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": BASELINE_ONLY}
    r = subprocess.run([sys.executable, "-m", "cellbed.cli.main", *args], env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"cellctl {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-2000:]}"


def _without_wall(path: Path) -> str:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if rows and "wall_s" in rows[0]:
        i = rows[0].index("wall_s")
        rows = [r[:i] + r[i + 1:] for r in rows]
    return "".join(",".join(r) + "\n" for r in rows)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fixtures hold x86-64 baseline arithmetic")
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
