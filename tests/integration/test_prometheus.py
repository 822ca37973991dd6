"""A real Prometheus (Debian's /usr/bin/prometheus) scrapes a real cell through the cell's file_sd
file, over HTTPS with the cell's scraping certificate (of its CA, with no identity): every agent is up, and a live
migration shows in the node daemon's histograms (issue 15). Without a cell certificate, /metrics
answers nothing.

Prometheus listens on a free loopback port, keeps its data in a temporary folder, and is stopped by
its pid; the cell (2 hosts, MASB broker) lives on 10.231.15.0/24."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import urllib.parse
import urllib.request

import pytest

from cellbed.cell import cell as cellmod
from cellbed.cell import cell_pki
from cellbed.v1 import node_pb2 as npb
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

PROMETHEUS = "/usr/bin/prometheus"


@pytest.fixture(scope="module")
def pm_cell(state_root):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    st = cellmod.up("pm", 2, subnet="10.231.15.0/24", host_cpus=[0.5], host_mem_mib=[768], root=state_root,
                    monitor_period_s=1.0,
                    # nodes report often (the broker's cache fills fast) and never move VMs by themselves:
                    # the test's migration is the only one
                    san={"report_period_s": 2.0, "enabled": False, "spike_policy": "none"})
    try:
        yield st
    finally:
        for h in st["hosts"]:
            log = os.path.join(state_root, "pm", h, "logs", "node.log")
            if os.path.exists(log):
                print(f"--- {h} node.log (tail)\n" + "".join(open(log).readlines()[-20:]))
        cellmod.down("pm", state_root)


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(pm_cell):
    """Prometheus scraping every second the targets of the cell's file_sd file; its URL."""
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.fail(f"{PROMETHEUS} is missing: run ./cellbed.sh setup (Debian's prometheus package)")
    d = tempfile.mkdtemp(prefix="cellbed-prom-")
    conf = os.path.join(d, "prometheus.yml")
    tls = cell_pki.files(pm_cell, cell_pki.PROMETHEUS)      # the cell's scraper: a CA certificate, no identity
    with open(conf, "w") as f:       # JSON is YAML
        json.dump({"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                   "scrape_configs": [{"job_name": "cellbed", "honor_labels": True,
                                       "tls_config": {"ca_file": tls.ca, "cert_file": tls.cert, "key_file": tls.key},
                                       "file_sd_configs": [{"files": [pm_cell["prometheus_file_sd"]],
                                                            "refresh_interval": "5s"}]}]}, f)
    port = free_loopback_port()
    log = open(os.path.join(d, "prometheus.log"), "ab")
    p = subprocess.Popen([PROMETHEUS, f"--config.file={conf}", f"--web.listen-address=127.0.0.1:{port}",
                          f"--storage.tsdb.path={os.path.join(d, 'data')}", "--log.level=warn"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        os.kill(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        log.close()
        with open(os.path.join(d, "prometheus.log")) as f:
            tail = f.readlines()[-20:]
        if tail:
            print("--- prometheus.log (tail)\n" + "".join(tail))
        shutil.rmtree(d)


def query(url: str, expr: str) -> list[dict]:
    """Prometheus' instant query API: the result vector ([] while Prometheus is not up yet)."""
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=5) as r:
            body = json.load(r)
    except OSError:
        return []
    assert body["status"] == "success", body
    return body["data"]["result"]


async def aquery(url: str, expr: str) -> list[dict]:
    return await asyncio.to_thread(query, url, expr)


def vm_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def test_prometheus_scrapes_every_agent_and_sees_a_live_migration(pm_cell, prometheus, state_root):
    with open(pm_cell["prometheus_file_sd"]) as f:
        groups = json.load(f)
    targets = {t: g["labels"] for g in groups for t in g["targets"]}
    assert {lb["job"] for lb in targets.values()} == {"node", "broker"}
    assert {lb["__scheme__"] for lb in targets.values()} == {"https"}
    for t in targets:                    # without a certificate of the cell: nothing
        with pytest.raises(OSError):
            urllib.request.urlopen(f"https://{t}/metrics", timeout=5,
                                   context=ssl.create_default_context(cafile=pm_cell["pki"]["ca"])).read()
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://{t}/metrics", timeout=5).read()
    assert sorted(lb["host"] for lb in targets.values() if lb["job"] == "node") == ["h1", "h2"]
    assert {t.rsplit(":", 1)[0] for t, lb in targets.items() if lb["job"] == "node"} == {
        d["address"] for d in pm_cell["hosts"].values()}

    spec = npb.VmSpec(name="pm1", mem_mib=128, vcpus=1, workload=npb.Workload(cpu_load=0.1, wss_mib=16))
    async with cell_pki.node_client(pm_cell, "h1") as c:
        await c.call("StartVm", npb.StartVmRequest(spec=spec), timeout=180)
    try:
        async with cell_pki.node_client(pm_cell, "h1") as c:
            rec = (await c.call("MigrateVm", npb.MigrateVmRequest(name="pm1", dest_host="h2"), timeout=300)).record
        assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED, rec.detail

        async def all_up():
            got = {r["metric"]["instance"]: (r["metric"].get("job"), r["value"][1])
                   for r in await aquery(prometheus, "up")}
            return got if got == {t: (lb["job"], "1") for t, lb in targets.items()} else None
        await wait_until(all_up, 120, "up == 1 for every target of the file_sd file")

        async def migration_counted():
            r = await aquery(prometheus, 'cellbed_migration_duration_seconds_count{job="node",host="h1"} >= 1')
            return r
        r = await wait_until(migration_counted, 60, "the migration in cellbed_migration_duration_seconds_count")
        assert float(r[0]["value"][1]) == 1.0
        total = await aquery(prometheus, 'cellbed_migrations_total{host="h1",outcome="succeeded"}')
        assert [float(x["value"][1]) for x in total] == [1.0]
        downtime = await aquery(prometheus, 'cellbed_migration_downtime_seconds_sum{host="h1"}')
        assert float(downtime[0]["value"][1]) == pytest.approx(rec.downtime_ms / 1000, rel=1e-6)
        sent = await aquery(prometheus, 'cellbed_migration_transferred_bytes_sum{host="h1"}')
        assert float(sent[0]["value"][1]) == rec.data_total_bytes

        async def vm_on_h2():
            r = await aquery(prometheus, 'cellbed_host_vms{host="h2",vm_state="running"} == 1')
            return r
        await wait_until(vm_on_h2, 60, "the VM running on h2 in cellbed_host_vms")

        async def broker_knows_both():
            return await aquery(prometheus, 'cellbed_broker_cache_entries{job="broker",agent="ba1"} == 2')
        await wait_until(broker_knows_both, 60, "both nodes in the broker's cache")
        rss = await aquery(prometheus, "process_resident_memory_bytes")
        assert {x["metric"]["job"] for x in rss} == {"node", "broker"} and len(rss) == len(targets)
    finally:
        for h in ("h1", "h2"):
            async with cell_pki.node_client(pm_cell, h) as c:
                vms = (await c.call("ListVms", npb.ListVmsRequest())).vms
                for v in vms:
                    await c.call("StopVm", npb.StopVmRequest(name=v.spec.name), timeout=60)
    for h in ("h1", "h2"):
        with open(os.path.join(state_root, "pm", h, "pids.json")) as f:
            pid = json.load(f)["node"]["pid"]
        print(f"\n{h} node daemon (metrics on): VmRSS {vm_rss_mib(pid):.1f} MiB")
