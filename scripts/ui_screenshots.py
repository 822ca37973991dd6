"""Screenshots of `cellctl ui`'s views for docs/ui.md, taken in headless Chromium from a real run:
the run view (first screen and whole page) of a model run made now (or RESULTS given), the
comparison view of docs/results/compare-5host (a real cell beside its model twin), and, with
--cell NAME, the live view of that cell as it is (the script changes nothing in it). The PNGs go
to --out (default build/ui-screenshots, git-ignored): they are not committed.

    .venv/bin/python scripts/ui_screenshots.py
    .venv/bin/python scripts/ui_screenshots.py results/smoke --cell demo --out /tmp/shots
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cellbed.cell.record import DEFAULT_STATE_ROOT  # noqa: E402
from tests import ui_browser as ub  # noqa: E402

COMPARE = REPO / "docs" / "results" / "compare-5host"


def model_run(out: Path) -> Path:
    if not (out / "events.jsonl").exists() or b"run_completed" not in (out / "events.jsonl").read_bytes()[-4096:]:
        print(f"making a 200-node model run into {out}", flush=True)
        subprocess.run([sys.executable, "-m", "cellbed.cli.main", "run", "scenarios/smoke.toml", "--set",
                        "run.duration_s=1800", "--out", str(out), "--overwrite", "--quiet", "--no-report"],
                       cwd=REPO, check=True)
    return out


def shoot(d, url: str, mark: str, name: str, out: Path) -> list[Path]:
    d.get(url)
    d.refresh()                                  # a new route in the same page: load it afresh
    ub.wait(d, lambda d: d.execute_script(f"return '{mark}' in window.cellbed.marks"), 120, name)
    ub.wait(d, lambda d: d.execute_script("return !document.querySelector('#host-cards p.waiting')"), 60,
            "every host's state")
    d.execute_script("window.scrollTo(0, 0)")
    first = out / f"{name}.png"
    d.save_screenshot(str(first))
    h = d.execute_script("return document.documentElement.scrollHeight")
    ub.viewport(d, 1280, max(800, min(int(h) + 40, 8000)))
    full = out / f"{name}-full.png"
    d.save_screenshot(str(full))
    ub.viewport(d, 1280, 800)
    return [first, full]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="*", help="results folders (default: a 200-node model run made now)")
    ap.add_argument("--cell", default="", help="also the live view of this cell (it must be up)")
    ap.add_argument("--state-root", default=os.environ.get("CELLBED_STATE_ROOT", DEFAULT_STATE_ROOT))
    ap.add_argument("--out", default=str(REPO / "build" / "ui-screenshots"))
    a = ap.parse_args()
    why = ub.missing()
    if why:
        raise SystemExit(f"ui_screenshots: {why}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = a.results or [str(model_run(out / "run"))]
    args = [*runs, str(COMPARE)] + (["--cell", a.cell, "--state-root", a.state_root] if a.cell else ["--no-live"])
    shots: list[Path] = []
    with ub.UiProcess(args) as ui, tempfile.TemporaryDirectory(prefix="ui-shots-") as tmp:
        d = ub.chromium(ub.fresh_profile(Path(tmp)))
        try:
            base = ui.url
            shots += shoot(d, base + "#run/0", "distributions-painted", "run-view", out)
            shots += shoot(d, base.split("?")[0] + "#compare/0", "compare-painted", "compare-view", out)
            real = len(runs)                     # the compare folder's real run follows the RESULTS
            shots += shoot(d, base.split("?")[0] + f"#run/{real}", "hosts-painted", "real-run-view", out)
            if a.cell:
                shots += shoot(d, base.split("?")[0] + "#live", "live-painted", "live-view", out)
        finally:
            d.quit()
    for p in shots:
        print(p)


if __name__ == "__main__":
    main()
