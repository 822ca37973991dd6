"""The seams between the model cell, a real cell and its twin are closed (issue 28, item 0): for
every front-end, the policy each stage resolves to is the same in a model run, in the agents of a
real cell and in the real run's twin.

* model: a short model run of the scenario; its manifest's ``policies`` are what its agents loaded;
* real: the [policy] table the real driver hands to `cell up` is loaded the way each real agent
  loads it (NodeConfig, BrokerConfig and ControllerConfig ``policy_book``, then the agents built by
  the assembly with that book, as daemon/main.py, broker/main.py and controller/main.py do), and
  each agent's ``cellbed.v1.Policies`` answer (the servicer's) is read;
* twin: a short run of the real scenario's model twin (masb and bestfit, the real runner's
  front-ends), its manifest's ``policies``.

tests/integration/test_real_3host.py checks the same for a real run's own manifest on real VMs.
"""
from __future__ import annotations

import json

import pytest

from cellbed import assembly
from cellbed.assembly import model_config
from cellbed.broker.main import BrokerConfig
from cellbed.controller.megha.config import ControllerConfig
from cellbed.controller.megha.queues import MemoryQueueStore
from cellbed.daemon.config import NodeConfig
from cellbed.daemon.san import SanConfig
from cellbed.experiment.real.driver import RealCellDriver
from cellbed.experiment.runner import run_scenario
from cellbed.experiment.scenario.file import load_scenario
from cellbed.experiment.scenario.policies import broker_params, policy_table, slots_of
from cellbed.controller.megha.params import GmParams, LmParams
from cellbed.experiment.twin.driver import TwinDriver
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.policy.megha.fairness import QueueConfig
from cellbed.runtime import run_virtual
from cellbed.runtime.plugins.service import identity_from_pb, list_policies

REAL = "scenarios/real-3host.toml"
PLUGIN = "examples/policies/cpu_only.py:cpu_only"


def ident_key(d: dict) -> tuple:
    return (d["key"], d["name"], d["origin"], d["sha256"], json.dumps(d["params"], sort_keys=True))


def manifest_policies(folder) -> set[tuple]:
    return {ident_key(d) for d in json.loads((folder / "manifest.json").read_text())["policies"]}


def real_agents(sc, frontend: str) -> set[tuple]:
    """What a real cell's agents load from the [policy] table the real driver writes."""
    table = dict(RealCellDriver(sc).policy) if frontend in ("masb", "bestfit") else \
        {**_table(sc), "errors": "isolate"}
    out: set[tuple] = set()

    async def main():
        node_book = NodeConfig(host="h1", policy=table).policy_book()
        env = assembly.model_env(1, policies=node_book)
        san = RealCellDriver(sc).san_cfg if frontend in ("masb", "bestfit") else None
        node, _ = assembly.build_node(env, model_config("h1", 1.0, 1024, admission="requested"))
        if san is not None and san.get("enabled"):
            assembly.build_san(env, node, SanConfig(**san), ["ba1"], "c")
        agents = [("h1", node_book)]
        if frontend == "masb":
            bbook = BrokerConfig(policy=table).policy_book()
            benv = assembly.model_env(1, policies=bbook)
            assembly.build_broker(benv, "ba1", params=BrokerParams(**broker_params(sc)), peers=[], cell="c")
            agents.append(("ba1", bbook))
        if frontend in ("megha", "central"):
            cbook = ControllerConfig(policy=table).policy_book()
            cenv = assembly.model_env(1, policies=cbook)
            assembly.build_gm(cenv, "gm1", lms={"lm1": ["lm1"]}, queues=[QueueConfig("u1", 1.0, "gm1")],
                              store=MemoryQueueStore(), cell="c", params=GmParams())
            assembly.build_lm(cenv, "lm1", "lm1", hosts=["h1"], gms=["gm1"], standby=False, peer="", cell="c",
                              params=LmParams())
            agents.append(("gm1", cbook))
        for name, book in agents:                  # each agent's cellbed.v1.Policies answer
            for p in list_policies(name, book).policies:
                out.add(ident_key(identity_from_pb(p).to_dict()))
        await node.stop()
    run_virtual(main())
    return out


