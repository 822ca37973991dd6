"""MASB on the real single-box cell: host h1 is driven into overload by raising its guests'
load; SAN selects tasks, gets candidates from the broker, negotiates with the other node
agents and really live-migrates until no host is overloaded."""
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cellbed.cell import cell_pki
from cellbed.domain.identity import Role
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb, node_pb2 as npb
from cellbed.cell import cell as cellmod
from tests.component.test_explanations import check_san_round
from tests.conftest import wait_until
from tests.integration.conftest import _can_run_cells

pytestmark = pytest.mark.integration

HOST_CPU = 0.6          # cores per host (cgroup quota)
MAX_UTIL = 0.9          # overloaded above 0.54 cores
LOAD = 0.35             # per guest after the raise: two of them saturate h1, one fits anywhere


@pytest.fixture(scope="module")
def masb_cell(state_root):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    _ROOT[:] = [state_root]
    try:
        st = cellmod.up("ms", 3, subnet="10.231.13.0/24", host_cpus=[HOST_CPU], host_mem_mib=[1024],
                        root=state_root, monitor_period_s=2.0,
                        san={"report_period_s": 2.0, "window_s": 5.0, "max_util": MAX_UTIL, "boot_grace_s": 15.0,
                             "log_scs_rate": 1.0, "log_scoring_rate": 1.0, "log_target_rate": 1.0},
                        explain=1.0)
    except BaseException:
        cellmod.down("ms", state_root)      # up records before it creates: remove what it made
        raise
    try:
        yield st
    finally:
        cellmod.down("ms", state_root)


def target(cell, h):
    d = cell["hosts"][h]
    return f"{d['address']}:{d['grpc_port']}"


async def call(cell, host, method, req, timeout=30):
    async with cell_pki.node_client(cell, host) as c:
        return await c.call(method, req, timeout=timeout)


async def where(cell) -> dict:
    out = {}
    for h in cell["hosts"]:
        for v in (await call(cell, h, "ListVms", npb.ListVmsRequest())).vms:
            out.setdefault(v.spec.name, []).append((h, v))
    return out


async def san_request(cell, host, method, req):
    # The peer-to-peer SAN answers node identities only: the test plays the other node.
    peer = next(h for h in cell["hosts"] if h != host)
    t = GrpcTransport(lambda n: n, RealClock(), security=cell_pki.security(cell, Role.NODE, peer))
    try:
        return await t.request(target(cell, host), method, req, timeout=10)
    finally:
        await t.close()


async def test_broker_and_san_services_are_serving(masb_cell):
    async with cell_pki.admin(masb_cell).channel(masb_cell["broker"]) as ch:
        h = await health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service="cellbed.v1.BrokerAgent"), timeout=5)
    assert h.status == health_pb2.HealthCheckResponse.SERVING
    async with cell_pki.admin(masb_cell).channel(target(masb_cell, "h2")) as ch:
        h = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service="cellbed.v1.San"),
                                                       timeout=5)
    assert h.status == health_pb2.HealthCheckResponse.SERVING


async def test_broker_cache_is_fed_by_node_reports(masb_cell):
    async def cache():
        t = GrpcTransport(lambda n: n, RealClock(), security=cell_pki.admin(masb_cell))
        try:
            r = await t.request(masb_cell["broker"], "BrokerAgent/ListCache", masbpb.ListCacheRequest(), timeout=5)
        finally:
            await t.close()
        return r if len(r.entries) == 3 else None
    r = await wait_until(cache, 60, "the broker's cache to hold all three hosts")
    assert sorted(e.report.host for e in r.entries) == ["h1", "h2", "h3"]
    for e in r.entries:
        assert e.report.capacity.cpu_cores == pytest.approx(HOST_CPU)
        assert 0 <= e.age_s < r.node_expiry_s


async def test_bad_san_messages_are_invalid_argument(masb_cell):
    from cellbed.domain import errors
    with pytest.raises(errors.InvalidArgument, match="task.name"):
        await san_request(masb_cell, "h2", "San/RequestTaskMigration",
                          masbpb.TaskMigrationRequest(san_id="x", src_host="h1", task=masbpb.TaskInfo()))
    with pytest.raises(errors.InvalidArgument, match="out of range"):
        await san_request(masb_cell, "h2", "San/RequestTaskMigration", masbpb.TaskMigrationRequest(
            san_id="x", src_host="h1", task=masbpb.TaskInfo(name="t", used=cpb.Resources(cpu_cores=-1))))


