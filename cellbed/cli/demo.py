"""The demo cell: 3 namespace hosts, a few VMs with different loads, one live migration shown
with progress and measured costs, then a clean teardown of exactly what was created."""
from __future__ import annotations

import argparse

from cellbed.cli.main import main as cellctl


def run(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cellbed demo")
    ap.add_argument("--cell", default="demo")
    ap.add_argument("--subnet", default="10.231.0.0/24")
    ap.add_argument("--keep", action="store_true", help="leave the cell up at the end")
    ap.add_argument("--bench", action="store_true", help="run the migration benchmark instead of the tour")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    c = ["--cell", a.cell]
    step = lambda title: print(f"\n\033[1m### {title}\033[0m", flush=True)  # noqa: E731
    step("cellctl cell up --hosts 3")
    cellctl(c + ["cell", "up", "--hosts", "3", "--subnet", a.subnet, "--host-cpus", "0.6",
                 "--host-mem-mib", "1024", "--monitor-period-s", "2"])
    try:
        if a.bench:
            step("cellctl bench migration " + " ".join(a.rest))
            cellctl(c + ["bench", "migration", *a.rest])
            return
        step("cellctl cell status")
        cellctl(c + ["cell", "status"])
        for name, host, load, dirty, wss in (("web", "h1", "0.3", "8", "32"), ("batch", "h1", "0.1", "32", "48"),
                                             ("idle", "h2", "0.02", "0", "16")):
            step(f"cellctl vm start --host {host} --name {name} --cpu-load {load} --dirty-mib-s {dirty}")
            cellctl(c + ["vm", "start", "--host", host, "--name", name, "--cpu-load", load,
                         "--dirty-mib-s", dirty, "--wss-mib", wss])
        step("cellctl vm list")
        cellctl(c + ["vm", "list"])
        step("cellctl vm migrate batch --to h3   (live, progress below)")
        cellctl(c + ["vm", "migrate", "batch", "--to", "h3"])
        step("cellctl vm migrate idle --to h3 --max-downtime-ms 50")
        cellctl(c + ["vm", "migrate", "idle", "--to", "h3", "--max-downtime-ms", "50"])
        step("cellctl vm migrate web --to h1   (refused: already there)")
        try:
            cellctl(c + ["vm", "migrate", "web", "--to", "h1"])
        except SystemExit as e:
            print(f"(exit status {e.code}, as expected)")
        step("cellctl nodes")
        cellctl(c + ["nodes"])
        step("cellctl migrations")
        cellctl(c + ["migrations"])
    finally:
        if not a.keep:
            step("cellctl cell down")
            cellctl(c + ["cell", "down"])


if __name__ == "__main__":
    run()