def _table(sc):
    return policy_table(sc.policy)


def scenario(frontend: str, *extra: str, kind: str = "model"):
    model = ["workload.time_compression=1.0"] if kind == "model" else []
    common = [f"cell.kind={kind}", *model, f"policy.frontend={frontend}", f"policy.overload={PLUGIN}",
              "policy.params.overload.threshold=0.7", "policy.fit=gpa", "policy.gpa_rho=0.05",
              "policy.san.candidate_count=7"]
    if frontend in ("megha", "central", "sampling"):
        common = [f"cell.kind={kind}", *model, f"policy.frontend={frontend}", "policy.san=false", "policy.megha.gms=1",
                  "policy.megha.lms=1", "cell.nodes=20", "policy.task_order=refarch.srtf",
                  "policy.allocation=worst_fit"]
    return load_scenario(REAL, [*common, *extra])


@pytest.mark.parametrize("frontend", ["masb", "bestfit"])
def test_model_real_and_twin_resolve_the_same_policy_for_every_stage(frontend, tmp_path):
    sc_model = scenario(frontend, "cell.nodes=12", "run.duration_s=600", kind="model")
    sc_real = scenario(frontend, "run.duration_s=600", kind="real")
    model = manifest_policies(run_scenario(sc_model, tmp_path / "model", progress=None, report=False).path)
    twin = manifest_policies(run_scenario(sc_real, tmp_path / "twin", progress=None, report=False,
                                          driver=TwinDriver(sc_real)).path)
    real = real_agents(sc_real, frontend)
    keys = {f"policy.{s}" for s in slots_of(frontend, sc_model.policy.san.enabled)}
    # the twin and the real agents hold what the model holds, stage by stage
    by_key = lambda s: {k: v for k, *v in s}   # noqa: E731
    assert {k for k, *_ in model} == keys
    assert by_key(model) == by_key(twin)
    assert {k: v for k, v in by_key(real).items() if k in by_key(model)} == \
        {k: v for k, v in by_key(model).items() if k in by_key(real)}
    # and the plugin with its parameters is what they hold for overload
    ov = by_key(model)["policy.overload"]
    assert ov[0] == "cpu-only" and ov[1] == "file" and json.loads(ov[3]) == {"threshold": 0.7}
    assert json.loads(by_key(model)["policy.fit"][3])["rho"] == 0.05
    if frontend == "masb":
        assert json.loads(by_key(real)["policy.candidates"][3]) == {"count": 7}


@pytest.mark.parametrize("frontend", ["megha", "central", "sampling"])
def test_megha_front_ends_resolve_the_same_policy_in_the_model_and_the_masters(frontend, tmp_path):
    sc = scenario(frontend, "run.duration_s=120", "workload.source=jobs", "workload.jobs.arrivals_s=30",
                  "cell.nodes=20", kind="model")
    model = manifest_policies(run_scenario(sc, tmp_path / "m", progress=None, report=False).path)
    keys = {f"policy.{s}" for s in slots_of(frontend, False)}
    assert {k for k, *_ in model} <= keys
    if frontend == "sampling":
        assert {k for k, *_ in model} >= {"policy.probe"}
        return
    assert {k for k, *_ in model} >= {"policy.allocation", "policy.task_order", "policy.validation"}
    real = real_agents(sc, frontend)
    by_key = lambda s: {k: v for k, *v in s}   # noqa: E731
    common = set(by_key(model)) & set(by_key(real))
    assert common >= {"policy.allocation", "policy.task_order", "policy.validation"}
    assert {k: by_key(model)[k] for k in common} == {k: by_key(real)[k] for k in common}
    assert by_key(model)["policy.task_order"][:2] == ["SRTF", "entry-point"]
