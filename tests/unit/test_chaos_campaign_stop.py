"""A campaign whose cell did not settle after a step stops there: the steps after it would inject
faults into a broken cell and each wait the whole settle time (chaos seed 4 before its fix: 12
more steps of 300 s, past CI's 90 minutes). Only the loop is tested here: the steps are stubs."""
import asyncio
import io

from cellbed.experiment.chaos.campaign import SETTLE_S, Campaign
from cellbed.experiment.chaos.plan import Step


class Stubbed(Campaign):
    """The loop of Campaign.run with steps whose violations the test gives."""

    def __init__(self, violations: list[list[str]]) -> None:     # no cell: Campaign.__init__ loads one
        self.violations_of, self.lines, self.ran = violations, [], []
        self.log = self.lines.append
        self._hist = io.StringIO()
        self.stopped_after = 0

    async def _where(self):
        return {}

    async def fill_pool(self):
        return None

    async def _stop_pool(self):
        self.lines.append("pool stopped")

    async def step(self, s: Step) -> dict:
        self.ran.append(s.index)
        return {"vm": "cv1", "records": [], "settle_s": 1.0, "violations": self.violations_of[s.index]}


def steps(n: int) -> list[Step]:
    return [Step(i, "migration", "link_cut", "precopy") for i in range(n)]


def test_a_step_that_did_not_settle_ends_the_campaign_and_the_pool_is_still_stopped():
    c = Stubbed([[], ["[step 1] orphaned: cv1: runs on h1 but no daemon lists it",
                      f"not_settled: after {SETTLE_S:.0f} s: silent [], leases [], unresolved []"], [], []])
    rows = asyncio.run(c.run(steps(4)))
    assert c.ran == [0, 1] and len(rows) == 2 and c.stopped_after == 2
    assert any("stopped after step 2 of 4" in x for x in c.lines) and c.lines[-1] == "pool stopped"


def test_other_violations_do_not_stop_it():
    c = Stubbed([[], ["[step 1] duplicated: cv1 on h1 and h2"], [], []])
    rows = asyncio.run(c.run(steps(4)))
    assert c.ran == [0, 1, 2, 3] and len(rows) == 4 and c.stopped_after == 0
