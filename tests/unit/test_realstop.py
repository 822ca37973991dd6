"""The live runner's StopVm retries (cellbed/experiment/real/stop.py), on a virtual clock: a refusal
while a migration runs is waited out, for longer than a migration can take."""
from __future__ import annotations

import asyncio

import pytest

from cellbed.domain import errors
from cellbed.experiment.real.stop import STOP_BUDGET_S, retry_waits, stop_until_done
from cellbed.runtime.clock import run_virtual


@pytest.mark.parametrize("budget, waits", [
    (0.0, []),
    (1.9, []),
    (2.0, [2.0]),
    (30.0, [2.0, 4.0, 6.0, 8.0, 10.0]),      # 2 + 4 + 6 + 8 + 10 = 30
    (45.0, [2.0, 4.0, 6.0, 8.0, 10.0, 10.0]),  # 40; a further 10 would make 50 > 45
])
def test_waits_grow_by_the_step_up_to_the_cap_within_the_budget(budget, waits):
    assert list(retry_waits(budget)) == waits


def test_the_default_budget_outlasts_a_migration_with_its_verification():
    waits = list(retry_waits())
    assert sum(waits) == STOP_BUDGET_S == 200.0
    assert sum(waits) > 120.0 + 20.0           # the node's migration_timeout_s + verify_timeout_s


class Node:
    """Refuses StopVm with *refusal* until *busy_until* (virtual s), as a source does while the VM
    migrates (FAILED_PRECONDITION), or a node that restarts (UNAVAILABLE) or answers late."""

    def __init__(self, busy_until: float, refusal: type = errors.FailedPrecondition) -> None:
        self.busy_until, self.refusal = busy_until, refusal
        self.calls: list[float] = []

    async def stop(self) -> None:
        now = asyncio.get_running_loop().time()
        self.calls.append(now)
        if now < self.busy_until:
            raise self.refusal("VM 'v' is migrating to host h2 (migration m1)")


async def nobody() -> str:
    return ""


@pytest.mark.parametrize("refusal", [errors.FailedPrecondition, errors.Unavailable, errors.DeadlineExceeded])
def test_a_stop_refused_for_155_s_of_migration_still_stops_the_vm(refusal):
    node = Node(busy_until=155.0, refusal=refusal)

    async def main():
        return await stop_until_done(node.stop, nobody), asyncio.get_running_loop().time()

    outcome, t = run_virtual(main())
    assert outcome == "stopped"
    # calls at 0, 2, 6, 12, 20, 30, then every 10 s: 150 is refused, 160 is the first after 155 s
    assert t == 160.0 and node.calls[-1] == 160.0
    assert len(node.calls) == 1 + 5 + 13       # the first call, five waits to 30 s, 13 of 10 s


def test_a_stop_refused_past_the_budget_gives_up_after_it():
    node = Node(busy_until=float("inf"))

    async def main():
        return await stop_until_done(node.stop, nobody), asyncio.get_running_loop().time()

    outcome, t = run_virtual(main())
    assert outcome == "refused"
    assert t == STOP_BUDGET_S and len(node.calls) == len(list(retry_waits())) + 1


def test_a_vm_that_moved_is_stopped_on_its_new_host_at_once():
    where = {"host": "h1"}
    asked: list[str] = []

    async def stop():
        asked.append(where["host"])
        if where["host"] == "h1":
            raise errors.NotFound("no VM 'v' on h1")

    async def locate():
        where["host"] = "h2"
        return "h2"

    async def main():
        return await stop_until_done(stop, locate), asyncio.get_running_loop().time()

    assert run_virtual(main()) == ("stopped", 0.0)
    assert asked == ["h1", "h2"]


def test_a_vm_no_host_lists_is_gone_without_waiting():
    async def stop():
        raise errors.NotFound("no VM 'v' on h1")

    async def main():
        return await stop_until_done(stop, nobody), asyncio.get_running_loop().time()

    assert run_virtual(main()) == ("gone", 0.0)


def test_hosts_that_keep_disagreeing_fall_back_to_waiting():
    """Every host says NotFound yet one lists it: after MOVES_AT_ONCE immediate retries it waits."""
    calls: list[float] = []

    async def stop():
        calls.append(asyncio.get_running_loop().time())
        raise errors.NotFound("no VM 'v' here")

    async def somewhere():
        return "h2"

    async def main():
        return await stop_until_done(stop, somewhere, waits=[5.0])

    assert run_virtual(main()) == "refused"
    assert calls == [0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0]


@pytest.mark.parametrize("refusal", [errors.InvalidArgument, errors.CellbedError, errors.AlreadyExists])
def test_a_refusal_that_would_come_again_is_not_asked_again(refusal):
    """A bad request, or PERMISSION_DENIED (the base error on the client's side), gives up at once."""
    node = Node(busy_until=float("inf"), refusal=refusal)

    async def main():
        return await stop_until_done(node.stop, nobody), asyncio.get_running_loop().time()

    assert run_virtual(main()) == ("refused", 0.0)
    assert node.calls == [0.0]
