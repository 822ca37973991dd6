"""`cellctl ui`'s two figures of merit (issue 30), in headless Chromium (Debian's, via selenium):

* time to first paint of a 12,500-node results folder: from navigation start to the run view's
  aggregate drawn (summary, slider, figures near the top), and to the hosts' heat strip and
  histogram drawn (the replay at the last tick); each load with a fresh browser profile (cold cache,
  the chart library parsed anew). Goal: <= 2 s.
* live update latency: from an event's time on the node daemon (its Event.unix_s) to the page
  having drawn it, over server-sent events. By default the events come from two stand-in node
  daemons on loopback gRPC (tests/ui_fake_node.py: the UI's whole path, daemon stream to DOM);
  with --cell NAME, from a real cell's daemons for --watch-s seconds (make something happen
  meanwhile, e.g. `cellctl vm migrate`). Goal: <= 1 s.

    .venv/bin/python scripts/bench_ui.py                      # makes build/bench-ui/run-12500 once
    .venv/bin/python scripts/bench_ui.py --results DIR --repeat 5
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from cellbed.cell import cell_pki  # noqa: E402
from cellbed.cell.record import DEFAULT_STATE_ROOT, load_state  # noqa: E402
from cellbed.experiment import ResultsWriter, build_manifest, load_scenario  # noqa: E402
from cellbed.runtime.authz import Security  # noqa: E402
from cellbed.ui.live import LiveCell  # noqa: E402
from cellbed.ui.serve import Options, UiServer  # noqa: E402
from cellbed.v1 import node_pb2 as npb  # noqa: E402
from tests import ui_browser as ub  # noqa: E402
from tests.ui_fake_node import FakeNode  # noqa: E402


def make_run(out: Path, nodes: int, duration_s: float) -> Path:
    if (out / "events.jsonl").exists() and b"run_completed" in (out / "events.jsonl").read_bytes()[-4096:]:
        return out
    print(f"making a {nodes}-node model run into {out} (once; minutes on a busy box)", flush=True)
    subprocess.run([sys.executable, "-m", "cellbed.cli.main", "run", "scenarios/smoke.toml", "--set", f"cell.nodes={nodes}",
                    "--set", f"run.duration_s={duration_s}", "--out", str(out), "--overwrite", "--quiet", "--no-report"],
                   cwd=REPO, check=True)
    return out


def synthesize(out: Path, nodes: int, duration_s: float, seed: int = 1) -> Path:
    """A results folder of a *nodes*-node cell written by the real writer (ResultsWriter) with rows
    drawn from a seeded generator, at a model run's sizes (14 tasks a node, a migration a node per
    hour): minutes of model run saved where only the UI's reading of the files is measured."""
    if (out / "events.jsonl").exists() and b"run_completed" in (out / "events.jsonl").read_bytes()[-4096:]:
        return out
    print(f"writing a synthetic {nodes}-node results folder into {out}", flush=True)
    rng = np.random.default_rng(seed)
    sc = load_scenario(REPO / "scenarios" / "smoke.toml", [f"cell.nodes={nodes}", f"run.duration_s={duration_s}"])
    w = ResultsWriter(out, build_manifest(sc, extra={"synthetic": "scripts/bench_ui.py --synthesize"}), overwrite=True)
    tasks = nodes * 14
    start = np.sort(rng.uniform(0, duration_s, tasks))
    host = rng.integers(0, nodes, tasks)
    for i in range(tasks):
        w.allocation(task=f"t{i}-0", user=f"user{i % 300}", frontend="masb", arrival_s=float(start[i]),
                     start_s=float(start[i]) + 0.002, host=f"n{host[i]}", framework_queue_ms=0.0, processing_ms=0.0,
                     worker_queue_ms=0.0, communication_ms=2.0, total_ms=2.0, attempts=1)
    moves = int(nodes * duration_s / 3600)
    for k, i in enumerate(np.sort(rng.choice(tasks, moves, replace=False))):
        t = float(start[i]) + float(rng.uniform(0, duration_s - start[i]))
        w.migration(t_s=t, vm=f"t{i}-0", src=f"n{host[i]}", dst=f"n{rng.integers(0, nodes)}", outcome="succeeded",
                    san_id=f"n{host[i]}-{k}", time_ms=1340.0, downtime_ms=0.0, bytes=1 << 30)
    tick = 60.0
    for j in range(int(duration_s // tick)):
        c = rng.multinomial(nodes, [0.01, 0.002, 0.05, 0.15, 0.45, 0.338])
        placed = int(np.searchsorted(start, (j + 1) * tick))
        w.tick(t_s=(j + 1) * tick, nodes=nodes, idle=int(c[0]), overloaded=int(c[1]), sta=int(c[2]), ta=int(c[3]),
               pa=int(c[4]), da=int(c[5]), used_cpu=0.44, used_mem=0.63, req_cpu=0.97, req_mem=0.79,
               tasks_running=placed, tasks_pending=0)
    w.complete({"driver": "synthetic", "nodes": nodes, "simulated_s": duration_s})
    return out


class Server:
    """A UiServer on its own asyncio loop in a thread (the browser is driven from this one)."""

    def __init__(self, results: list[str], cell: str, state_root: str) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.fakes: list[FakeNode] = []
        self.srv = self.run(self._start(results, cell, state_root))

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    async def _start(self, results, cell, state_root) -> UiServer:
        if cell:
            st = load_state(cell, state_root)
            if st is None:
                raise SystemExit(f"bench_ui: no cell {cell!r} under {state_root}")
            live = LiveCell.from_state(st, cell_pki.admin(st))
        else:
            self.fakes = [FakeNode("h1"), FakeNode("h2")]
            self.fakes[0].add_vm("v1")
            live = LiveCell("bench", {f.host: await f.start() for f in self.fakes}, Security.insecure("bench"))
        srv = UiServer(Options(results=results, listen="127.0.0.1:0", token="bench-token"), live=live)
        await srv.start()
        return srv

    def stop(self) -> None:
        self.run(self.srv.stop())
        for f in self.fakes:
            self.run(f.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


def first_paint(srv: Server, repeat: int, tmp: Path) -> tuple[list[dict], list[dict]]:
    """Per repeat, a cold load (fresh profile: nothing cached, the chart library compiled anew) and
    a warm one (the same browser opening the run again, as a reader coming back does)."""
    cold, warm = [], []
    for _ in range(repeat):
        d = ub.chromium(ub.fresh_profile(tmp))
        try:
            for out, url in ((cold, srv.srv.url + "#run/0"), (warm, srv.srv.url.split("?")[0] + "#run/0")):
                d.get(url)
                if out is warm:
                    d.refresh()                    # the same route again: a new page, its assets cached
                ub.wait(d, lambda d: d.execute_script("return 'hosts-painted' in window.cellbed.marks"), 120, "the hosts")
                m = d.execute_script("return window.cellbed.marks")
                fcp = d.execute_script("const e = performance.getEntriesByName('first-contentful-paint')[0]; "
                                       "return e ? e.startTime : null")
                out.append({"run": m["run-painted"], "hosts": m["hosts-painted"], "fcp": fcp})
        finally:
            d.quit()
    return cold, warm


def live_latency(srv: Server, events: int, watch_s: float, tmp: Path) -> list[float]:
    d = ub.chromium(ub.fresh_profile(tmp))
    try:
        d.get(srv.srv.url + "#live")
        ub.wait(d, lambda d: d.execute_script("return 'live-painted' in window.cellbed.marks"), 60, "the live view")
        d.execute_script("window.cellbed.latencies = []")
        if not srv.fakes:
            time.sleep(watch_s)               # a real cell: whatever happens meanwhile is measured
        else:
            h1 = srv.fakes[0]
            while not all(f.watchers for f in srv.fakes):
                time.sleep(0.05)
            total = 256 << 20
            srv.loop.call_soon_threadsafe(h1.emit, npb.EVENT_KIND_MIGRATION_STARTED, "v1", "bench-1 -> h2")
            for i in range(events):
                time.sleep(0.1)               # a migration's progress, ten times a second
                sent = total * (i + 1) // (events + 1)
                srv.loop.call_soon_threadsafe(lambda s=sent, i=i: h1.emit(
                    npb.EVENT_KIND_MIGRATION_PROGRESS, "v1", progress=npb.MigrationProgress(
                        migration_id="bench-1", vm="v1", data_processed_bytes=s, data_remaining_bytes=total - s,
                        data_total_bytes=total, memory_iteration=1 + i // 10, phase="precopy")))
            ub.wait(d, lambda d: d.execute_script("return window.cellbed.latencies.length") >= events + 1, 60,
                    "every event drawn")
        return d.execute_script("return window.cellbed.latencies")
    finally:
        d.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", help="a results folder (default: make build/bench-ui/run-<nodes> once)")
    ap.add_argument("--nodes", type=int, default=12500)
    ap.add_argument("--duration-s", type=float, default=900.0, help="simulated seconds of the run made (default 900)")
    ap.add_argument("--synthesize", action="store_true",
                    help="write the folder with the real writer and seeded rows instead of a model run (seconds, not minutes)")
    ap.add_argument("--repeat", type=int, default=3, help="cold page loads (default 3)")
    ap.add_argument("--events", type=int, default=40, help="pushed changes measured (default 40)")
    ap.add_argument("--cell", default="", help="measure a real cell's events instead of stand-in daemons")
    ap.add_argument("--state-root", default=os.environ.get("CELLBED_STATE_ROOT", DEFAULT_STATE_ROOT))
    ap.add_argument("--watch-s", type=float, default=30.0, help="with --cell: how long to watch")
    a = ap.parse_args()
    why = ub.missing()
    if why:
        raise SystemExit(f"bench_ui: {why}")
    if a.results:
        run = Path(a.results)
    elif a.synthesize:
        run = synthesize(REPO / "build" / "bench-ui" / f"synthetic-{a.nodes}", a.nodes, a.duration_s)
    else:
        run = make_run(REPO / "build" / "bench-ui" / f"run-{a.nodes}", a.nodes, a.duration_s)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    srv = Server([str(run)], a.cell, a.state_root)
    try:
        nodes = max(int(x) for x in srv.srv.runs.runs[0].run.ticks["nodes"])
        t0 = time.monotonic()
        srv.run(srv.srv.ready())              # the server reads the folder in the background once it listens
        read_s = time.monotonic() - t0
        cold, warm = first_paint(srv, a.repeat, tmp)
        lat = live_latency(srv, a.events, a.watch_s, tmp)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    print(f"box: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"the server read the run's tables and built its replay in {read_s:.1f} s after it started listening "
          "(in the background: the page's aggregate does not wait for it)")
    print(f"first paint of a {nodes:,}-node run ({run}), at 1280x800, ms from navigation start:")
    for name, fp in (("cold (fresh profile)", cold), ("warm (opened again)", warm)):
        col = lambda k: sorted(x[k] for x in fp)  # noqa: E731
        h = col("hosts")
        print(f"  {name}, {len(fp)} loads: first contentful paint median {statistics.median(col('fcp')):.0f}; aggregate "
              f"median {statistics.median(col('run')):.0f}; hosts heat strip and histogram min {h[0]:.0f}, median "
              f"{statistics.median(h):.0f}, max {h[-1]:.0f}   (goal <= 2000 ms: {'met' if statistics.median(h) <= 2000 else 'NOT met'})")
    if lat:
        lat_ms = sorted(x * 1000 for x in lat)
        p95 = lat_ms[min(len(lat_ms) - 1, int(0.95 * len(lat_ms)))]
        print(f"live update latency ({'cell ' + a.cell if a.cell else 'stand-in daemons'}), event time to drawn, "
              f"{len(lat_ms)} pushed changes: median {statistics.median(lat_ms):.0f} ms, p95 {p95:.0f} ms, "
              f"max {lat_ms[-1]:.0f} ms   (goal <= 1000 ms: {'met' if lat_ms[-1] <= 1000 else 'NOT met'})")
    else:
        print("live update latency: no pushed change while watching")


if __name__ == "__main__":
    main()
