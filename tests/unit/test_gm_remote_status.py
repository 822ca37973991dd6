"""A restarted GM answers for a task it placed before the restart by asking its LMs (GetTask's
remote status). Found by issue 27's two-lane run: right after lm1b took over from lm1a, the GM asked
only the dead lm1a and answered NOT_FOUND for a task lm1 held. Now each LM's instances are tried in
turn, and NOT_FOUND is said only when every LM answered; otherwise UNAVAILABLE, "ask again"."""
import collections

import pytest

from cellbed.controller.megha.gm_links import LmLinks
from cellbed.controller.megha.gm_recover import Recovery
from cellbed.domain import errors
from cellbed.v1 import megha_pb2 as meghapb


class Transport:
    """Instances that hold tasks ({instance: {name: host}}), and the ones that are down."""

    def __init__(self, held: dict, down: set):
        self.held, self.down, self.asked = held, down, []

    async def request(self, target, method, req, timeout):
        assert method == "LocalMaster/FindTasks"
        self.asked.append(target)
        if target in self.down:
            raise errors.Unavailable(f"{target}: failed to connect")
        return meghapb.FindTasksResponse(found=[
            meghapb.LmTaskRecord(task=meghapb.MeghaTask(name=n, user="alice"), state=meghapb.TASK_STATE_RUNNING, host=h)
            for n, h in self.held.get(target, {}).items() if n in req.names])


def recovery(held, down):
    t = Transport(held, down)
    links = LmLinks(t, {"lm1": ["lm1a", "lm1b"], "lm2": ["lm2a"]}, collections.Counter(), 5.0)
    return Recovery("gm1", links, None, None, collections.Counter()), t


@pytest.mark.parametrize("held, down, want", [
    # the takeover: lm1a dead, lm1b active and holding the task -> found through lm1's other instance
    ({"lm1b": {"mt00": "h1"}}, {"lm1a"}, ("lm1", "h1")),
    # the task on lm2 while lm1 does not answer at all -> found on lm2
    ({"lm2a": {"mt00": "h3"}}, {"lm1a", "lm1b"}, ("lm2", "h3")),
    # every LM answered, none holds it -> NOT_FOUND
    ({}, set(), errors.NotFound),
    # lm1 answered on neither instance, lm2 does not hold it -> UNAVAILABLE: lm1 may hold it
    ({}, {"lm1a", "lm1b"}, errors.Unavailable),
])
async def test_remote_status(held, down, want):
    rec, t = recovery(held, down)
    if isinstance(want, type):
        with pytest.raises(want) as e:
            await rec.remote_status("mt00")
        if want is errors.Unavailable:
            assert "lm1 (lm1b: failed to connect)" in str(e.value) and "ask again" in str(e.value)
        return
    st = await rec.remote_status("mt00")
    assert (st.placement.lm, st.placement.host, st.state) == (*want, meghapb.TASK_STATE_RUNNING)


async def test_the_instance_that_answered_is_asked_first_next_time():
    rec, t = recovery({"lm1b": {"mt00": "h1"}}, {"lm1a"})
    await rec.remote_status("mt00")
    t.asked.clear()
    await rec.remote_status("mt00")
    assert t.asked == ["lm1b"]
