"""The virtual-time loop and the in-process transport that model cells run on."""
import asyncio

import pytest

from cellbed.domain import errors
from cellbed.runtime import InProcNetwork, VirtualClock, agent_rng, run_virtual
from cellbed.runtime.clock import VirtualTimeDeadlock
from cellbed.runtime.status import error_for
from cellbed.runtime.transport import topic_matches
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import node_pb2 as npb


def test_virtual_time_jumps_to_the_next_timer():
    async def main():
        c = VirtualClock(epoch_unix_s=1000.0)
        t0 = c.monotonic()
        order = []

        async def w(d):
            await c.sleep(d)
            order.append((d, c.monotonic() - t0))
        await asyncio.gather(w(3600), w(1), w(60))
        try:
            await asyncio.wait_for(asyncio.sleep(10_000), timeout=5)   # asyncio's own timeouts are virtual too
        except asyncio.TimeoutError:
            order.append(("timeout", c.monotonic() - t0))
        return order, c.now() - c.monotonic()
    order, epoch = run_virtual(main())
    assert order == [(1, 1.0), (60, 60.0), (3600, 3600.0), ("timeout", 3605.0)]
    assert epoch == 1000.0


def test_a_stuck_model_is_reported_not_hung():
    async def main():
        await asyncio.Event().wait()      # nothing will ever set it
    with pytest.raises(VirtualTimeDeadlock):
        run_virtual(main())


def test_executor_work_completes_under_virtual_time():
    async def main():
        return await asyncio.get_running_loop().run_in_executor(None, sum, [1, 2, 3])
    assert run_virtual(main()) == 6


class Echo:
    """A servicer shaped like the gRPC ones: (request, context), project errors mapped by handles_errors."""

    def __init__(self, clock):
        self.clock = clock

    @handles_errors
    async def StopVm(self, request, context):
        if request.name == "missing":
            raise errors.NotFound("VM 'missing' is not here")
        if request.name == "slow":
            await self.clock.sleep(100)
        return npb.StopVmResponse()


def test_inproc_request_latency_errors_timeouts_and_down_endpoints():
    async def main():
        c = VirtualClock()
        net = InProcNetwork(c, latency_s=0.01)
        net.serve("h1", "NodeAgent", Echo(c))
        t = net.transport("cli")
        t0 = c.monotonic()
        await t.request("h1", "NodeAgent/StopVm", npb.StopVmRequest(name="x"))
        rtt = c.monotonic() - t0
        out = [rtt]
        for name, target, timeout in (("missing", "h1", 5), ("slow", "h1", 5), ("x", "h9", 5)):
            try:
                await t.request(target, "NodeAgent/StopVm", npb.StopVmRequest(name=name), timeout=timeout)
            except errors.CellbedError as e:
                out.append(type(e).__name__)
        net.set_down("h1")
        try:
            await t.request("h1", "NodeAgent/StopVm", npb.StopVmRequest(name="x"))
        except errors.Unavailable:
            out.append("down")
        return out
    rtt, *errs = run_virtual(main())
    assert rtt == pytest.approx(0.02)
    assert errs == ["NotFound", "DeadlineExceeded", "Unavailable", "down"]


def test_inproc_pubsub_wildcards_and_latency():
    async def main():
        c = VirtualClock()
        net = InProcNetwork(c, latency_s=0.5)
        got = []
        net.transport("b").subscribe("cellbed/c/masb/report/+", lambda t, m: got.append((t, c.monotonic())), None)
        net.transport("h1").publish("cellbed/c/masb/report/h1", npb.StopVmResponse())
        net.transport("h1").publish("cellbed/c/other/h1", npb.StopVmResponse())
        await c.sleep(1)
        return got
    assert run_virtual(main()) == [("cellbed/c/masb/report/h1", 0.5)]


def test_topics_and_errors_and_rngs():
    assert topic_matches("a/+/c", "a/b/c") and topic_matches("a/#", "a/b/c") and not topic_matches("a/+", "a/b/c")
    import grpc
    assert isinstance(error_for(grpc.StatusCode.FAILED_PRECONDITION, "x"), errors.FailedPrecondition)
    assert agent_rng(1, "h1").random() == agent_rng(1, "h1").random() != agent_rng(1, "h2").random()
