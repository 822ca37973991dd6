"""A scenario's policy at every stage of seed 002's reference architecture (digest §A.5, the §A.8
checklist), written into its manifest. Every pluggable stage names the policy the scenario's
agents load (its [policy] table, cellbed/experiment/scenario/policies.py), so that the text can
never say one policy while the agents run another; what a policy actually was (its distribution,
version and source hash) is the manifest's ``policies`` section, which the agents report.

Stages that no stage key selects are the front-end's fixed mechanism, and say so."""
from __future__ import annotations

from typing import Any

from cellbed.experiment.scenario.policies import policy_table


def _fit(p: Any, ref: str) -> str:
    if ref == "sum":
        return "sum (use within max_util of capacity, production requests too)"
    if ref == "gpa":
        return (f"gpa (CPU μ'+Φ⁻¹(1−{p.gpa_rho:g})σ' within capacity after {p.gpa_min_samples} samples, "
                "memory as a sum)")
    return ref


def _j1(sc: Any) -> str:
    w = sc.workload
    if w.source == "generator":
        j1 = f"synthetic GCD-shaped generator, seed {sc.run.seed}, multiplier {w.multiplier:g}"
    elif w.source == "jobs":
        j1 = (f"Megha's Poisson jobs, seed {sc.run.seed}: {w.jobs.job_rate_per_1k_nodes:g} jobs/s per "
              f"1,000 nodes for {w.jobs.arrivals_s:g} s, the cell {w.jobs.fill:.0%} full at the start")
    else:
        j1 = f"GCD-2011 trace {w.trace.path}, node fraction {w.trace.node_fraction:g}, multiplier {w.multiplier:g}"
    if w.compaction:
        j1 += f", cell compacted by {w.compaction:.2%}"
    return j1


def stage_policies(sc: Any) -> dict[str, str]:
    p, san = sc.policy, sc.policy.san
    t = policy_table(p)
    s: dict[str, str] = {
        "J1": _j1(sc),
        "J2": "every job eligible (no user or flow-control filter; not a stage)",
        "J3": "arrival order (no job sorting; not a stage)",
        "T1": "every task of an arrived job (not a stage)",
    }
    m = p.megha
    queues = (f"{len(m.shares)} user queues with shares {list(m.shares)}" if m.shares else "one queue")
    if p.frontend in ("masb", "bestfit"):
        s["T2"] = "arrival order; a task that found no room is tried again in arrival order (not a stage)"
    elif p.frontend == "sampling":
        s["T2"] = "each worker serves its probes first in, first out (not a stage)"
    else:
        s["T2"] = f"task_order {t['task_order']}: a queued task's sort key within its user's queue"
    admission = f"node admission {t['admission']}"
    if p.frontend == "masb":
        s |= {"M4": "BAs are not filtered",
              "M5": "a uniformly random BA handles each arrival",
              "R3": f"constraints vs node attributes on the BA's cache (stale ≤ {san.node_expiry_s:g} s)",
              "R4": f"{admission}; the BA's cache on requested resources; the RUS rule for production tasks",
              "R5": f"highest initial_score {t['initial_score']} over ≤ {san.initial_scan_limit} matching nodes "
                    "(requested resources), then the next best if a node refuses"}
    elif p.frontend in ("megha", "central"):
        s |= {"J2": f"{queues}; a queue is served by one GM, round-robin among its queues",
              "M4": f"LMs by the GM's eventually consistent view (updates every {m.update_period_s:g} s, "
                    "piggy-backed on replies)",
              "M5": f"internal partitions round-robin, then external partitions round-robin across LMs "
                    f"(repartition); {m.gms} GM × {m.lms} LM" if p.frontend == "megha" else
                    "internal partitions round-robin, then external partitions round-robin across LMs "
                    "(repartition); 1 GM × 1 LM",
              "R3": "constraint bit-vectors ANDed per partition",
              "R4": f"free resources on the GM's view; the LM validates on its true state (validation "
                    f"{t['validation']}); {admission}",
              "R5": f"allocation {t['allocation']} within a partition"}
    elif p.frontend == "sampling":
        s |= {"M4": "no scheduler filter; every task's scheduler probes nodes itself",
              "M5": f"probe {t['probe']}: {p.sampling.probes} random probes per task, late binding to the first free",
              "R3": "constraints vs attributes of the probed nodes",
              "R4": f"{admission}, on the probed nodes' state",
              "R5": "first probe to offer a free slot (late binding)"}
    else:  # bestfit
        s |= {"M4": "monolithic: one central scheduler",
              "M5": "the central scheduler",
              "R3": "constraints vs node attributes over all nodes",
              "R4": f"{admission}; the scheduler's view: the load the cell admits on, exact state",
              "R5": f"allocation {t['allocation']} (best fit: the feasible node left with the least free "
                    "capacity, normalised CPU plus memory)"}
    if p.frontend in ("megha", "central") and m.shares:
        s["T10"] = (f"fairness: under contention, preemption {t['preemption']} names the users to preempt "
                    "(Megha: the largest share violation first); the LM verifies")
    elif san.enabled and san.spike_policy != "none":
        s["T10"] = f"RUS spike > {san.rus_threshold:.0%}: {san.spike_policy} non-production VMs on the host"
    else:
        s["T10"] = "none"
    if san.enabled and p.frontend in ("masb", "bestfit"):
        s["T12"] = (f"SAN on overload {t['overload']} (used or production requests > {san.max_util:.0%}); "
                    f"task_selection {t['task_selection']} ({san.tabu_restarts} restarts × {san.tabu_steps} "
                    f"steps, patience {san.tabu_patience}); candidates {t['candidates']} by realloc_score "
                    f"{t['realloc_score']} over ≤ {san.realloc_scan_limit} nodes, {san.candidate_count} of them; "
                    f"forced {t['forced']}; window {san.window_s:g} s; the target's fit {_fit(p, t['fit'])}; "
                    f"target_order {t['target_order']} on fresh usage; expiry {san.recommendation_expiry_s:g} s")
    else:
        s["T12"] = "none (no migration)"
    return s
