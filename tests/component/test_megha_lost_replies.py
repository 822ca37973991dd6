"""Megha on a model cell when a GM's request to an LM loses its reply (seed 001's "the LM may
have taken it"): the GM asks that LM (FindTasks) before placing the task anywhere else, places it
once, and its allocation record still gets the LM's start time, whichever comes first: the LM's
STARTED event or the GM's question."""
from __future__ import annotations

import pytest

from cellbed.controller.megha.gm_servicer import GlobalMasterServicer
from cellbed.domain import errors
from tests.component.test_megha_model import (RUNNING, ModelCellConfig, in_cell, running_on, status, submit, task,
                                              vwait)


class LosesReplies:
    """Fault injection: the LM does the work, but the GM's first *n* Launch calls time out."""

    def __init__(self, inner, n: int) -> None:
        self.inner, self.n = inner, n

    async def request(self, target, method, msg, timeout=10.0):
        reply = await self.inner.request(target, method, msg, timeout)
        if method == "LocalMaster/Launch" and self.n > 0:
            self.n -= 1
            raise errors.DeadlineExceeded(f"{target} {method}: no reply within {timeout:g} s (injected)")
        return reply

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_task_whose_launch_reply_is_lost_is_not_placed_twice():
    """The LM accepted and started the task but the GM never heard: before placing it anywhere
    else the GM asks that LM (FindTasks) and finds it there."""
    cfg = ModelCellConfig(frontend="megha", nodes=4, node_cpu=2.0, gms=1, lms=2, seed=8)

    async def body(cell):
        gm = cell.gms["gm1"]
        gm.transport = LosesReplies(gm.transport, 1)
        st = await submit(cell, task("lost", "u1", cpu=1.0), wait_s=10)
        await vwait(cell, lambda: gm.tasks["lost"].state == RUNNING, 30, "the task known as running")
        return st, running_on(cell), dict(gm.counters), {n: dict(a.counters) for n, a in cell.lms.items()}
    st, where, gmc, lmc = in_cell(cfg, body)
    assert list(where) == ["lost"]                                        # exactly one VM
    assert sum(c.get("launches", 0) + c.get("repartitions", 0) for c in lmc.values()) == 1
    assert gmc["lm_unavailable"] == 1
    assert gmc.get("found_after_timeout", 0) + gmc.get("started_while_queued", 0) == 1, gmc


class LosesReplyOfRunning:
    """Fault injection: the GM's Launch of *name* times out after the LM started it; with
    *early*, after its STARTED event reached the GM (held there for the lost reply), else before
    (the GM's copy of GlobalMaster refuses the LM's events until the GM found the task by FindTasks)."""

    def __init__(self, cell, gm, name: str, early: bool) -> None:
        self.cell, self.gm, self.inner, self.name, self.early = cell, gm, gm.transport, name, early
        self.held = 0
        if not early:
            cell.net.serve("gm1", "GlobalMaster", self)
            self.servicer = GlobalMasterServicer(gm)

    async def request(self, target, method, msg, timeout=10.0):
        reply = await self.inner.request(target, method, msg, timeout)
        if method == "LocalMaster/Launch" and msg.task.name == self.name:
            lm = self.cell.lms[target]
            await vwait(self.cell, lambda: lm.cluster.tasks[self.name].state == "running", 60, "the LM's start")
            if self.early:
                await vwait(self.cell, lambda: self.gm.tasks[self.name].early is not None, 60, "the STARTED event")
            raise errors.DeadlineExceeded(f"{target} {method}: no reply within {timeout:g} s (injected)")
        return reply

    async def ReportTaskEvents(self, req, ctx):
        if not self.gm.counters["found_after_timeout"]:
            self.held += 1
            raise errors.Unavailable("gm1: the STARTED event held until FindTasks (injected)")
        return await self.servicer.ReportTaskEvents(req, ctx)

    def __getattr__(self, name):
        return getattr(self.inner if not hasattr(GlobalMasterServicer, name) else self.servicer, name)


@pytest.mark.parametrize("early", [True, False], ids=["event-before-the-lost-reply", "event-after-findtasks"])
def test_a_task_found_running_after_a_lost_reply_has_its_allocation_time(early):
    """The LM started the task but the GM's Launch timed out, and FindTasks finds it running: its
    STARTED event, whenever it comes, completes the allocation record (before the fix the GM set
    it RUNNING with no start time, and a real run's runner wrote a start of -7.2e9 s)."""
    cfg = ModelCellConfig(frontend="megha", nodes=4, node_cpu=2.0, gms=1, lms=2, seed=8)

    async def body(cell):
        gm = cell.gms["gm1"]
        fault = LosesReplyOfRunning(cell, gm, "lost", early)
        gm.transport = fault
        await submit(cell, task("lost", "u1", cpu=1.0), wait_s=0)
        await vwait(cell, lambda: gm.tasks["lost"].state == RUNNING, 60, "the task known as running")
        lm = next(a for a in cell.lms.values() if a.cluster is not None and "lost" in a.cluster.tasks)
        return (await status(cell, "lost"), lm.cluster.tasks["lost"].start_unix_s, [r for r in gm.records if r.task == "lost"],
                dict(gm.counters), fault.held)
    st, lm_start, recs, gmc, held = in_cell(cfg, body)
    assert gmc["found_after_timeout"] == 1 and gmc["lm_unavailable"] == 1
    assert (held > 0) == (not early)                   # the late case really held the event back
    assert st.state == RUNNING and st.allocation.start_unix_s == pytest.approx(lm_start) and lm_start > 0
    assert len(recs) == 1 and recs[0].start_s == pytest.approx(lm_start) and recs[0].outcome == "placed"
    assert st.allocation.total_ms == pytest.approx(recs[0].total_ms)
