"""A GM finds launches its LM lost in a restart (issue 12): a STARTING task its LM does not hold at
two looks in a row is requeued; one the restarted LM adopted running becomes RUNNING; an LM that
does not answer changes nothing."""
import asyncio
import collections
import types

from cellbed.controller.megha.alloc import AllocClock
from cellbed.controller.megha.gm_events import TaskEvents
from cellbed.controller.megha.gm_table import TaskTable
from cellbed.controller.megha.gm_task import QUEUED, RUNNING, STARTING, GmTask
from cellbed.controller.megha.queues import MemoryQueueStore, UserQueues
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb


class FakeLinks:
    """lm1, answering FindTasks with the tasks in *held* (or UNAVAILABLE when *down*)."""

    def __init__(self, held, down=False):
        self.held, self.down = held, down

    async def ask(self, lm, method, req):
        assert (lm, method) == ("lm1", "LocalMaster/FindTasks")
        if self.down:
            raise errors.Unavailable("lm1 down")
        return meghapb.FindTasksResponse(found=[meghapb.LmTaskRecord(task=meghapb.MeghaTask(name=n), state=s)
                                                for n, s in self.held.items() if n in req.names])


class Clock:
    def now(self):
        return 100.0


def gm_parts(held, down=False):
    store = MemoryQueueStore()
    table = TaskTable("gm1", store, ["u1"])
    counters = collections.Counter()
    events = TaskEvents("gm1", table, FakeLinks(held, down), Clock(), types.SimpleNamespace(), counters,
                        {"u1": collections.Counter()}, ["u1"], "megha", collections.deque(), [])
    return table, events, counters, store


def add(table, name):
    gt = GmTask(meghapb.MeghaTask(name=name, user="u1"), (), 1.0, 1.0, AllocClock(arrival=1.0, queued_at=1.0),
                state=STARTING, placement=meghapb.Placement(lm="lm1"))
    table.tasks[name] = gt
    return gt


async def test_a_lost_launch_is_requeued_after_two_looks_and_an_adopted_one_runs():
    table, events, counters, store = gm_parts(held={"adopted": meghapb.TASK_STATE_RUNNING,
                                                    "booting": meghapb.TASK_STATE_STARTING})
    for n in ("lost", "adopted", "booting"):
        add(table, n)
    waiter = asyncio.get_running_loop().create_future()
    table.tasks["adopted"].waiters.append(waiter)
    misses = {}
    await events.look_up_starting(misses)
    assert table.tasks["lost"].state == STARTING and misses == {"lost": 1, "adopted": 0, "booting": 0}
    assert table.tasks["adopted"].state == RUNNING and waiter.done()
    await events.look_up_starting(misses)
    lost = table.tasks["lost"]
    assert lost.state == QUEUED and "no longer holds it" in lost.detail and lost.placement is None
    assert table.pop() == ("u1", "lost") and [n for n, _ in store.load("gm1")] == ["lost"]
    assert counters["launches_lost_by_lm"] == 1 and counters["launch_failures"] == 1
    assert table.tasks["booting"].state == STARTING


async def test_an_lm_that_does_not_answer_changes_nothing():
    table, events, counters, store = gm_parts(held={}, down=True)
    add(table, "t")
    misses = {}
    for _ in range(3):
        await events.look_up_starting(misses)
    assert table.tasks["t"].state == STARTING and table.pop() is None and store.load("gm1") == []
