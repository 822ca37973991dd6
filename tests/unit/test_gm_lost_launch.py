"""A GM finds launches its LM lost in a restart (issue 12): a STARTING task its LM does not hold at
two looks in a row is requeued; one the restarted LM adopted running becomes RUNNING; an LM that
does not answer changes nothing."""
import collections
import types

from cellbed.controller.megha.gm_events import EventsMixin
from cellbed.controller.megha.gm_task import RUNNING, STARTING
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb


class FakeGm(EventsMixin):
    def __init__(self, held, down=False):
        self.name, self.params = "gm1", types.SimpleNamespace(request_timeout_s=1.0)
        self.tasks, self.counters, self.requeued, self.woken = {}, collections.Counter(), [], []
        self.held, self.down = held, down
        self._work = types.SimpleNamespace(set=lambda: None)
        self.transport = types.SimpleNamespace(request=self._request)

    async def _request(self, target, method, req, timeout):
        assert (target, method) == ("lm1-address", "LocalMaster/FindTasks")
        if self.down:
            raise errors.Unavailable("lm1 down")
        return meghapb.FindTasksResponse(found=[meghapb.LmTaskRecord(task=meghapb.MeghaTask(name=n), state=s)
                                                for n, s in self.held.items() if n in req.names])

    def _target(self, lm):
        return "lm1-address"

    def _requeue(self, gt, ev):
        self.requeued.append((gt.name, ev.kind, ev.detail))

    def _wake(self, gt):
        self.woken.append(gt.name)

    def add(self, name, state=STARTING):
        self.tasks[name] = types.SimpleNamespace(name=name, state=state, inflight=False, detail="",
                                                 placement=meghapb.Placement(lm="lm1"), task=meghapb.MeghaTask(name=name))


async def test_a_lost_launch_is_requeued_after_two_looks_and_an_adopted_one_runs():
    gm = FakeGm(held={"adopted": meghapb.TASK_STATE_RUNNING, "booting": meghapb.TASK_STATE_STARTING})
    for n in ("lost", "adopted", "booting"):
        gm.add(n)
    misses = {}
    await gm._look_up_starting(misses)
    assert gm.requeued == [] and misses == {"lost": 1, "adopted": 0, "booting": 0}
    assert gm.tasks["adopted"].state == RUNNING and gm.woken == ["adopted"]
    await gm._look_up_starting(misses)
    assert [(n, k) for n, k, _ in gm.requeued] == [("lost", meghapb.TASK_EVENT_KIND_FAILED)]
    assert "no longer holds it" in gm.requeued[0][2] and gm.counters["launches_lost_by_lm"] == 1
    assert gm.tasks["booting"].state == STARTING


async def test_an_lm_that_does_not_answer_changes_nothing():
    gm = FakeGm(held={}, down=True)
    gm.add("t")
    misses = {}
    for _ in range(3):
        await gm._look_up_starting(misses)
    assert gm.requeued == [] and gm.tasks["t"].state == STARTING
