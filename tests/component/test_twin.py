"""The real-cell scenario's model twin (cell.kind = "twin", cellctl compare's model side): the
same VMs as the real runner would start, on model hosts whose guests cost what real TCG guests
cost (a boot that takes time and CPU, QEMU's memory), written on the simulated axis."""
import json
import statistics
from pathlib import Path

import pytest

from cellbed import assembly
from cellbed.cli.main import main as cellctl
from cellbed.domain.overhead import GuestOverhead
from cellbed.domain.vm import MigrationOptions, VmSpec
from cellbed.experiment import load_run
from cellbed.workload import realplan
from cellbed.experiment.real.driver import RealCellDriver
from cellbed.experiment.results.files import VM_COLUMNS
from cellbed.experiment.scenario.file import load_scenario
from cellbed.experiment.twin.driver import twin_events
from cellbed.runtime.clock import run_virtual
from cellbed.workload import events as ev

REPO = Path(__file__).resolve().parents[2]
SCENARIO = str(REPO / "scenarios" / "real-3host.toml")
SETS = ["cell.kind=twin", "run.duration_s=1800"]


def test_a_model_guest_boots_with_the_fitted_cost_then_runs_its_workload():
    g = GuestOverhead(cpu_base_cores=0.05, cpu_gain=0.5, mem_base_mib=100, mem_gain=1.0, boot_s=5.0,
                      boot_cpu_cores=0.3)

    async def main():
        env = assembly.model_env(0, guest=g)
        h = await assembly.model_host(env, assembly.model_config("h1", 1.0, 1024, admission="requested"))
        clock = env.clock
        t0 = clock.monotonic()
        await h.agent.start_vm(VmSpec(name="a", mem_mib=128, vcpus=1, cpu_load=0.2, wss_mib=48, req_cpu_cores=0.3))
        # StartVm returned once the guest answered: after the boot, not before
        assert clock.monotonic() - t0 >= 5.0
        task = env.fabric.backends["h1"].tasks["a"]
        assert task.mem_mib == 228 and task.cpu_cores == pytest.approx(0.05 + 0.5 * 0.2)
        task.advance(t0 + 15.0)
        # 5 s of boot at 0.3 cores, then 10 s at 0.15 cores
        assert task.cpu_time_ns / 1e9 == pytest.approx(5 * 0.3 + 10 * 0.15)
        assert env.fabric.set_workload("a", 0.4, 48, 3.2)
        assert task.cpu_cores == pytest.approx(0.25) and task.spec.dirty_mib_s == 3.2
        assert not env.fabric.set_workload("nobody", 0.4, 48, 3.2)
        await h.agent.stop()
    run_virtual(main())


def test_a_hosts_guests_share_its_cpu_quota_jitter_and_shrink_once_moved():
    g = GuestOverhead(mem_base_mib=110, moved_mem_base_mib=57, cpu_noise_sd=0.02, host_cpu_cap=True)

    async def main():
        env = assembly.model_env(3, guest=g)
        hosts = [await assembly.model_host(env, assembly.model_config(f"h{i}", 0.35, 2048, admission="requested"))
                 for i in (1, 2)]
        for n in ("a", "b", "c"):
            await hosts[0].agent.start_vm(VmSpec(name=n, mem_mib=128, vcpus=1, cpu_load=0.2, wss_mib=48,
                                                 req_cpu_cores=0.1))
        hv = env.fabric.backends["h1"]
        assert hv.cpu_cap == 0.35 and hv.tasks["a"].mem_mib == 238
        deltas = []
        before = {n: 0.0 for n in "abc"}
        for _ in range(40):
            await env.clock.sleep(10.0)
            samples = {d.name: d.cpu_time_ns for d in await hv.list()}
            used = {n: (samples[n] - before[n]) / 1e9 / 10.0 for n in samples}
            before = samples
            deltas.append(sum(used.values()))
            assert all(u >= 0 for u in used.values())            # cpu time never runs backwards
        # 3 × 0.2 cores of demand on a 0.35-core quota: the guests get the quota, never more
        assert max(deltas[1:]) <= 0.35 + 1e-9 and min(deltas[1:]) > 0.3
        # a moved guest holds only what was sent
        await hosts[0].agent.stop_vm("b")
        await hosts[0].agent.stop_vm("c")
        task = hv.tasks["a"]
        await hv.migrate("a", "model://h2", MigrationOptions())
        assert task.moved and task.mem_mib == 57 + 128
        for h in hosts:
            await h.agent.stop()
    run_virtual(main())


