"""SAN policies handed in through the assembly decide a model cell's negotiations (issue 26): an
SCS callable picks the tasks that move, a target-order callable picks where they go. Real
NodeAgent + SanAgent + BrokerAgent code, in-process transport, virtual time."""
from __future__ import annotations

import dataclasses

from cellbed import assembly
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.daemon.san import SanConfig, san_policies
from cellbed.domain.vm import VmSpec
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.policy.masb.scs import Selection
from cellbed.runtime import run_virtual
from cellbed.v1 import node_pb2 as npb

CFG = SanConfig(window_s=5.0, report_period_s=10.0)


async def overloaded_cell(policies):
    """4 hosts of 4 cores, 1 broker; h1 runs 8 tasks of 0.6 cores (4.8 > 0.9 × 4) and its SAN has
    *policies*, the others the default ones. Returns (env, hosts, sans, broker)."""
    env = assembly.model_env(1, 0.001)
    broker, _ = assembly.build_broker(env, "ba0", params=BrokerParams(node_expiry_s=60.0), peers=["ba0"],
                                      cell="cell", sync_period_s=20.0)
    await broker.start()
    hosts, sans = {}, {}
    for i in range(1, 5):
        name = f"h{i}"
        h = await assembly.model_host(env, assembly.model_config(name, 4.0, 8192, monitor_period_s=10.0))
        s, _ = assembly.build_san(env, h.agent, CFG, ["ba0"], "cell", policies=policies if name == "h1" else None)
        s.start()
        s.publish_report()
        hosts[name], sans[name] = h.agent, s
    cli = env.net.transport("cli")
    for i in range(8):       # light at admission, then the load rises (as `vm set-workload` does)
        await hosts["h1"].start_vm(VmSpec(name=f"t{i}", mem_mib=1024, vcpus=1, cpu_load=0.05, wss_mib=512))
    for i in range(8):
        await cli.request("h1", "NodeAgent/SetWorkload", npb.SetWorkloadRequest(
            name=f"t{i}", workload=npb.Workload(cpu_load=0.6)))
    return env, hosts, sans, broker


async def shed(policies):
    """Run the overloaded cell for 2 simulated minutes: h1's negotiations as (vm, state, target,
    [(step kind, host)])."""
    env, hosts, sans, broker = await overloaded_cell(policies)
    await env.clock.sleep(120.0)
    negs = [(n.vm, n.state, n.target, [(s.kind, s.host) for s in n.steps]) for n in sans["h1"].recent]
    for s in sans.values():
        s.disable()
    while any(s.active for s in sans.values()):
        await env.clock.sleep(1.0)
    for s in sans.values():
        await s.stop()
    for h in hosts.values():
        await h.stop()
    await broker.stop()
    return negs


def test_an_scs_callable_from_the_assembly_picks_the_tasks_that_move():
    chosen = []

    def last_named(capacity, used, tasks, prod_requested, rng) -> Selection:
        """The movable task with the highest name, one per run (the Tabu Search would weigh costs)."""
        name = max(t.name for t in tasks)
        chosen.append(name)
        return Selection((name,), (), 1.0, True, 1, 0.0, 1.0)

    negs = run_virtual(shed(dataclasses.replace(san_policies(CFG, PolicyBook()), scs=last_named)))
    assert chosen[:2] == ["t7", "t6"]
    assert [vm for vm, *_ in negs] == chosen[:len(negs)]
    assert [state for _, state, *_ in negs[:2]] == ["migrated", "migrated"]


def test_a_target_order_from_the_assembly_decides_where_the_tasks_go():
    def by_name(reverse):
        def order(acceptors, task_used, rng):
            return [(a, 1.0) for a in sorted(acceptors, key=lambda a: a.host, reverse=reverse)]
        return order

    first = {}
    for reverse in (False, True):
        negs = run_virtual(shed(dataclasses.replace(san_policies(CFG, PolicyBook()), order_targets=by_name(reverse))))
        migrated = [(t, steps) for _, state, t, steps in negs if state == "migrated"]
        assert len(migrated) >= 2
        first[reverse] = migrated[0][0]
        for target, steps in migrated:     # step 5 tries the acceptors in the order the callable gave
            acceptors = sorted((h for k, h in steps if k == "acceptance"), reverse=reverse)
            tried = [h for k, h in steps if k in ("refused", "process")]
            assert tried == acceptors[:len(tried)] and tried[-1] == target
    assert first == {False: "h2", True: "h4"}
