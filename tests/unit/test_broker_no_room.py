"""A broker's initial allocation for a production task that the RUS rule keeps off nodes (issue
16, the 100,000-node cost): with ``pool_sampling = draw`` a scan that cannot find a node is not
drawn in random order any more. The outcome must be the one a scan gives: the same refusal,
counted under the same reason, every fresh node examined; and a node that passes is still found,
whether it is in the drawn head or in the rest."""
import pytest

from cellbed import assembly
from cellbed.domain import errors, wire
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.runtime.clock import run_virtual
from cellbed.v1 import masb_pb2 as masbpb

N = 1000


def report(host: str, prod_cpu: float, now: float) -> masbpb.NodeReport:
    return masbpb.NodeReport(host=host, capacity=wire.resources(4.0, 8192), used=wire.resources(1.0, 1024),
                             requested=wire.resources(1.0, 1024), prod_requested=wire.resources(prod_cpu, 1024),
                             sampled_unix_s=now)


def allocate(sampling: str, roomy: set[int], rng_state: bool = False):
    """One production task of 0.5 cores on N nodes, of which only *roomy* pass the RUS rule
    (production requests 0.5 of 4 cores there, 3.5 elsewhere; max_util 0.9)."""
    async def main():
        env = assembly.model_env(3)
        await env.clock.sleep(10.0)          # virtual time: the reports below are stamped 10 s in
        b, _ = assembly.build_broker(env, "ba1", params=BrokerParams(pool_sampling=sampling, initial_scan_limit=10),
                                     peers=[], cell="c")
        now = env.clock.now()
        for i in range(N):
            b.on_report("t", report(f"h{i:04d}", 0.5 if i in roomy else 3.5, now))
        task = masbpb.TaskInfo(name="t1", used=wire.resources(0.5, 256), requested=wire.resources(0.5, 256),
                               mem_mib=256, production=True, priority=10)
        try:
            out = await b.allocate(masbpb.AllocateTaskRequest(task=task, launch=False))
        except errors.FailedPrecondition as e:
            return (None, str(e), dict(b.counters)) + ((b.rng.bit_generator.state,) if rng_state else ())
        return out.host, "", dict(b.counters)
    return run_virtual(main())


@pytest.mark.parametrize("sampling", ["permute", "draw"])
def test_no_node_passes_rus_the_refusal_is_a_full_scans(sampling):
    host, why, counters = allocate(sampling, set())
    assert host is None
    assert f"0 matching of {N} examined ({N} fresh), none has room" in why
    assert counters["allocations_no_room_production_rus"] == 1
    assert counters.get("initial_scans_skipped", 0) == (sampling == "draw")


@pytest.mark.parametrize("sampling", ["permute", "draw"])
@pytest.mark.parametrize("roomy", [{7}, {3, 500, 999}, set(range(0, N, 2))])
def test_a_node_that_passes_rus_is_found(sampling, roomy):
    host, why, counters = allocate(sampling, roomy)
    assert why == "" and int(host[1:]) in roomy
    assert counters.get("allocations_no_room", 0) == 0


def test_draw_skips_the_permutation_a_refusal_would_not_use():
    """The shortcut is taken: after the refusal, the broker's random stream has moved by the
    head's draw only (2 x initial_scan_limit nodes), not by a permutation of the other 980."""
    _, _, _, after = allocate("draw", set(), rng_state=True)
    ref = assembly.model_env(3).np_rng(*b"ba1")
    ref.choice(N, size=20, replace=False)
    assert after == ref.bit_generator.state
    ref.permutation(N - 20)
    assert after != ref.bit_generator.state