def test_jitter_has_the_fitted_spread():
    g = GuestOverhead(cpu_noise_sd=0.02)

    async def main():
        env = assembly.model_env(5, guest=g)
        h = await assembly.model_host(env, assembly.model_config("h1", 4.0, 2048, admission="requested"))
        await h.agent.start_vm(VmSpec(name="a", mem_mib=128, vcpus=1, cpu_load=0.3, wss_mib=48, req_cpu_cores=0.3))
        hv, last, rates = env.fabric.backends["h1"], None, []
        for _ in range(400):
            await env.clock.sleep(5.0)
            (d,) = await hv.list()
            if last is not None:
                rates.append((d.cpu_time_ns - last) / 1e9 / 5.0)
            last = d.cpu_time_ns
        await h.agent.stop()
        return rates
    rates = run_virtual(main())
    # the measured rate scatters by the fitted sd (a little less where the agent's own sample splits a window)
    assert statistics.fmean(rates) == pytest.approx(0.3, abs=0.005)
    assert 0.014 < statistics.pstdev(rates) < 0.022


def test_twin_events_keep_only_the_vms_runs_on_the_wall_axis():
    def add(t, j):
        return (t, ev.AddTask(time_us=0, job_id=j, task_index=0, user="u", priority=0, scheduling_class=0,
                              cpu_request=0.1, mem_request=0.1))

    def use(t, j):
        return (t, ev.UpdateTaskUsedResources(time_us=0, job_id=j, task_index=0, machine_id=None, start_us=0,
                                              end_us=0, cpu_rate=0.05, canonical_memory=0.05))

    def rm(t, j):
        return (t, ev.RemoveTask(time_us=0, job_id=j, task_index=0, reason=ev.EndReason.FINISH))
    stream = [add(0, 1), add(6, 2), use(12, 1), use(12, 2), rm(30, 2), rm(600, 1)]
    p = realplan.Plan(decisions=["vm", "short"], vms=[])
    out = twin_events(stream, p, comp=6.0, hosts=2, cpu_cores=0.5, mem_mib=1024)
    assert [type(e).__name__ for e in out] == ["AddNode", "AddNode", "AddTask", "UpdateTaskUsedResources",
                                              "RemoveTask"]
    assert [e.time_us for e in out[2:]] == [0, 2_000_000, 100_000_000]      # simulated s / 6
    assert all(e.job_id == 1 for e in out[2:]) and (out[0].cpu, out[0].mem) == (0.5, 1024.0)


