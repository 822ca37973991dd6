"""Synthetic, GCD-2011-shaped workload generator (DESIGN §10.2, digest §E.3–E.12).

Seeded, reproducible and streaming: :class:`WorkloadGenerator` is a Python
generator of :mod:`~cellbed.workload.events`; it holds only the state of the
tasks that are running now (numpy struct-of-arrays, a heap of end times), so a
29-day month at 12.5k nodes never sits in memory.

Model (every default is traceable to a digest row; see the comments on
:class:`GeneratorConfig`):

- **Cell.** Nodes are drawn from the machine classes of §E.3 by exact
  apportionment (largest remainder), then shuffled.  Each node gets 21 binary
  attributes (§E.9); attribute *j* is set on exactly ``round(p_j · N)`` nodes
  (at least one), so rare attributes really are rare but never absent.
- **Warm start.** At ``start_us`` the cell is already in steady state: the
  running set of an M/G/∞ system, i.e. ``Poisson(tasks_per_node · N)`` tasks
  whose total durations are length-biased and whose ages are uniform in
  ``[0, duration)``.  Pre-existing tasks are emitted as one-task jobs (their
  job grouping is not reconstructed, but each draws its request level from the
  size-biased size of the job it came from).  They get a usage record at
  ``start_us`` covering the previous period, so usage is known from the start.
- **Arrivals.** Poisson job arrivals; 75% of jobs have one task, the rest draw
  their size from a power-of-2 / power-of-10 tail (§E.4), capped at
  ``max_job_fraction_of_nodes`` of the cell.  Tasks of a job share user,
  priority, requests and constraints; durations are per task.  Jobs are drawn
  64 at a time with numpy (a bounded look-ahead; the tasks wait in their
  slots, invisible, until their AddTask is emitted).
- **Durations.** A piecewise log-uniform CDF through the anchors of §E.5
  (mice and elephants).  Production tasks are concentrated in the long
  segments (``production_prob_by_segment``), non-production fill the rest, so
  the overall CDF is exactly the anchored one.
- **Requests.** CPU and memory requests lie on the power-of-2/power-of-10 grid
  of §E.7.  Per band group (production / non-production) and resource, the
  grid weights are a log-normal discretised on the grid,
  ``w_i ∝ exp(-(ln g_i - loc)² / 2σ²)``; ``loc`` is calibrated (below) and
  shifted down by ``request_job_size_exponent · ln(tasks in job)`` (big jobs
  are many small tasks).  CPU and memory are correlated through a Gaussian
  copula.
- **Usage.** Memory used = request × Beta(mean 0.8).  CPU: a task is
  "near-zero" (mean < 0.01 of the largest machine) or "active" (mean =
  request × Beta(mean m_o)).  Instantaneous CPU is a multiplicative cascade of
  mean-one Gamma factors, task mean × regime level × 5-min record × 1-s
  sample, with the per-task σ of the 1-s samples on the line
  σ ≈ 0.36·μ + 0.015 and σ of 5-min means on 0.31·μ + 0.010 ([003], §E.8),
  times a log-normal scatter.  A share of tasks is non-stationary: its regime
  level changes about hourly and carries part of the variance.  Usage records
  (``UpdateTaskUsedResources``) are emitted every 300 s for every running
  task (none at removal: see ``_remove``).
- **Constraints.** Half the jobs are constrained with 1+Geometric(0.6) =/≠
  constraints on the common attributes; independently, 12.5 tasks in 10k get an
  extra EQUAL constraint on a rare attribute (< 1% of nodes).

Self-calibration (digest §E.11)
-------------------------------
The targets are read as **cell-level, placement-independent ratios of the
running set** (the demand side: "running" means between AddTask and
RemoveTask, because the generator places nothing), averaged over time:

- running tasks / nodes = ``target_tasks_per_node`` (≈ 11);
- Σ 5-min mean CPU used / Σ node CPU = ``target_used_cpu`` (40–50% → 0.45);
- Σ memory used / Σ node memory = ``target_used_mem`` (60–70% → 0.65);
- Σ CPU *requested by production tasks* / Σ node CPU = ``target_prod_requested_cpu``
  (0.85) and likewise memory (0.70).  This is the [000] statement
  "production requests reserve ≈85% CPU / 70% memory" taken cell-wide; it is
  *not* a per-node figure (that depends on the placement policy, e.g. MASB's
  RUS rule keeps each node ≤ 90%), and it is a *reservation* (request) figure,
  not usage.  Together with the usage targets it implies total CPU requests
  ≈ 1.05× capacity: the cell is over-committed on CPU requests, as Borg was.

The generator solves, in expectation and before emitting anything: the task
arrival rate (Little's law on the duration mix); the four request locations (production
CPU and memory from the reservation targets, non-production memory from the
used-memory target, non-production CPU from the used-CPU target); the active
tasks' mean use/request ratio m_o (so the mean CPU use/request over running
tasks is ``cpu_use_ratio_mean``); and the near-zero probability (so that
``near_zero_frac`` of long tasks have mean CPU < 0.01).  Capacities are those of
the full cell before compaction, so compaction and the workload multiplier
raise the load as in MASB's throughput experiments.  See
:attr:`WorkloadGenerator.calibration`.
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Iterator

import numpy as np

from cellbed.workload.events import AddNode, AddNodeAttributes, AddTask, RemoveNode, RemoveTask, WorkloadEvent
from cellbed.workload.generator_config import (DEFAULT_ATTRIBUTE_PROBS, DEFAULT_MACHINE_CLASSES, US_PER_S, Calibration,
                                              GeneratorConfig, MachineClass, NodeSpec, attribute_name)
from cellbed.workload.generator_calibrate import CalibrateMixin
from cellbed.workload.generator_draws import DrawMixin
from cellbed.workload.generator_usage import UsageMixin

__all__ = [
    "MachineClass",
    "DEFAULT_MACHINE_CLASSES",
    "DEFAULT_ATTRIBUTE_PROBS",
    "GeneratorConfig",
    "NodeSpec",
    "Calibration",
    "WorkloadGenerator",
    "generate",
    "attribute_name",
]

log = logging.getLogger(__name__)

JOB_BLOCK = 64  # jobs drawn per vectorised block (bounds the prefetched state)


# ---------------------------------------------------------------------------
# numeric helpers (pure)
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# the generator
# ---------------------------------------------------------------------------


class WorkloadGenerator(UsageMixin, DrawMixin, CalibrateMixin):
    """One seeded, streaming run of the synthetic workload.

    Iterate it (once) to get the events::

        gen = WorkloadGenerator(GeneratorConfig(nodes=2000, duration_s=6 * 3600, seed=7))
        for ev in gen:
            ...

    ``nodes``, ``calibration`` and ``attribute_names`` are available before
    iterating.  ``live_tasks`` and :meth:`state_size` report the streaming
    state (for tests and progress bars).
    """

    def __init__(self, config: GeneratorConfig | None = None) -> None:
        self.config = cfg = config or GeneratorConfig()
        ss = np.random.SeedSequence(cfg.seed)
        (cell_ss, warm_ss, arr_ss, task_ss, usage_ss, churn_ss, clone_ss) = ss.spawn(7)
        self._rng_cell = np.random.default_rng(cell_ss)
        self._rng_warm = np.random.default_rng(warm_ss)
        self._rng_arr = np.random.default_rng(arr_ss)
        self._rng_task = np.random.default_rng(task_ss)
        self._rng_usage = np.random.default_rng(usage_ss)
        self._rng_churn = np.random.default_rng(churn_ss)
        self._rng_clone = np.random.default_rng(clone_ss)

        self.attribute_names: tuple[str, ...] = tuple(attribute_name(j) for j in range(len(cfg.attribute_probs)))
        self._full_nodes = self._make_cell()
        self.nodes: tuple[NodeSpec, ...] = self._compact(self._full_nodes)
        self._setup_static()
        self.calibration: Calibration = self._calibrate()
        self._started = False

        # streaming state (per running task: one slot)
        self._cap = 0
        self._mu = np.zeros(0)
        self._vL = np.zeros(0)
        self._vR = np.zeros(0)
        self._vW = np.zeros(0)
        self._ns = np.zeros(0, dtype=bool)
        self._L = np.zeros(0)
        self._regime_end = np.zeros(0)
        self._mem = np.zeros(0)
        self._start = np.zeros(0, dtype=np.int64)
        self._alive = np.zeros(0, dtype=bool)
        self._ids: list = []  # slot -> tuple of (job_id, task_index), original first
        self._reason: list = []  # slot -> EndReason
        self._free: list[int] = []
        self._ends: list[tuple[int, int]] = []  # heap of (end_us, slot)
        self._n_live_slots = 0
        self._held_ids = 0
        self._ends_time = 0
        self._block: list | None = None
        self._block_pos = 0
        self._next_job_id = 1
        self.live_tasks = 0  # running task ids, clones included
        self.max_live_tasks = 0
        self.events_emitted = 0

    def state_size(self) -> int:
        """Entries held: occupied slots + end-heap entries + task ids.

        It is O(running tasks + the prefetched block of arrivals) and does not
        grow with elapsed time; the streaming test checks exactly that.
        """
        return self._n_live_slots + len(self._ends) + self._held_ids

    @property
    def prefetched_tasks(self) -> int:
        """Task ids of drawn but not yet arrived jobs (at most one block of ``JOB_BLOCK`` jobs)."""
        return self._held_ids - self.live_tasks

    @property
    def slot_capacity(self) -> int:
        """Allocated per-task array length (≤ 2 × the peak of live slots, or 1024)."""
        return self._cap

    # ------------------------------------------------------------- streaming
    def __iter__(self) -> Iterator[WorkloadEvent]:
        if self._started:
            raise RuntimeError("a WorkloadGenerator can be iterated only once; make a new one with the same config")
        self._started = True
        return self._run()

    def _run(self) -> Iterator[WorkloadEvent]:
        cfg = self.config
        t0 = cfg.start_us
        t_end = t0 + int(round(cfg.duration_s * US_PER_S))
        P = self._period_us

        # 1. the cell: all machines, then their attributes (the trace reader's order)
        for nd in self.nodes:
            yield AddNode(t0, nd.node_id, nd.cpu, nd.mem, nd.platform)
        for nd in self.nodes:
            if nd.attributes:
                yield AddNodeAttributes(t0, nd.node_id, tuple((a, 1) for a in nd.attributes))
        self.events_emitted += len(self.nodes) + sum(1 for nd in self.nodes if nd.attributes)
        # 2. the warm start
        yield from self._warm_start(t0)
        # 3. the event loop
        self._job_gap_us = US_PER_S / self.calibration.job_arrival_rate_per_s
        self._arrival_f = float(t0)
        self._refill_block()
        next_tick = t0 + P
        churn: list[tuple[int, int, int]] = []  # (time, kind 0=down 1=up, node index)
        if cfg.churn:
            rate = -math.log(1 - cfg.churn_down_frac_29d) / (29 * 86400 * US_PER_S)
            if rate > 0:
                for i, t in enumerate(self._rng_churn.exponential(1 / rate, len(self.nodes)).tolist()):
                    heapq.heappush(churn, (t0 + int(t) + 1, 0, i))
        while True:
            t_arr = self._block[0][self._block_pos]
            t_rem = self._ends[0][0] if self._ends else t_end + 1
            t_churn = churn[0][0] if churn else t_end + 1
            t = min(t_arr, t_rem, t_churn, next_tick)
            if t > t_end:
                break
            while churn and churn[0][0] == t:
                yield from self._churn_event(churn, heapq.heappop(churn))
            while self._ends and self._ends[0][0] == t:
                self._ends_time, slot = heapq.heappop(self._ends)
                yield from self._remove(slot)
            if t_arr == t:
                yield from self._emit_job(t)
            if next_tick == t:
                yield from self._tick(t)
                next_tick += P

    def _churn_event(self, heap, item) -> Iterator[WorkloadEvent]:
        t, kind, i = item
        nd = self.nodes[i]
        rng = self._rng_churn
        if kind == 0:
            self.events_emitted += 1
            yield RemoveNode(t, nd.node_id)
            heapq.heappush(heap, (t + 1 + int(rng.exponential(self.config.churn_downtime_mean_s * US_PER_S)), 1, i))
        else:
            self.events_emitted += 1
            yield AddNode(t, nd.node_id, nd.cpu, nd.mem, nd.platform)
            if nd.attributes:
                self.events_emitted += 1
                yield AddNodeAttributes(t, nd.node_id, tuple((a, 1) for a in nd.attributes))
            rate = -math.log(1 - self.config.churn_down_frac_29d) / (29 * 86400 * US_PER_S)
            heapq.heappush(heap, (t + 1 + int(rng.exponential(1 / rate)), 0, i))

    def _warm_start(self, t0: int) -> Iterator[WorkloadEvent]:
        """Tasks running at t0, drawn from the M/G/∞ steady state (length-biased durations, uniform ages).

        Each pre-existing task is emitted as a one-task job.
        """
        cfg = self.config
        rng = self._rng_warm
        n = int(rng.poisson(cfg.target_tasks_per_node * len(self._full_nodes)))
        if n == 0:
            return
        seg = np.minimum(np.searchsorted(np.cumsum(self._seg_w_warm), rng.random(n), side="right"),
                         len(self._seg_mass) - 1)
        prod = rng.random(n) < self._seg_pp[seg]
        # length-biased log-uniform on [lo, hi] is uniform on [lo, hi]
        dur_s = self._seg_lo[seg] + rng.random(n) * (self._seg_hi[seg] - self._seg_lo[seg])
        age_s = rng.random(n) * dur_s
        start = t0 - np.floor(age_s * US_PER_S).astype(np.int64)
        end = np.maximum(start + np.ceil(dur_s * US_PER_S).astype(np.int64), t0 + 1)
        # the size of the job each task came from (size-biased), which sets its request level
        jsize = self._size_vals[np.minimum(np.searchsorted(self._size_ptask_cdf, rng.random(n), side="right"),
                                           self._size_vals.size - 1)]
        cpu, mem = self._draw_requests(rng, prod, jsize)
        user, prio, sclass = self._job_meta(rng, prod)
        restrictive = rng.random(n) < cfg.restrictive_prob
        reason_idx = np.minimum(np.searchsorted(self._reason_cdf_a, rng.random(n), side="right"),
                                len(self._reasons) - 1)
        copies = self._copies(n).tolist()
        params = self._draw_usage_params(self._rng_task, cpu, mem)
        events: list[WorkloadEvent] = []
        ids: list[tuple[tuple[int, int], ...]] = []
        cpu_l, mem_l, user_l = cpu.tolist(), mem.tolist(), user.tolist()
        prio_l, sclass_l = prio.tolist(), sclass.tolist()
        for i in range(n):
            cons = self._draw_constraints(rng)
            if restrictive[i]:
                cons = self._restrictive(rng, cons)
            jids = tuple((self._next_job_id + c, 0) for c in range(copies[i]))
            self._next_job_id += copies[i]
            ids.append(jids)
            u = f"user{user_l[i]:04d}"
            for jid, _ in jids:
                events.append(AddTask(t0, jid, 0, u, prio_l[i], sclass_l[i], cpu_l[i], mem_l[i], 0.0, cons, False))
        sl = self._add_tasks(start, end, params, ids, [self._reasons[k] for k in reason_idx.tolist()])
        self._count_live(len(events))
        self.events_emitted += len(events)
        yield from events
        # the record of the last period, so usage is known from t0 on
        self._update_regimes(t0, sl)
        yield from self._records(t0, sl)

    def _refill_block(self) -> None:
        """Draw the next ``JOB_BLOCK`` jobs at once (numpy per block, not per job) and slot their tasks.

        The tasks wait in their slots, invisible to usage ticks (start in the
        future), until their job's AddTask events are emitted.
        """
        cfg = self.config
        rng = self._rng_arr
        B = JOB_BLOCK
        times_f = self._arrival_f + np.cumsum(rng.exponential(self._job_gap_us, B))
        self._arrival_f = float(times_f[-1])
        times = np.floor(times_f).astype(np.int64)
        single = rng.random(B) < cfg.single_task_job_frac
        tail = self._job_vals[np.minimum(np.searchsorted(self._job_cdf_a, rng.random(B), side="right"),
                                         self._job_vals.size - 1)]
        sizes = np.where(single, 1, tail)
        prod = rng.random(B) < self._p_prod
        user, prio, sclass = self._job_meta(rng, prod)
        cpu, mem = self._draw_requests(rng, prod, sizes)
        diff = (sizes > 1) & (rng.random(B) < cfg.different_machines_prob)
        copies = self._copies(B)
        cons = [self._draw_constraints(rng) for _ in range(B)]
        # per task
        n = int(sizes.sum())
        job_of = np.repeat(np.arange(B), sizes)
        tprod = prod[job_of]
        u = rng.random(n)
        seg = np.where(tprod, np.searchsorted(np.cumsum(self._seg_w_prod), u, side="right"),
                       np.searchsorted(np.cumsum(self._seg_w_np), u, side="right"))
        seg = np.minimum(seg, len(self._seg_mass) - 1)
        lo, hi = self._seg_lo[seg], self._seg_hi[seg]
        dur_us = np.ceil(lo * (hi / lo) ** rng.random(n) * US_PER_S).astype(np.int64)
        tstart = times[job_of]
        restrictive = np.flatnonzero(rng.random(n) < cfg.restrictive_prob)
        task_cons = {int(i): self._restrictive(rng, cons[job_of[i]]) for i in restrictive}
        reason_idx = np.minimum(np.searchsorted(self._reason_cdf_a, rng.random(n), side="right"),
                                len(self._reasons) - 1)
        first_jid = []
        ids = []
        copies_l, sizes_l = copies.tolist(), sizes.tolist()
        for b in range(B):
            j0 = self._next_job_id
            self._next_job_id += copies_l[b]
            first_jid.append(j0)
            for k in range(sizes_l[b]):
                ids.append(tuple((j0 + c, k) for c in range(copies_l[b])))
        params = self._draw_usage_params(self._rng_task, cpu[job_of], mem[job_of])
        self._add_tasks(tstart, tstart + dur_us, params, ids, [self._reasons[k] for k in reason_idx.tolist()])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
        self._block = [times.tolist(), sizes_l, copies_l, first_jid, user.tolist(), prio.tolist(), sclass.tolist(),
                       cpu.tolist(), mem.tolist(), diff.tolist(), cons, offsets, task_cons]
        self._block_pos = 0

    def _emit_job(self, t: int) -> Iterator[WorkloadEvent]:
        (times, sizes, copies, first_jid, user, prio, sclass, cpu, mem, diff, cons, offsets,
         task_cons) = self._block
        b = self._block_pos
        n, j0, off = sizes[b], first_jid[b], offsets[b]
        u, p, sc, c, m, d, jc = f"user{user[b]:04d}", prio[b], sclass[b], cpu[b], mem[b], diff[b], cons[b]
        for jid in range(j0, j0 + copies[b]):
            for k in range(n):
                yield AddTask(t, jid, k, u, p, sc, c, m, 0.0, task_cons.get(off + k, jc), d)
        self._count_live(n * copies[b])
        self.events_emitted += n * copies[b]
        self._block_pos += 1
        if self._block_pos == len(times):
            self._refill_block()

    def _remove(self, slot: int) -> Iterator[WorkloadEvent]:
        """End a task (and its clones).

        No partial usage record is emitted: a record is known only when its
        window closes, i.e. with the removal itself, when it no longer helps a
        scheduler (the trace reader drops such records for the same reason).
        """
        t = self._ends_time
        reason = self._reason[slot]
        ids = self._ids[slot]
        for jid, k in ids:
            yield RemoveTask(t, jid, k, reason)
        self.events_emitted += len(ids)
        self.live_tasks -= len(ids)
        self._held_ids -= len(ids)
        self._alive[slot] = False
        self._ids[slot] = None
        self._reason[slot] = None
        self._free.append(slot)
        self._n_live_slots -= 1

def generate(config: GeneratorConfig | None = None) -> Iterator[WorkloadEvent]:
    """The event stream of ``WorkloadGenerator(config)``."""
    return iter(WorkloadGenerator(config))
