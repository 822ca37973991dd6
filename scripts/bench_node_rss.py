#!/usr/bin/env python3
"""The node daemon's footprint with metrics and mTLS on (issue 15): RSS after start and after
200 scrapes, idle CPU over 60 s, and the scrape time of every agent's /metrics over HTTPS with
the cell's scraping certificate. Brings up a 2-host cell with a broker on 10.231.19.0/24 and
takes it down.

    sudo .venv/bin/python scripts/bench_node_rss.py [--scrapes 200] [--idle-s 60]
"""
from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cellbed.cell import cell as cellmod, cell_pki  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main(scrapes: int, idle_s: float) -> None:
    root = tempfile.mkdtemp(prefix="cellbed-rss-")
    st = cellmod.up("rss", 2, subnet="10.231.19.0/24", host_cpus=[0.5], host_mem_mib=[768], root=root,
                    monitor_period_s=5.0, san={})
    try:
        pid = json.load(open(os.path.join(root, "rss", "h1", "pids.json")))["node"]["pid"]
        time.sleep(20)       # let the daemon settle after its start (a measurement window, not a wait for state)
        print(f"node daemon RSS after start: {rss_mib(pid):.1f} MiB")
        c0, t0 = cpu_s(pid), time.monotonic()
        time.sleep(idle_s)   # the idle window being measured
        print(f"node daemon idle CPU over {idle_s:.0f} s: {(cpu_s(pid) - c0) / (time.monotonic() - t0) * 100:.2f} % "
              "of a core")
        tls = cell_pki.files(st, cell_pki.PROMETHEUS)
        ctx = ssl.create_default_context(cafile=tls.ca)
        ctx.load_cert_chain(tls.cert, tls.key)
        for t in st["metrics_targets"]:
            xs = []
            for _ in range(scrapes):
                a = time.perf_counter()
                urllib.request.urlopen(f"https://{t['target']}/metrics", context=ctx, timeout=10).read()
                xs.append((time.perf_counter() - a) * 1e3)
            xs.sort()
            print(f"scrape {t['job']} {t['target']}: median {statistics.median(xs):.1f} ms, "
                  f"p99 {xs[max(0, int(0.99 * len(xs)) - 1)]:.1f} ms ({scrapes} GETs, new connection each)")
        print(f"node daemon RSS after the scrapes: {rss_mib(pid):.1f} MiB")
    finally:
        cellmod.down("rss", root)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--idle-s", type=float, default=60.0)
    a = ap.parse_args()
    main(a.scrapes, a.idle_s)
