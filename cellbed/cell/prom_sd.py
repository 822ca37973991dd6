"""The cell's metrics targets and the Prometheus file_sd file that lists them (issue 15).

Every agent process of a cell serves ``/metrics`` (``cellbed.runtime.prom``): the node daemons on
their host's address, port 9464; the broker on the bridge address, port 9465; the Megha
controllers where the cell's Megha hook puts them. ``up`` records each one in
``state["metrics_targets"]`` as {"job", "target", "labels"} and, at its end, writes
``<state dir>/prometheus-targets.json`` in the format of Prometheus' ``file_sd_configs``:

    [{"targets": ["10.231.15.11:9464"],
      "labels": {"job": "node", "host": "h1", "cell": "pm", "__scheme__": "https"}}, ...]

The ``job`` label of a target group takes the place of the scrape job's name, so one scrape job
over this file gives ``up{job="node"}``, ``up{job="broker"}``, ...; ``__scheme__`` is https in a
secure cell, where the scrape job needs a ``tls_config`` with the cell CA and a certificate of the
cell (the cell's ``prometheus`` certificate, see ``prometheus-scrape.yml``), http in an insecure one. Prometheus re-reads the file when it changes; it
is replaced atomically (rename), so a reader never sees half of it.
"""
from __future__ import annotations

import json
import os

NODE_METRICS_PORT = 9464       # cellbed-node, on the host's namespace address
BROKER_METRICS_PORT = 9465     # cellbed-broker, on the bridge address
FILE_SD_NAME = "prometheus-targets.json"
JOBS = ("node", "broker", "gm", "lm", "controller")


def add_target(state: dict, job: str, address: str, port: int, **labels: str) -> dict:
    """Record one agent's metrics endpoint in the cell's state."""
    if job not in JOBS:
        raise ValueError(f"metrics job {job!r}: allowed {', '.join(JOBS)}")
    t = {"job": job, "target": f"{address}:{port}", "labels": {k: str(v) for k, v in labels.items()}}
    state.setdefault("metrics_targets", []).append(t)
    return t


def file_sd_groups(targets: list[dict], scheme: str = "http") -> list[dict]:
    """file_sd target groups: targets with the same labels (job included) share one group, in the
    order they were recorded. *scheme* goes in as ``__scheme__`` (https: a secure cell's agents
    serve /metrics only to clients with a certificate of the cell)."""
    if scheme not in ("http", "https"):
        raise ValueError(f"scheme {scheme!r}: allowed http, https")
    groups: dict[str, dict] = {}
    for t in targets:
        labels = {"job": t["job"], **t.get("labels", {}), "__scheme__": scheme}
        key = json.dumps(labels, sort_keys=True)
        g = groups.setdefault(key, {"targets": [], "labels": labels})
        if t["target"] not in g["targets"]:
            g["targets"].append(t["target"])
    return list(groups.values())


def write_file_sd(sdir: str, targets: list[dict], scheme: str = "http") -> str:
    """Write (atomically) the file_sd file of *targets* into the cell's state folder; its path."""
    path = os.path.join(sdir, FILE_SD_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(file_sd_groups(targets, scheme), f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path


SCRAPE_NAME = "prometheus-scrape.yml"


def scrape_config(file_sd: str, tls: dict | None, interval_s: float = 15.0) -> dict:
    """One scrape job over the cell's file_sd file, for an operator's prometheus.yml
    (``scrape_configs:``). *tls*: {"ca", "cert", "key"} of the cell's scraping certificate (a
    certificate of the cell CA that carries no Cellbed identity, so it can read /metrics and call
    nothing), or None in an insecure cell."""
    job: dict = {"job_name": "cellbed", "scrape_interval": f"{interval_s:g}s",
                 "file_sd_configs": [{"files": [file_sd]}]}
    if tls is not None:
        job["tls_config"] = {"ca_file": tls["ca"], "cert_file": tls["cert"], "key_file": tls["key"]}
    return {"scrape_configs": [job]}


def write_scrape_config(sdir: str, file_sd: str, tls: dict | None) -> str:
    """The scrape job as a file (JSON, which is YAML: paste it, or `include` it)."""
    path = os.path.join(sdir, SCRAPE_NAME)
    with open(path, "w") as f:
        json.dump(scrape_config(file_sd, tls), f, indent=1)
        f.write("\n")
    return path
