#!/usr/bin/env python3
"""Prove a deployed Dask cluster works (roles/dask/tasks/verify.yml, run with Cellbed's venv):

    dask_verify.py SCHEDULER --workers N [--tls-ca-file CA --tls-cert CERT --tls-key KEY] [--timeout S]

Connects to SCHEDULER (tls://HOST:PORT with the certificate given, or tcp://), waits until N worker
processes have joined, runs one trivial task on every worker (pinned to it) and checks each result;
over TLS it also checks that a plaintext client is refused. Prints one JSON object; exits 1 with
the reason on stderr otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

from distributed import Client
from distributed.security import Security


def square_where(x: int) -> dict:
    """The trivial task: runs on a worker."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "value": x * x}


def plaintext_refused(hostport: str, timeout_s: float) -> bool:
    try:
        with Client(f"tcp://{hostport}", timeout=timeout_s, set_as_default=False):
            return False
    except (OSError, TimeoutError):
        return True


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scheduler")
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--tls-ca-file")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args(argv)
    tls = a.scheduler.startswith("tls://")
    if tls and not (a.tls_ca_file and a.tls_cert and a.tls_key):
        print(f"{a.scheduler}: give --tls-ca-file, --tls-cert and --tls-key", file=sys.stderr)
        return 2
    sec = Security(tls_ca_file=a.tls_ca_file, tls_client_cert=a.tls_cert, tls_client_key=a.tls_key,
                   require_encryption=True) if tls else None
    t0 = time.monotonic()
    try:
        client = Client(a.scheduler, security=sec, timeout=a.timeout, set_as_default=False)
    except (OSError, TimeoutError) as e:
        print(f"{a.scheduler}: cannot connect: {str(e).splitlines()[0][:300]}", file=sys.stderr)
        return 1
    with client:
        try:
            client.wait_for_workers(a.workers, timeout=a.timeout)
        except (OSError, TimeoutError):
            print(f"{a.scheduler}: {len(client.nthreads())} of {a.workers} worker processes joined within "
                  f"{a.timeout:g} s: {sorted(client.nthreads())}", file=sys.stderr)
            return 1
        info = client.scheduler_info(n_workers=-1)["workers"]
        futures = {w: client.submit(square_where, i + 2, workers=[w], allow_other_workers=False, pure=False)
                   for i, w in enumerate(sorted(info))}
        ran = {w: f.result(timeout=a.timeout) for w, f in futures.items()}
        bad = {w: r for i, (w, r) in enumerate(sorted(ran.items())) if r["value"] != (i + 2) ** 2}
        if bad:
            print(f"{a.scheduler}: wrong task results: {bad}", file=sys.stderr)
            return 1
        res = {"scheduler": a.scheduler, "tls": tls, "connect_s": round(time.monotonic() - t0, 3),
               "workers": {w: {"name": str(v.get("name")), "host": ran[w]["host"], "nthreads": v.get("nthreads"),
                               "memory_limit": v.get("memory_limit")} for w, v in sorted(info.items())},
               "versions": {k: v for k, v in client.get_versions()["scheduler"]["packages"].items()
                            if k in ("dask", "distributed", "python")}}
    if tls:
        res["plaintext_refused"] = plaintext_refused(a.scheduler.split("://", 1)[1], min(a.timeout, 10.0))
        if not res["plaintext_refused"]:
            print(f"{a.scheduler}: a plaintext tcp:// client was let in", file=sys.stderr)
            print(json.dumps(res))
            return 1
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
