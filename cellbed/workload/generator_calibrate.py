"""How the GCD-shaped generator builds its cell and calibrates itself (the task-count, request and usage targets of seed 004 and the digest), before it streams."""
from __future__ import annotations

import logging
import math
import numpy as np
from cellbed.workload.events import MAX_PRIORITY, Band, band_of
from cellbed.workload.calibration import CpuUseModel, RequestModel
from cellbed.workload.genmath import apportion, grid_weights
from cellbed.workload.generator_config import US_PER_S, Calibration, NodeSpec

log = logging.getLogger(__name__)


class CalibrateMixin:
    """Part of WorkloadGenerator (which owns the state these methods use)."""

    # ------------------------------------------------------------------ cell
    def _make_cell(self) -> tuple[NodeSpec, ...]:
        cfg, rng = self.config, self._rng_cell
        n = cfg.nodes
        counts = apportion([mc.share for mc in cfg.machine_classes], n)
        cls = np.repeat(np.arange(len(cfg.machine_classes)), counts)
        rng.shuffle(cls)
        has = np.zeros((n, len(cfg.attribute_probs)), dtype=bool)
        for j, p in enumerate(cfg.attribute_probs):
            k = max(1, min(n, int(round(p * n))))
            has[rng.choice(n, size=k, replace=False), j] = True
        names = self.attribute_names
        out = []
        for i in range(n):
            mc = cfg.machine_classes[int(cls[i])]
            attrs = tuple(names[j] for j in np.flatnonzero(has[i]))
            out.append(NodeSpec(i + 1, mc.cpu, mc.mem, mc.platform, attrs))
        self._node_attr_matrix = has
        return tuple(out)

    def _compact(self, full: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
        keep = int(round(len(full) * (1.0 - self.config.compaction)))
        if keep == len(full):
            return full
        idx = np.sort(self._rng_cell.choice(len(full), size=keep, replace=False))
        return tuple(full[i] for i in idx)

    # -------------------------------------------------------- static tables
    def _setup_static(self) -> None:
        cfg = self.config
        a = cfg.duration_anchors_s
        self._seg_lo = np.array([a[i][0] for i in range(len(a) - 1)])
        self._seg_hi = np.array([a[i + 1][0] for i in range(len(a) - 1)])
        self._seg_mass = np.array([a[i + 1][1] - a[i][1] for i in range(len(a) - 1)])
        lo, hi = self._seg_lo, self._seg_hi
        self._seg_mean = (hi - lo) / np.log(hi / lo)  # mean of log-uniform on [lo, hi]
        pp = np.array(cfg.production_prob_by_segment)
        self._p_prod = float((self._seg_mass * pp).sum())
        self._seg_w_prod = self._seg_mass * pp / (self._seg_mass * pp).sum()
        npm = self._seg_mass * (1 - pp)
        self._seg_w_np = npm / npm.sum()
        lb = self._seg_mass * self._seg_mean  # length-biased segment weights
        self._seg_w_warm = lb / lb.sum()
        self._seg_pp = pp
        # job sizes
        cap = max(2, int(cfg.max_job_fraction_of_nodes * cfg.nodes))
        vals = np.array([v for v in cfg.tasks_per_job_values if v <= cap] or [2])
        w = vals.astype(float) ** (-cfg.tasks_per_job_exponent)
        self._job_vals = vals
        self._job_cdf_a = np.cumsum(w / w.sum())
        self._mean_tail = float((vals * w / w.sum()).sum())
        pjob = np.concatenate([[cfg.single_task_job_frac], (1 - cfg.single_task_job_frac) * w / w.sum()])
        self._size_vals = np.concatenate([[1], vals]).astype(np.int64)
        self._size_ptask = pjob * self._size_vals / (pjob * self._size_vals).sum()  # size-biased
        self._size_ptask_cdf = np.cumsum(self._size_ptask)
        self._mean_tasks_per_job = cfg.single_task_job_frac + (1 - cfg.single_task_job_frac) * self._mean_tail
        # users
        uw = np.arange(1, cfg.users + 1, dtype=float) ** (-cfg.user_zipf_exponent)
        self._user_cdf_a = np.cumsum(uw / uw.sum())
        # priorities per band
        self._prio_vals = {}
        self._prio_cdf_a = {}
        for band in Band:
            ps = [p for p in range(MAX_PRIORITY + 1) if band_of(p) == band]
            ws = np.array([cfg.priority_weights[p] for p in ps])
            self._prio_vals[band] = ps
            self._prio_cdf_a[band] = np.cumsum(ws / ws.sum())
        # end reasons
        self._reasons = [r for r, _ in cfg.end_reason_weights]
        rw = np.array([w for _, w in cfg.end_reason_weights], dtype=float)
        self._reason_cdf_a = np.cumsum(rw / rw.sum())
        # attributes
        ap = np.array(cfg.attribute_probs)
        # actual shares in the full cell (exact counts, see _make_cell)
        self._attr_share = self._node_attr_matrix.mean(axis=0)
        self._attr_index = {name: j for j, name in enumerate(self.attribute_names)}
        self._common_attrs = np.flatnonzero(ap >= cfg.restrictive_max_match)
        self._rare_attrs = np.flatnonzero(ap < cfg.restrictive_max_match)
        self._grid = np.array(cfg.request_grid)
        self._period_us = int(round(cfg.usage_period_s * US_PER_S))

    # ------------------------------------------------------------ calibration
    def _band_shares(self) -> tuple[float, float, float, float]:
        """(mean duration, running share of production, long tasks' production and non-production shares)."""
        cfg = self.config
        mean_d = float((self._seg_mass * self._seg_mean).sum())
        s_p = float((self._seg_mass * self._seg_mean * self._seg_pp).sum() / mean_d)
        # long tasks (≥ long_task_s), counted per task (as [003] did), by band
        lo, hi, L = self._seg_lo, self._seg_hi, cfg.long_task_s
        frac_above = np.where(hi <= L, 0.0, np.log(hi / np.maximum(lo, L)) / np.log(hi / lo))
        long_p = float((self._seg_mass * frac_above * self._seg_pp).sum())
        long_n = float((self._seg_mass * frac_above * (1 - self._seg_pp)).sum())
        if long_p + long_n <= 0:
            raise ValueError("GeneratorConfig.duration_anchors_s must allow tasks longer than long_task_s")
        return mean_d, s_p, long_p / (long_p + long_n), long_n / (long_p + long_n)

    def _calibrate(self) -> Calibration:
        cfg = self.config
        cell_cpu = float(sum(n.cpu for n in self._full_nodes))
        cell_mem = float(sum(n.mem for n in self._full_nodes))
        n_full = len(self._full_nodes)
        running = cfg.target_tasks_per_node * n_full  # expected running tasks (multiplier 1)
        mean_d, s_p, lp, ln_ = self._band_shares()
        s_n = 1.0 - s_p
        lam = running / mean_d
        req = RequestModel(self._grid, cfg.request_log_spread, self._size_vals, self._size_ptask,
                           cfg.request_job_size_exponent)
        loc_pc = req.solve(cfg.target_prod_requested_cpu * cell_cpu / (running * s_p),
                           "mean production CPU request (target_prod_requested_cpu)")
        loc_pm = req.solve(cfg.target_prod_requested_mem * cell_mem / (running * s_p),
                           "mean production memory request (target_prod_requested_mem)")
        mem_np = (cfg.target_used_mem * cell_mem / (running * cfg.mem_use_ratio_mean) - s_p * req.mean(loc_pm)) / s_n
        loc_nm = req.solve(mem_np, "mean non-production memory request (target_used_mem vs target_prod_requested_mem)")
        cpu = CpuUseModel(cfg, req, loc_pc, s_p, lp, ln_)
        p_nz, loc_nc, mo, nz_share = cpu.solve(cfg.target_used_cpu * cell_cpu / running)
        self._w_cdf = {
            (is_prod, int(n)): (np.cumsum(grid_weights(req.grid, lc + sh, req.spread)),
                                np.cumsum(grid_weights(req.grid, lm + sh, req.spread)))
            for is_prod, lc, lm in ((True, loc_pc, loc_pm), (False, loc_nc, loc_nm))
            for n, sh in zip(self._size_vals, req.shifts)
        }
        self._p_nz = p_nz
        self._m_o = mo
        cal = Calibration(
            cell_cpu=cell_cpu, cell_mem=cell_mem, mean_duration_s=mean_d, task_arrival_rate_per_s=lam,
            job_arrival_rate_per_s=lam / self._mean_tasks_per_job, mean_tasks_per_job=self._mean_tasks_per_job,
            arrivals_per_node_min=lam * 60.0 / n_full, production_arrival_share=self._p_prod,
            production_running_share=s_p, share_over_20min=1.0 - self._anchor_cdf(1200.0),
            request_loc_prod_cpu=loc_pc, request_loc_prod_mem=loc_pm, request_loc_nonprod_cpu=loc_nc,
            request_loc_nonprod_mem=loc_nm, mean_cpu_request_prod=req.mean(loc_pc),
            mean_mem_request_prod=req.mean(loc_pm), mean_cpu_request_nonprod=req.mean(loc_nc),
            mean_mem_request_nonprod=req.mean(loc_nm), active_cpu_ratio_mean=mo, near_zero_prob=p_nz,
            expected_tasks_per_node=cfg.target_tasks_per_node,
            expected_used_cpu=cpu.used(p_nz, loc_nc) * running / cell_cpu,
            expected_used_mem=cfg.mem_use_ratio_mean * running
            * (s_p * req.mean(loc_pm) + s_n * req.mean(loc_nm)) / cell_mem,
            expected_prod_requested_cpu=running * s_p * req.mean(loc_pc) / cell_cpu,
            expected_prod_requested_mem=running * s_p * req.mean(loc_pm) / cell_mem,
            expected_cpu_use_ratio=cpu.expected_ratio(p_nz, loc_nc, mo),
            expected_near_zero_share_long=nz_share,
        )
        log.info(
            "workload calibrated: %.4f tasks/s (%.4f per node·min), mean duration %.0f s, production "
            "%.1f%% of arrivals / %.1f%% of running, m_o=%.3f, p_nz=%.3f",
            cal.task_arrival_rate_per_s, cal.arrivals_per_node_min, mean_d,
            100 * self._p_prod, 100 * s_p, mo, p_nz,
        )
        return cal

    def _anchor_cdf(self, t: float) -> float:
        a = self.config.duration_anchors_s
        if t <= a[0][0]:
            return 0.0
        for (t0, p0), (t1, p1) in zip(a, a[1:]):
            if t <= t1:
                return p0 + (p1 - p0) * math.log(t / t0) / math.log(t1 / t0)
        return 1.0
