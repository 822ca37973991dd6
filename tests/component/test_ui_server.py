"""`cellctl ui`'s server over real loopback HTTP (aiohttp's client), no browser and no cell: the
token on every request, the refusal of plaintext on a network, TLS with a certificate of a cell CA,
the results folders' JSON, and the live view's pushed updates from a stand-in node daemon."""
from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import wait_until

from cellbed.runtime.authz import Security
from cellbed.runtime.pki import CellCA
from cellbed.ui.live import LiveCell
from cellbed.ui.serve import Options, UiServer
from cellbed.v1 import node_pb2 as npb
from tests.cli_run import run_cli
from tests.ui_fake_node import FakeNode

REPO = Path(__file__).resolve().parents[2]
COMPARE = REPO / "docs" / "results" / "compare-5host"
TOKEN = "component-test-token"


@pytest.fixture
async def runs_server():
    srv = UiServer(Options(results=[str(COMPARE)], listen="127.0.0.1:0", live=False, token=TOKEN))
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


def base(srv: UiServer) -> str:
    return f"http://127.0.0.1:{srv.port}"


async def get(srv, path, **kw):
    async with aiohttp.ClientSession() as c:
        async with c.get(base(srv) + path, allow_redirects=False, **kw) as r:
            return r.status, await r.text(), r.headers, r.cookies


@pytest.mark.parametrize("path", ["/", "/api/config", "/api/live/events", "/api/runs/0/summary", "/static/main.js",
                                  "/assets/echarts.js"])
async def test_a_request_without_the_token_is_refused_on_loopback_too(runs_server, path):
    status, body, headers, _ = await get(runs_server, path)
    assert status == 401 and "token" in body and headers["WWW-Authenticate"] == "Token"
    status, body, _, _ = await get(runs_server, path + "?token=wrong")
    assert status == 403
    status, _, _, _ = await get(runs_server, path, headers={"Authorization": "token wrong"})
    assert status == 403


async def test_the_printed_url_sets_a_cookie_and_leaves_the_address_bar(runs_server):
    assert runs_server.url == f"http://127.0.0.1:{runs_server.port}/?token={TOKEN}"
    status, _, headers, cookies = await get(runs_server, f"/?token={TOKEN}")
    assert status == 303 and headers["Location"] == "/"
    morsel = cookies[f"cellbed-ui-{runs_server.port}"]
    assert morsel.value == TOKEN and morsel["httponly"] and morsel["samesite"] == "Strict"
    jar = {f"cellbed-ui-{runs_server.port}": TOKEN}
    async with aiohttp.ClientSession(cookies=jar) as c:
        async with c.get(base(runs_server) + "/") as r:
            assert r.status == 200 and "Cellbed" in await r.text()
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert r.headers["Referrer-Policy"] == "no-referrer"


