"""controller/megha/prom.py: the controller's collector on the GM and LM of a small Megha model cell
(agents built by cellbed.assembly, virtual time): queue lengths, allocation-time histograms by part,
the LM's role, queues and cluster, and the controller config's metrics_port."""
from __future__ import annotations

import pytest

from cellbed.controller.megha.config import ControllerConfig
from cellbed.controller.megha.prom import ControllerCollector, PARTS, metrics_address
from cellbed.domain import errors, wire
from cellbed.model.cell import ModelCell
from cellbed.model.megha import megha_cell, megha_users
from cellbed.runtime import run_virtual
from cellbed.v1 import megha_pb2 as meghapb, node_pb2 as npb
from tests.unit.promtools import scrape, value

CORES = 4 * 2.0        # 4 hosts of 2 cores


def test_gm_queues_allocation_histograms_and_the_lm():
    cfg = megha_cell(frontend="megha", nodes=4, node_cpu=2.0, node_mem_mib=8192, gms=1, lms=1, seed=4)
    user = megha_users(cfg)[0]
    n_tasks = int(CORES) + 3                           # 1 core each: 3 cannot start while the others run

    async def main():
        cell = await ModelCell(cfg).frontend.build()
        try:
            c = ControllerCollector(cell.gms, cell.lms)
            _, before = scrape(c)
            client = cell.net.transport("client")
            for i in range(n_tasks):
                t = meghapb.MeghaTask(name=f"t{i}", user=user, request=wire.resources(1.0, 512), duration_s=3600.0,
                                      workload=npb.Workload(cpu_load=0.0))
                await client.request("gm1", "GlobalMaster/Submit", meghapb.SubmitRequest(task=t), timeout=10)
            gm = cell.gms["gm1"]
            deadline = cell.clock.monotonic() + 120
            while len(gm.records) < CORES and cell.clock.monotonic() < deadline:
                await cell.clock.sleep(0.5)
            await cell.clock.sleep(5.0)                # the LM's events acknowledged, the parked tasks retried
            _, s = scrape(c)
            return before, s, list(gm.records)
        finally:
            await cell.close()
    before, s, records = run_virtual(main())
    assert len(records) == CORES
    for part in PARTS:
        assert value(before, "cellbed_gm_allocation_seconds_count", agent="gm1", part=part) == 0
    assert value(s, "cellbed_gm_allocation_seconds_count", agent="gm1", part="total") == len(records)
    assert value(s, "cellbed_gm_allocation_seconds_sum", agent="gm1", part="total") == pytest.approx(
        sum(r.total_ms for r in records) / 1000)
    parts_sum = sum(value(s, "cellbed_gm_allocation_seconds_sum", agent="gm1", part=p) for p in PARTS if p != "total")
    assert parts_sum == pytest.approx(value(s, "cellbed_gm_allocation_seconds_sum", agent="gm1", part="total"))
    assert value(s, "cellbed_gm_allocation_seconds_sum", agent="gm1", part="communication") == pytest.approx(
        sum(r.communication_ms for r in records) / 1000)
    waiting = (value(s, "cellbed_gm_queued_tasks", agent="gm1", user=user, state="ready")
               + value(s, "cellbed_gm_queued_tasks", agent="gm1", user=user, state="parked"))
    assert waiting == n_tasks - len(records)
    assert value(s, "cellbed_gm_running_tasks", agent="gm1", user=user) == len(records)
    assert value(s, "cellbed_gm_view_staleness_seconds", agent="gm1", lm="lm1") >= 0
    assert value(s, "cellbed_gm_events_total", agent="gm1", event="placed") == len(records)
    assert value(s, "cellbed_lm_role", agent="lm1", lm="lm1", role="active") == 1
    assert value(s, "cellbed_lm_epoch", agent="lm1") == 1
    assert value(s, "cellbed_lm_tasks", agent="lm1") == len(records)
    assert value(s, "cellbed_lm_cpu_capacity_cores", agent="lm1") == CORES
    assert value(s, "cellbed_lm_cpu_allocated_cores", agent="lm1") == pytest.approx(1.0 * len(records))
    assert value(s, "cellbed_lm_queue_length", agent="lm1", queue="validation") == 0
    assert value(s, "cellbed_lm_queue_length", agent="lm1", queue="events") == 0
    assert value(s, "cellbed_lm_events_total", agent="lm1", event="launches") >= 1


def config(**extra) -> dict:
    return {"agents": {"gm1": "10.231.15.1:50071", "lm1a": "10.231.15.2:50081"}, "hosts": {"h1": "10.231.15.11:50051"},
            "gm": [{"name": "gm1"}], "lm": [{"name": "lm1", "instances": ["lm1a"], "hosts": ["h1"]}],
            "queue": [{"user": "u1", "share": 1.0, "gm": "gm1"}], **extra}


def test_controller_config_metrics_port_and_address():
    assert ControllerConfig.from_dict(config()).metrics_port == 0
    assert ControllerConfig.from_dict(config(metrics_port=9466)).metrics_port == 9466
    for bad in (70000, -1, "9466", True):
        with pytest.raises(errors.InvalidArgument, match="metrics_port"):
            ControllerConfig.from_dict(config(metrics_port=bad))
    agents = config()["agents"]
    assert metrics_address(agents, ["lm1a", "gm1"]) == "10.231.15.2"
    assert metrics_address(agents, ["gm1"]) == "10.231.15.1"