def test_the_twin_runs_the_real_runners_vms(tmp_path):
    out = tmp_path / "twin"
    cellctl(["run", SCENARIO, "--out", str(out), "--quiet", "--no-report", *sum((["--set", s] for s in SETS), [])])
    run = load_run(out)
    done = run.completed
    assert done["driver"] == "twin" and done["ok"]
    # the plan, worked out independently from the scenario as the real runner does
    sc = load_scenario(SCENARIO, SETS)
    drv = RealCellDriver(sc)
    stream = realplan.read_stream(drv.gen_cfg, sc.run.duration_s)
    p = realplan.plan(stream, drv.scale, hosts=3, max_vms_per_host=4, min_task_s=120.0, task_fraction=1.0, seed=1)
    t = done["tasks"]
    assert (t["added"], t["vms_created"], t["not_vm_box_full"], t["not_vm_short"]) == \
        (sum(isinstance(e, ev.AddTask) for _, e in stream), len(p.vms), p.counts()["box_full"], p.counts()["short"])
    assert t["lost"] == 0 and t["duplicated"] == 0
    a = run.allocations(["task", "outcome", "host"])
    assert set(a["task"]) == {v.name for v in p.vms}
    assert set(a["host"][a["outcome"] == "placed"]) <= {"n1", "n2", "n3"}
    # rows on the simulated axis, one per simulated minute, over the 3 hosts
    assert list(run.ticks["t_s"]) == [60.0 * k for k in range(1, 31)]
    assert (run.ticks["nodes"] == 3).all() and run.ticks["tasks_running"].max() >= 3
    twin = json.loads((out / "manifest.json").read_text())["extra"]["twin"]
    assert twin["san"]["window_s"] == pytest.approx(sc.policy.san.window_s / 6.0)   # wall-clock periods
    assert twin["guest_overhead"] == {"cpu_base_cores": 0.0, "cpu_gain": 1.0, "mem_base_mib": 0.0, "mem_gain": 1.0,
                                      "boot_s": 0.0, "boot_cpu_cores": 0.0, "moved_mem_base_mib": None,
                                      "cpu_noise_sd": 0.0, "host_cpu_cap": False}


def test_damaged_real_run_files_are_refused_naming_the_file(tmp_path):
    from cellbed.domain.errors import FailedPrecondition
    from cellbed.experiment.compare import run as compare
    from cellbed.experiment.results.reader import Run
    run = Run(path=tmp_path, manifest={}, completed={}, ticks={})
    sc = load_scenario(SCENARIO)
    (tmp_path / "vms.csv").write_text("t_s,host,vm\n60,h1\n")                    # a short row, no columns
    with pytest.raises(FailedPrecondition, match=r"vms\.csv: cannot fit the guest overhead"):
        compare.fit_guest(run, sc)
    (tmp_path / "vms.csv").write_text(",".join(VM_COLUMNS) + "\n" +
                                      "\n".join(",".join(["x"] * 12) for _ in range(5)) + "\n")
    with pytest.raises(FailedPrecondition, match="ValueError"):
        compare.fit_guest(run, sc)
    (tmp_path / "san.csv").write_text("san_id,process_s\nh1-1,soon\n")
    with pytest.raises(FailedPrecondition, match=r"san\.csv: not a san\.csv"):
        compare.san_timing(run)
    logs = tmp_path / "cell-logs" / "h1" / "node"
    logs.mkdir(parents=True)
    (logs / "migrations.jsonl").write_text('[1]\n{"outcome": "MIGRATION_OUTCOME_SUCCEEDED"}\n{"torn\n')
    assert compare.migration_records(run) == [{"outcome": "MIGRATION_OUTCOME_SUCCEEDED"}]   # objects only


def test_compare_without_real_from_makes_the_real_run_first_then_the_twin(tmp_path, monkeypatch):
    """compare's own real leg (no --real-from): run_scenario of the real scenario into out/real,
    then the twin into out/model. The real leg is stood in for by a twin run in its folder here;
    tests/integration/test_real_3host.py compares a real cell's run through --real-from."""
    from cellbed.experiment.compare import run as compare_run
    real_run_scenario, calls = compare_run.run_scenario, []

    def leg(sc, out, **kw):
        calls.append((sc.cell.kind, Path(out).name))
        return real_run_scenario(compare_run.twin_of(sc) if sc.cell.kind == "real" else sc, out, **kw)

    monkeypatch.setattr(compare_run, "run_scenario", leg)
    sc = load_scenario(SCENARIO, ["run.duration_s=600"])
    c = compare_run.compare(sc, tmp_path / "c", fit=False, progress=None)
    assert calls == [("real", "real"), ("twin", "model")]
    assert c.real.path == tmp_path / "c" / "real" and c.model.path == tmp_path / "c" / "model"
    body = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert body["fit"] == {"fitted": False} and {m["metric"] for m in body["metrics"]} >= {"used CPU"}
