"""The SanAgent's parts (issue 26): a facade over parts that share no private state and hold
neither the SanAgent nor the NodeAgent, policies that arrive through the SanPolicies bundle
(the one handed to the assembly is the one called), and one switch for new rounds."""
from __future__ import annotations

import ast
import dataclasses
import random
from pathlib import Path

from cellbed import assembly
from cellbed.runtime.plugins.book import PolicyBook
from cellbed.daemon.san import SanAgent, SanConfig, san_policies
from cellbed.domain import wire
from cellbed.domain.vm import VmSpec
from cellbed.policy.masb import accept, overload
from cellbed.policy.masb.scs import Selection
from cellbed.runtime import run_virtual
from cellbed.v1 import masb_pb2 as masbpb

REPO = Path(__file__).resolve().parents[2]
PARTS = ("reader", "reporter", "ledger", "steps", "initiator", "watch", "responder")


async def host(env, name="h1", cpu=2.0):
    return (await assembly.model_host(env, assembly.model_config(name, cpu, 2048, monitor_period_s=10.0))).agent


def parts_of(san: SanAgent) -> dict[str, object]:
    out = {p: getattr(san, p) for p in PARTS}
    out["spike"] = san.watch.absorb_spike.__self__          # built only with a spike policy
    return out


def test_no_mixin_is_left_in_the_san_and_the_agent_inherits_nothing():
    found = [f"{p.name}: {n.name}" for p in sorted((REPO / "daemon" / "san").glob("*.py"))
             for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef) and n.name.endswith("Mixin")]
    assert found == []
    assert SanAgent.__mro__ == (SanAgent, object)


def test_the_parts_hold_neither_the_agent_nor_the_node_nor_each_others_private_state():
    async def main():
        env = assembly.model_env(1)
        node = await host(env)
        san, _ = assembly.build_san(env, node, SanConfig(spike_policy="pause"), [], "cell")
        parts = parts_of(san)
        held = {name: list(vars(p).items()) for name, p in parts.items()}
        await san.stop()
        await node.stop()
        return san, node, parts, held
    san, node, parts, held = run_virtual(main())
    assert len({id(p) for p in parts.values()}) == len(parts)
    for name, attrs in held.items():
        for attr, v in attrs:
            assert v is not san and v is not node, f"{name}.{attr} holds the {'SanAgent' if v is san else 'node'}"
    simple = (int, float, str, bool, tuple, type(None), frozenset)
    private = {(name, attr): v for name, attrs in held.items() for attr, v in attrs
               if attr.startswith("_") and not isinstance(v, simple)}
    assert private, "the check found nothing to check"
    for (owner, attr), v in private.items():
        others = [f"{name}.{a}" for name, attrs in held.items() if name != owner for a, w in attrs if w is v]
        assert others == [], f"{owner}.{attr} is also held by {others}"


def test_the_accept_rule_is_the_one_handed_to_the_assembly():
    calls = []

    def refuse(state: accept.TargetState, task: accept.TaskDemand, forced: bool) -> accept.Answer:
        calls.append((state.host, task.name, forced))
        return accept.Answer(False, accept.CONSTRAINTS, "refused by the test's rule")

    async def main():
        env = assembly.model_env(1)
        node = await host(env)
        cfg = SanConfig()
        san, _ = assembly.build_san(env, node, cfg, [], "cell",
                                    policies=dataclasses.replace(san_policies(cfg, PolicyBook()), accept=refuse))
        task = masbpb.TaskInfo(name="t1", used=wire.resources(0.1, 64), requested=wire.resources(0.1, 64))
        a = san.answer(masbpb.TaskMigrationRequest(san_id="s-1", src_host="h9", task=task, force_migration=True))
        await san.stop()
        await node.stop()
        return a
    a = run_virtual(main())
    assert calls == [("h1", "t1", True)]
    assert a.WhichOneof("answer") == "rejection"
    assert a.rejection.reason == masbpb.REJECTION_REASON_CONSTRAINTS and a.rejection.detail == "refused by the test's rule"