async def test_results_api_serves_aggregates_then_hosts_on_demand(runs_server):
    h = {"Authorization": f"token {TOKEN}"}
    status, body, _, _ = await get(runs_server, "/api/config", headers=h)
    cfg = json.loads(body)
    assert status == 200 and cfg["live"] is False
    assert [r["label"] for r in cfg["runs"]] == ["compare-5host: real", "compare-5host: model"]
    assert cfg["comparisons"][0]["runs"] == [0, 1] and cfg["comparisons"][0]["metrics"]
    s = json.loads((await get(runs_server, "/api/runs/0/summary", headers=h))[1])
    ticks = (COMPARE / "real" / "ticks.csv").read_text().splitlines()
    assert len(s["ticks"]["t_s"]) == len(ticks) - 1 and s["files"]["vms"] and s["files"]["san"]
    # the real run's replay is exact: the VMs on each host at the last sample before t, from vms.csv
    t = s["ticks"]["t_s"][len(s["ticks"]["t_s"]) // 2]
    d = json.loads((await get(runs_server, f"/api/runs/0/hosts?t={t}&names=1", headers=h))[1])
    want: dict[str, int] = {}
    rows = [line.split(",") for line in (COMPARE / "real" / "vms.csv").read_text().splitlines()[1:]]
    last = max(float(r[0]) for r in rows if float(r[0]) <= t)
    for r in rows:
        if float(r[0]) == last:
            want[r[1]] = want.get(r[1], 0) + 1
    assert d["exact"] and dict(zip(d["hosts"], d["counts"])) == {hh: want.get(hh, 0) for hh in d["hosts"]}
    busiest = d["hosts"][d["counts"].index(max(d["counts"]))]
    one = json.loads((await get(runs_server, f"/api/runs/0/host?name={busiest}&t={t}", headers=h))[1])
    assert one["vm_count"] == max(d["counts"]) and all(m["src"] == busiest or m["dst"] == busiest for m in one["migrations"])
    status, body, _, _ = await get(runs_server, f"/api/runs/0/host?name=nope&t={t}", headers=h)
    assert status == 404 and "nope" in json.loads(body)["error"]
    status, body, _, _ = await get(runs_server, "/api/runs/0/hosts?t=nan", headers=h)
    assert status == 400 and "t=" in json.loads(body)["error"]
    status, _, _, _ = await get(runs_server, "/api/runs/7/summary", headers=h)
    assert status == 404
    status, body, _, _ = await get(runs_server, "/api/runs/1/stages", headers=h)
    assert status == 404 and "stages.csv" in json.loads(body)["error"]


async def test_stage_timing_and_decisions_are_served_when_a_folder_has_them(tmp_path):
    import shutil
    run = tmp_path / "model"
    shutil.copytree(COMPARE / "model", run)
    (run / "decisions.jsonl").write_text(json.dumps({"id": "d1", "kind": "san", "san_id": "h1-1-abc", "scores": [
        {"host": "h2", "score": 0.5}]}) + "\n" + json.dumps({"id": "d2", "kind": "placement"}) + "\n")
    (run / "stages.csv").write_text("stage,policy,calls,errors,examined,total_s,mean_us,p50_us,p95_us,p99_us,max_us\n"
                                    "R5,sias,120,0,2400,0.012,100.0,90.5,150.0,180.0,210.0\n")
    srv = UiServer(Options(results=[str(run)], listen="127.0.0.1:0", live=False, token=TOKEN))
    await srv.start()
    try:
        h = {"Authorization": f"token {TOKEN}"}
        listed = json.loads((await get(srv, "/api/runs/0/decisions", headers=h))[1])
        assert listed["count"] == 2 and listed["decisions"][0] == {"id": "d1", "kind": "san", "san_id": "h1-1-abc"}
        one = json.loads((await get(srv, "/api/runs/0/decisions?id=d1", headers=h))[1])
        assert one["scores"] == [{"host": "h2", "score": 0.5}]
        assert (await get(srv, "/api/runs/0/decisions?id=zz", headers=h))[0] == 404
        summary = json.loads((await get(srv, "/api/runs/0/summary", headers=h))[1])
        assert summary["files"] == {"vms": False, "san": False, "stages": True, "decisions": True}
        stages = json.loads((await get(srv, "/api/runs/0/stages", headers=h))[1])
        assert stages == [{"stage": "R5", "policy": "sias", "calls": 120.0, "errors": 0.0, "examined": 2400.0,
                           "total_s": 0.012, "mean_us": 100.0, "p50_us": 90.5, "p95_us": 150.0, "p99_us": 180.0,
                           "max_us": 210.0}]
    finally:
        await srv.stop()


def test_a_non_loopback_listen_without_tls_is_refused_with_one_line_and_exit_2(tmp_path):
    rc, out, err = run_cli(["ui", str(COMPARE), "--listen", "0.0.0.0:8470", "--state-root", str(tmp_path)])
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--listen 0.0.0.0:8470" in err and "--tls-cert" in err
    rc, _, err = run_cli(["ui", str(COMPARE), "--listen", "10.231.60.1:0", "--state-root", str(tmp_path)])
    assert rc == 2 and "plaintext" in err
    rc, _, err = run_cli(["ui", str(COMPARE), "--listen", "127.0.0.1:99999", "--state-root", str(tmp_path)])
    assert rc == 2 and "0..65535" in err
    rc, _, err = run_cli(["ui", "--state-root", str(tmp_path), "--cell", "absent"])
    assert rc == 2 and "nothing to show" in err


async def test_tls_with_a_certificate_of_the_cell_ca(tmp_path):
    ca = CellCA.create(tmp_path / "pki", "uitest")
    files = ca.issue_server("ui", ["127.0.0.1"])
    srv = UiServer(Options(results=[str(COMPARE)], listen="127.0.0.1:0", live=False, token=TOKEN,
                           tls_cert=files.cert, tls_key=files.key))
    await srv.start()
    try:
        assert srv.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=ca.cert_file)
        async with aiohttp.ClientSession() as c:
            async with c.get(f"https://127.0.0.1:{srv.port}/api/config", ssl=ctx,
                             headers={"Authorization": f"token {TOKEN}"}) as r:
                assert r.status == 200
            with pytest.raises(aiohttp.ClientConnectionError):     # plaintext is not answered as HTTP
                async with c.get(f"http://127.0.0.1:{srv.port}/api/config") as r:
                    assert r.status != 200
    finally:
        await srv.stop()