async def test_overloaded_host_sheds_load_by_san_and_live_migration(masb_cell):
    cell = masb_cell
    for name in ("ov1", "ov2"):
        w = npb.Workload(cpu_load=0.02, wss_mib=16)
        await call(cell, "h1", "StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=name, mem_mib=128, vcpus=1,
                                                                            workload=w)), timeout=180)
    before = {n: vs[0][1].heartbeat for n, vs in (await where(cell)).items()}
    assert set(before) == {"ov1", "ov2"}
    # raise the guests' load: together they want 0.70 cores on a 0.60-core host
    for name in ("ov1", "ov2"):
        await call(cell, "h1", "SetWorkload", npb.SetWorkloadRequest(name=name, workload=npb.Workload(cpu_load=LOAD)))

    async def migrated():
        recs = (await call(cell, "h1", "ListMigrations", npb.ListMigrationsRequest())).records
        return [r for r in recs if r.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED] or None
    try:
        recs = await wait_until(migrated, 240, "SAN to migrate a VM off h1")
    except BaseException:   # say what the agents saw
        st = (await call(cell, "h1", "GetHostState", npb.GetHostStateRequest())).state
        negs = await san_request(cell, "h1", "San/ListNegotiations", masbpb.ListNegotiationsRequest(limit=3))
        print(f"h1: cpu used {st.cpu_used_cores:.3f} of {HOST_CPU} (cgroup {st.cgroup_cpu_cores:.3f}); "
              f"SAN counters {dict(negs.counters)}; last: "
              + "; ".join(f"{n.vm} {n.state} {[(x.kind, x.detail[:100]) for x in n.steps]}" for n in negs.negotiations))
        raise
    r = recs[0]
    assert r.src == "h1" and r.dst in ("h2", "h3") and r.vm in ("ov1", "ov2")
    assert r.data_total_bytes > 0 and r.heartbeat_after > r.heartbeat_before and r.integrity_bad == 0

    # the negotiation, in order: SCS -> candidates -> acceptance(s) -> process -> migrated
    negs = (await san_request(cell, "h1", "San/ListNegotiations", masbpb.ListNegotiationsRequest())).negotiations
    done = [n for n in negs if n.state == "migrated"]
    assert done, [(n.vm, n.state, [s.kind for s in n.steps]) for n in negs]
    kinds = [s.kind for s in done[0].steps]
    order = [kinds.index(k) for k in ("scs", "candidates", "request", "acceptance", "process", "migrated")]
    assert order == sorted(order), kinds
    assert done[0].target == r.dst
    times = [s.unix_s for s in done[0].steps]
    assert times == sorted(times)

    # no host stays overloaded, and nothing is in flight: a VM still moving is listed as
    # migrating (out on its source, in on its destination while verified there), so where each
    # VM runs can be read only once the cell is quiet
    seen = {}

    async def settled():
        states = [(await call(cell, h, "GetHostState", npb.GetHostStateRequest())).state for h in cell["hosts"]]
        seen["cpu used"] = {s.host: round(s.cpu_used_cores, 3) for s in states}
        seen["over"] = [s.host for s in states if s.cpu_used_cores > MAX_UTIL * HOST_CPU]
        seen["moving"] = [s.host for s in states if s.migrations_in or s.migrations_out]
        seen["negotiating"] = []
        for h in cell["hosts"]:
            negs = (await san_request(cell, h, "San/ListNegotiations", masbpb.ListNegotiationsRequest())).negotiations
            seen["negotiating"] += [(h, n.vm, n.state, [s.kind for s in n.steps]) for n in negs if not n.ended_unix_s]
        return states if not (seen["over"] or seen["moving"] or seen["negotiating"]) else None
    try:
        await wait_until(settled, 180, "no host above max_util and no SAN or migration under way")
    except BaseException:   # say which of the three held, and the migrations so far
        print("last seen:", seen)
        for h in cell["hosts"]:
            for r in (await call(cell, h, "ListMigrations", npb.ListMigrationsRequest())).records:
                if r.src == h:
                    print(f"migration {r.vm} {r.src}->{r.dst} {npb.MigrationOutcome.Name(r.outcome)} "
                          f"at {r.start_unix_s:.1f}: {r.detail[:120]}")
        raise
    # no VM lost or duplicated, and each one is where its migration records say it went
    loc = await where(cell)
    recs = []
    for h in cell["hosts"]:
        recs += [r for r in (await call(cell, h, "ListMigrations", npb.ListMigrationsRequest())).records
                 if r.src == h and r.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED]
    recs.sort(key=lambda r: r.start_unix_s)
    said = {"ov1": "h1", "ov2": "h1"}
    for r in recs:
        assert said[r.vm] == r.src, (r.vm, r.src, r.dst, said)
        said[r.vm] = r.dst
    where_now, want = {n: [h for h, _ in v] for n, v in loc.items()}, {n: [h] for n, h in said.items()}
    if where_now != want:          # say how they got there (pytest shortens long assertion messages)
        for h, lines in node_log_lines(cell, ("ov1", "ov2")).items():
            print(f"{h}'s node.log about ov1, ov2:", *lines, sep="\n  ")
    assert where_now == want, (where_now, said)
    for name, [(h, v)] in loc.items():
        assert v.state == npb.VM_STATE_RUNNING

        async def alive(h=h, name=name):
            vm = {x.spec.name: x for x in (await call(cell, h, "ListVms", npb.ListVmsRequest())).vms}[name]
            return vm.heartbeat > before[name]
        await wait_until(alive, 30, f"{name}'s heartbeat to advance on {h}")
    # the broker answered the candidate request and counted it
    t = GrpcTransport(lambda n: n, RealClock(), security=cell_pki.admin(cell))
    try:
        lc = await t.request(cell["broker"], "BrokerAgent/ListCache", masbpb.ListCacheRequest(), timeout=5)
    finally:
        await t.close()
    assert lc.counters["candidate_requests"] >= 1 and lc.counters["candidates_returned"] >= 1
    # the decision logs kept the SCS run (sampled at rate 1 here) with its inputs and scores
    import json
    import os
    path = os.path.join(_ROOT[0], "ms", "h1", "node", "san-decisions.jsonl")
    scs = [json.loads(line) for line in open(path) if '"kind": "scs"' in line]
    assert scs and scs[0]["selected"] and scs[0]["tasks"] and "fitness" in scs[0]
    # cellctl shows the same: broker cache, negotiations, ASR classes
    out = cellctl(cell, "broker", "cache")
    assert {"h1", "h2", "h3"} <= {e["report"]["host"] for e in out["entries"]}
    out = cellctl(cell, "san")
    assert any(n["state"] == "migrated" for h in out if "negotiations" in h for n in h["negotiations"])
    out = cellctl(cell, "nodes")
    assert all(s["asr_class"].startswith("ASR_CLASS_") for s in out)
    # why that target (issue 29): the round's explanation, from the node that ran it, over gRPC
    ex = cellctl(cell, "san", "explain", done[0].san_id)
    check_san_round(ex)
    assert ex["outcome"] == "migrated" and ex["chosen"] == r.dst and ex["vm"] == r.vm
    assert {c["host"] for c in ex["candidates"]} <= {"h2", "h3"} and ex["broker"] == "ba1"
    for name in ("ov1", "ov2"):
        for h, _ in (await where(cell)).get(name, []):
            await call(cell, h, "StopVm", npb.StopVmRequest(name=name), timeout=60)


_ROOT: list = []      # the session's state root, set by the fixture


def node_log_lines(cell, names, last=15) -> dict:
    """What each node daemon logged about *names*: for a failure message, so that a VM found in
    the wrong place says how it got there."""
    import os
    out = {}
    for h in cell["hosts"]:
        path = os.path.join(_ROOT[0], "ms", h, "logs", "node.log")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                out[h] = [line.rstrip() for line in f if any(n in line for n in names)][-last:]
    return out


def cellctl(cell, *args):
    import json
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "cellbed.cli.main", "--cell", "ms", "--state-root", _ROOT[0], "--json",
                        *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
