#!/usr/bin/env python3
"""MASB benchmarks (issue 3): prints figures, asserts nothing.

  bench_masb.py candidates [--nodes 12500] [--n 2000]   GetCandidateNodes latency, p50/p99
  bench_masb.py scs [--tasks 20] [--n 500]              SCS (Tabu Search) latency, p50/p99
  bench_masb.py model --nodes 500 --hours 2 [--seed 3]  simulated hours per wall-clock minute, peak RSS
  bench_masb.py realcell [--cycles 10]                  real cell: overload detected -> migration started

Results are appended as markdown to --out (default: print only).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import sys
import tempfile
import time

from cellbed import assembly
from cellbed.cell import cell as cellmod, cell_pki
from cellbed.domain import wire
from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.model.cell import ModelCell, ModelCellParams
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.policy.masb.scs import Candidate, brute_force, greedy_by_size, tabu_select
from cellbed.runtime import run_virtual
from cellbed.runtime.client import NodeClient
from cellbed.runtime.clock import RealClock
from cellbed.runtime.grpc_transport import GrpcTransport
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb
from cellbed.workload.generator import GeneratorConfig, WorkloadGenerator


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100 * len(xs)))]


def bench_candidates(args) -> str:
    gen = WorkloadGenerator(GeneratorConfig(nodes=args.nodes, duration_s=3600, seed=1))
    clock = RealClock()
    env = assembly.real_env(clock, lambda name: None, seed=1)
    ba, _ = assembly.build_broker(env, "ba0", params=BrokerParams(), peers=[], cell="cell")
    r = random.Random(1)
    now = clock.now()
    for nd in gen.nodes:
        cap = (nd.cpu * 32, nd.mem * 65536)
        u = r.uniform(0.2, 0.95)
        ba.on_report("", masbpb.NodeReport(
            host=f"n{nd.node_id}", capacity=wire.resources(*cap), used=wire.resources(cap[0] * u, cap[1] * r.uniform(0.3, 0.9)),
            requested=wire.resources(cap[0] * u * 1.5, cap[1] * 0.8), sampled_unix_s=now,
            attributes=wire.attributes_pb({a: 1 for a in nd.attributes})))
    names = gen.attribute_names
    lat, returned = [], []
    for i in range(args.n):
        cons = []
        if r.random() < 0.5:
            cons = [Constraint(names[r.randrange(8)], ConstraintOp.EQUAL, 1)]
        task = masbpb.TaskInfo(name=f"t{i}", used=wire.resources(r.uniform(0.1, 2), r.uniform(100, 4000)),
                            requested=wire.resources(1, 1000), constraints=wire.constraints_pb(cons))
        req = masbpb.GetCandidateNodesRequest(task=task, src_host="n1", san_id=str(i))
        t0 = time.perf_counter()
        resp = ba.get_candidates(req)
        lat.append((time.perf_counter() - t0) * 1000)
        returned.append(len(resp.recommendations))
    return (f"GetCandidateNodes over a cache of {len(ba.cache)} nodes, {args.n} requests (half constrained): "
            f"p50 {pct(lat, 50):.2f} ms, p99 {pct(lat, 99):.2f} ms, max {max(lat):.2f} ms; "
            f"candidates returned: mean {statistics.mean(returned):.1f}")


def bench_scs(args) -> str:
    r = random.Random(7)
    lat, evals = [], []
    for k in range(args.n):
        tasks = [Candidate(f"t{i}", (r.uniform(0.01, 0.2), r.uniform(50, 600)), r.uniform(50, 600))
                 for i in range(args.tasks)]
        used = [sum(t.used[0] for t in tasks), sum(t.used[1] for t in tasks)]
        cap = [used[0] / r.uniform(1.0, 1.3), used[1] / r.uniform(0.7, 1.2)]
        t0 = time.perf_counter()
        s = tabu_select(cap, used, tasks, random.Random(k))
        lat.append((time.perf_counter() - t0) * 1000)
        evals.append(s.evaluations)
    out = (f"SCS (Tabu, 25 restarts x 5 steps, patience 6) for {args.tasks} tasks, {args.n} instances: "
           f"p50 {pct(lat, 50):.2f} ms, p99 {pct(lat, 99):.2f} ms; subsets evaluated: median "
           f"{pct(evals, 50)} ({pct(evals, 50) / 2 ** args.tasks:.2%} of 2^{args.tasks})")
    opt = better = worse = 0
    n = 300
    for k in range(n):
        m = r.choice([6, 8, 10, 12])
        tasks = [Candidate(f"t{i}", (r.uniform(0.01, 0.2), r.uniform(50, 600)), r.uniform(50, 600)) for i in range(m)]
        used = [sum(t.used[0] for t in tasks), sum(t.used[1] for t in tasks)]
        cap = [used[0] / r.uniform(1.0, 1.3), used[1] / r.uniform(0.7, 1.2)]
        t, g, b = tabu_select(cap, used, tasks, random.Random(k)), greedy_by_size(cap, used, tasks), brute_force(cap, used, tasks)
        opt += t.fitness >= b.fitness - 1e-9 * max(1, abs(b.fitness))
        better += t.fitness > g.fitness + 1e-12
        worse += t.fitness < g.fitness - 1e-12
    return out + (f"\nSCS quality on {n} instances of 6-12 tasks: optimal (= brute force) in {opt} ({opt / n:.1%}); "
                  f"better than greedy-by-size in {better} ({better / n:.1%}), worse in {worse}")


def bench_model(args) -> str:
    p = ModelCellParams(nodes=args.nodes, duration_s=args.hours * 3600, seed=args.seed, overload_share=0.1,
                        overload_factor=2.0, overload_at_s=min(1800, args.hours * 1800))
    w = time.perf_counter()
    s = run_virtual(ModelCell(p).run())
    wall = time.perf_counter() - w
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c = s.counters
    coll = c.get("collisions", 0) / max(1, c.get("process_accepted", 0) + c.get("collisions", 0))
    last = s.ticks[-1]
    return (f"model cell {args.nodes} hosts, {args.hours:g} simulated h: wall {wall:.0f} s = "
            f"{args.hours / (wall / 60):.2f} simulated h per wall min; peak RSS {rss:.0f} MiB; tasks live "
            f"{s.tasks_live}; SANs {c.get('sans_started', 0)}, migrated {c.get('sans_migrated', 0)}, collision rate "
            f"{coll:.1%}; end overloaded {last.overloaded}/{last.nodes}; lost {len(s.lost)}, duplicated {len(s.duplicated)}")


async def _realcell(args) -> str:
    root = tempfile.mkdtemp(prefix="cellbed-bench-")
    st = cellmod.up("bm", 3, subnet="10.231.21.0/24", host_cpus=[0.6], host_mem_mib=[1024], root=root,
                    monitor_period_s=1.0, san={"report_period_s": 1.0, "window_s": 5.0, "boot_grace_s": 10.0,
                         "unmovable_s": 15.0})
    tgt = {h: f"{d['address']}:{d['grpc_port']}" for h, d in st["hosts"].items()}
    try:
        lat = await _realcell_cycles(args, tgt, cell_pki.admin(st))
    finally:
        cellmod.down("bm", root)
    if not lat:
        return "real cell: no cycle completed"
    return (f"real cell (3 namespace hosts, TCG, monitor period 1 s): overload detected -> migration started over "
            f"{len(lat)} cycles: p50 {pct(lat, 50):.0f} ms, p99 {pct(lat, 99):.0f} ms, min {min(lat):.0f} ms")


async def _realcell_cycles(args, tgt: dict[str, str], admin) -> list[float]:
    """Two guests on h1; each cycle raises their load until SAN migrates one. Returns the
    latencies overload detected -> migration started, ms."""
    lat = []

    async def call(h, m, req, timeout=60):
        async with NodeClient(tgt[h], h, admin) as c:
            return await c.call(m, req, timeout=timeout)
    for name in ("b1", "b2"):
        await call("h1", "StartVm", npb.StartVmRequest(spec=npb.VmSpec(name=name, mem_mib=128, vcpus=1,
                   workload=npb.Workload(cpu_load=0.02, wss_mib=16))), timeout=180)
    tr = GrpcTransport(lambda n: n, RealClock(), security=admin)
    seen = set()

    async def home():
        """Both guests idle and back on h1 (SAN may have moved either)."""
        for h in tgt:
            for v in (await call(h, "ListVms", npb.ListVmsRequest())).vms:
                if v.state == npb.VM_STATE_MIGRATING_IN:
                    continue        # still being verified on h: not yet its to change or move
                await call(h, "SetWorkload", npb.SetWorkloadRequest(name=v.spec.name,
                                                                    workload=npb.Workload(cpu_load=0.02)))
                if h != "h1":
                    await call(h, "MigrateVm", npb.MigrateVmRequest(name=v.spec.name, dest_host="h1"), timeout=300)
    for cycle in range(args.cycles):
        await home()
        for n in (await tr.request(tgt["h1"], "San/ListNegotiations", masbpb.ListNegotiationsRequest(),
                                   timeout=10)).negotiations:
            seen.add(n.san_id)
        await asyncio.sleep(3)   # let the idle load show in a sample before the next raise
        for name in ("b1", "b2"):
            await call("h1", "SetWorkload", npb.SetWorkloadRequest(name=name, workload=npb.Workload(cpu_load=0.35)))
        deadline = time.monotonic() + 180
        done = None
        while time.monotonic() < deadline and done is None:
            negs = (await tr.request(tgt["h1"], "San/ListNegotiations", masbpb.ListNegotiationsRequest(),
                                     timeout=10)).negotiations
            for n in negs:
                if n.state == "migrated" and n.san_id not in seen:
                    done = n
            await asyncio.sleep(0.5)
        if done is None:
            r = await tr.request(tgt["h1"], "San/ListNegotiations", masbpb.ListNegotiationsRequest(limit=3), timeout=10)
            print(f"cycle {cycle}: no migration within 180 s; h1 counters {dict(r.counters)}; last: "
                  + "; ".join(f"{n.vm} {n.state} {[(s.kind, s.detail[:80]) for s in n.steps[-3:]]}"
                              for n in r.negotiations), file=sys.stderr)
            break
        seen.add(done.san_id)
        proc = next(s.unix_s for s in done.steps if s.kind == "process")
        lat.append((proc - done.started_unix_s) * 1000)
        print(f"cycle {cycle}: {done.vm} -> {done.target}: detected -> migration started "
              f"{lat[-1]:.0f} ms", file=sys.stderr)
    await tr.close()
    return lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["candidates", "scs", "model", "realcell"])
    ap.add_argument("--nodes", type=int, default=12500)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=3, help="model: the run's seed (tests/component/test_masb_scale.py: 11)")
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    fn = {"candidates": bench_candidates, "scs": bench_scs, "model": bench_model,
          "realcell": lambda a: asyncio.run(_realcell(a))}[args.what]
    text = fn(args)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"- {time.strftime('%Y-%m-%d')} `{' '.join(sys.argv[1:])}`: {text}\n")


if __name__ == "__main__":
    main()