async def sse_events(resp, want, timeout=20.0):
    """Read server-sent events from *resp* until want(kind, data) is true; returns the events read."""
    seen, kind = [], None
    async def read():
        nonlocal kind
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                seen.append((kind, data))
                if want(kind, data):
                    return
    await asyncio.wait_for(read(), timeout)
    return seen


async def test_live_view_pushes_a_migration_in_flight_then_succeeded():
    h1, h2 = FakeNode("h1"), FakeNode("h2")
    h1.add_vm("v1")
    live = LiveCell("fake", {"h1": await h1.start(), "h2": await h2.start()}, Security.insecure("fake"), refresh_s=30)
    srv = UiServer(Options(listen="127.0.0.1:0", token=TOKEN), live=live)
    await srv.start()
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"token {TOKEN}"}) as c:
            async with c.get(base(srv) + "/api/live/events") as resp:
                assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
                seen = await sse_events(resp, lambda k, d: k == "host" and d["host"] == "h1" and d["vms"])
                assert seen[0][0] == "snapshot" and set(seen[0][1]["hosts"]) == {"h1", "h2"}
                assert [v["name"] for v in seen[-1][1]["vms"]] == ["v1"]
                async def watching():                           # both event streams are open
                    return bool(h1.watchers and h2.watchers)
                await wait_until(watching, 30, "the UI's WatchEvents streams to both stand-in daemons", 0.05)
                h1.emit(npb.EVENT_KIND_MIGRATION_STARTED, "v1", "m-1 -> h2")
                h1.emit(npb.EVENT_KIND_MIGRATION_PROGRESS, "v1", progress=npb.MigrationProgress(
                    migration_id="m-1", vm="v1", data_processed_bytes=64 << 20, data_remaining_bytes=32 << 20,
                    data_total_bytes=128 << 20, memory_iteration=2, phase="precopy"))
                h1.vms.clear()                                  # where the VM is when the record is final
                h2.add_vm("v1")
                rec = npb.MigrationRecord(id="m-1", vm="v1", src="h1", dst="h2", outcome=npb.MIGRATION_OUTCOME_SUCCEEDED,
                                          wall_ms=900, data_total_bytes=130 << 20)
                h1.emit(npb.EVENT_KIND_MIGRATION_FINISHED, "v1", "MIGRATION_OUTCOME_SUCCEEDED", record=rec)
                seen = await sse_events(resp, lambda k, d: k == "migration" and d["status"] == "succeeded")
                ms = [d for k, d in seen if k == "migration"]
                assert [m["status"] for m in ms] == ["in flight", "in flight", "succeeded"]
                assert ms[0]["dst"] == "h2" and ms[1]["sent"] == 64 << 20 and ms[1]["remaining"] == 32 << 20
                assert ms[1]["iteration"] == 2 and ms[1]["phase"] == "precopy" and ms[2]["src"] == "h1"
                assert all(m["ev_unix_s"] > 0 for m in ms)
                # the finish also makes the UI read both hosts again at once (not at the next refresh, 30 s away)
                if not any(k == "host" and d["host"] == "h2" and d["vms"] for k, d in seen):
                    await sse_events(resp, lambda k, d: k == "host" and d["host"] == "h2" and d["vms"], timeout=10)
    finally:
        await srv.stop()
        await h1.stop()
        await h2.stop()