def test_overload_and_scs_come_from_the_bundle_with_the_sans_rng_and_disable_stops_new_rounds():
    verdicts, scs_calls = [], []

    def always(load: overload.HostLoad) -> overload.Verdict:
        verdicts.append(load)
        return overload.Verdict(True, ("the test says so",), (0.0, 0.0))

    def nothing(capacity, used, tasks, prod_requested, rng) -> Selection:
        scs_calls.append(([t.name for t in tasks], rng))
        return Selection((), (), 0.0, False, 0, 0.0, 0.0)

    async def main():
        env = assembly.model_env(1)
        h1, h2 = await host(env, "h1"), await host(env, "h2")
        await h1.start_vm(VmSpec(name="vm1", mem_mib=256, vcpus=1, cpu_load=0.1, wss_mib=64))
        cfg = SanConfig(report_period_s=3600.0)
        rng = random.Random(5)
        san, _ = assembly.build_san(env, h1, cfg, [], "cell", rng=rng,
                                    policies=dataclasses.replace(san_policies(cfg, PolicyBook()), overload=always, scs=nothing))
        other, _ = assembly.build_san(env, h2, cfg, [], "cell")
        san.start()
        other.start()
        await env.clock.sleep(35.0)
        before = (dict(san.counters), len(scs_calls), len(verdicts))
        san.disable()
        await env.clock.sleep(35.0)
        after = (dict(san.counters), len(scs_calls), len(verdicts))
        out = before, after, san.enabled, other.enabled
        await san.stop()
        await other.stop()
        await h1.stop()
        await h2.stop()
        return rng, out
    rng, (before, after, enabled, other_enabled) = run_virtual(main())
    counters, n_scs, n_verdicts = before
    assert counters["overload_detected"] >= 2 and counters["scs_empty"] == counters["scs_runs"] == n_scs >= 2
    assert all(names == ["vm1"] and r is rng for names, r in scs_calls)
    assert counters.get("sans_started", 0) == 0
    counters2, n_scs2, n_verdicts2 = after
    assert n_verdicts2 > n_verdicts                                  # samples still judged ...
    assert counters2["overload_detected"] == counters["overload_detected"] and n_scs2 == n_scs   # ... no new round
    assert (enabled, other_enabled) == (False, True)                 # one SAN's switch, not the shared config's


def test_the_gpa_accept_rule_keeps_cpu_statistics_and_the_sum_rule_does_not():
    async def main(fit):
        env = assembly.model_env(1)
        node = await host(env)
        await node.start_vm(VmSpec(name="vm1", mem_mib=256, vcpus=1, cpu_load=0.3, wss_mib=64))
        san, _ = assembly.build_san(env, node, SanConfig(fit=fit, report_period_s=3600.0), [], "cell")
        san.start()
        await env.clock.sleep(45.0)
        out = san.reader.task_info("vm1").cpu_samples, san.watch.may_skip_sample(), san.policies.cpu_stats
        await san.stop()
        await node.stop()
        return out
    samples, may_skip, stats = run_virtual(main("gpa"))
    assert stats and samples >= 2 and not may_skip
    samples, _, stats = run_virtual(main("sum"))
    assert not stats and samples == 0


class Broken:
    """Steps that fail with a bug (not a CellbedError)."""

    async def run(self, neg, name):
        raise KeyError("planted")


def test_a_negotiation_that_fails_with_a_bug_is_ended_and_the_task_can_be_negotiated_again():
    """Before, only CellbedError ended it: any other exception left the ledger entry active for
    good, so the task was never negotiated again and the cell never looked settled."""
    async def main():
        env = assembly.model_env(1)
        h1 = await host(env, "h1")
        await h1.start_vm(VmSpec(name="vm1", mem_mib=256, vcpus=1, cpu_load=0.1, wss_mib=64))
        san, _ = assembly.build_san(env, h1, SanConfig(report_period_s=3600.0), [], "cell")
        san.start()
        await env.clock.sleep(15.0)                    # the SAN's view holds vm1
        real_steps, san.initiator.steps = san.initiator.steps, Broken()
        moved = await san.initiator.negotiate("vm1", "planted")
        out = moved, san.ledger.last_of("vm1"), san.ledger.is_active("vm1"), dict(san.counters)
        san.initiator.steps = real_steps
        await san.stop()
        await h1.stop()
        return out
    moved, neg, active, counters = run_virtual(main())
    assert moved is False and not active
    assert neg.state == "failed" and neg.ended_unix_s > 0 and "KeyError('planted')" in neg.steps[-1].detail
    assert counters["negotiation_errors"] == 1
