"""The GCD-shaped generator's draws: task requests, usage parameters, constraints and job metadata, in vectorised blocks, and the task-state arrays they fill."""
from __future__ import annotations

import heapq
import math
import numpy as np
from cellbed.workload.events import Band, Constraint, ConstraintOp
from cellbed.workload.genmath import MU_MIN, norm_cdf


class DrawMixin:
    """Part of WorkloadGenerator (which owns the state these methods use)."""

    # ------------------------------------------------------------- sampling
    def _draw_requests(self, rng: np.random.Generator, prod: np.ndarray,
                       sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CPU and memory requests on the grid, Gaussian-copula correlated, per band group and job size."""
        n = prod.shape[0]
        rho = self.config.request_cpu_mem_correlation
        z1 = rng.standard_normal(n)
        z2 = rho * z1 + math.sqrt(1 - rho * rho) * rng.standard_normal(n)
        u1 = norm_cdf(z1).astype(float)
        u2 = norm_cdf(z2).astype(float)
        cpu = np.empty(n)
        mem = np.empty(n)
        last = len(self._grid) - 1
        for is_prod, size in set(zip(prod.tolist(), sizes.tolist())):
            sel = (prod == is_prod) & (sizes == size)
            cc, mc = self._w_cdf[(is_prod, size)]
            cpu[sel] = self._grid[np.minimum(np.searchsorted(cc, u1[sel], side="right"), last)]
            mem[sel] = self._grid[np.minimum(np.searchsorted(mc, u2[sel], side="right"), last)]
        return cpu, mem

    def _draw_usage_params(self, rng: np.random.Generator, cpu_req: np.ndarray, mem_req: np.ndarray):
        """Per-task CPU process parameters and memory use (vectorised)."""
        cfg = self.config
        n = cpu_req.shape[0]
        nz = rng.random(n) < self._p_nz
        kappa = cfg.cpu_use_ratio_concentration
        active = rng.beta(self._m_o * kappa, (1 - self._m_o) * kappa, n) * cpu_req
        near = rng.beta(1.0, 2.0, n) * np.minimum(cpu_req, cfg.near_zero_cpu)
        mu = np.maximum(np.where(nz, near, active), MU_MIN)
        s = cfg.sigma_scatter
        scatter = np.exp(rng.normal(-0.5 * s * s, s, n)) if s > 0 else np.ones(n)
        sig_i = (cfg.inst_sigma_slope * mu + cfg.inst_sigma_intercept) * scatter
        sig_a = (cfg.avg_sigma_slope * mu + cfg.avg_sigma_intercept) * scatter
        a2 = 1.0 + (sig_a / mu) ** 2
        i2 = 1.0 + (sig_i / mu) ** 2
        ns = rng.random(n) < cfg.nonstationary_frac
        vL = np.where(ns, a2 ** cfg.nonstationary_variance_share - 1.0, 0.0)
        vR = a2 / (1.0 + vL) - 1.0
        vW = i2 / a2 - 1.0
        km = cfg.mem_use_ratio_concentration
        mem_used = rng.beta(cfg.mem_use_ratio_mean * km, (1 - cfg.mem_use_ratio_mean) * km, n) * mem_req
        return mu, vL, vR, vW, ns, mem_used

    def _draw_constraints(self, rng: np.random.Generator) -> tuple[Constraint, ...]:
        cfg = self.config
        if rng.random() >= cfg.constrained_job_frac:
            return ()
        k = min(cfg.max_constraints, int(rng.geometric(cfg.extra_constraint_geom_p)), len(self._common_attrs))
        share = self._attr_share
        best: tuple[Constraint, ...] = ()
        for attempt in range(20):
            kk = k if attempt < 10 else 1
            attrs = self._common_attrs[np.argsort(rng.random(self._common_attrs.size))[:kk]]
            cons = []
            match = 1.0
            for j in sorted(attrs.tolist()):
                p = float(cfg.attribute_probs[j])
                if rng.random() < p:
                    cons.append(Constraint(self.attribute_names[j], ConstraintOp.EQUAL, 1))
                    match *= share[j]
                else:
                    cons.append(Constraint(self.attribute_names[j], ConstraintOp.NOT_EQUAL, 1))
                    match *= 1.0 - share[j]
            best = tuple(cons)
            if match >= cfg.min_match_fraction:
                return best
        return best

    def _restrictive(self, rng: np.random.Generator, base: tuple[Constraint, ...]) -> tuple[Constraint, ...]:
        """Add EQUAL on a rare attribute; keep only the job constraints some of those nodes satisfy."""
        j = int(self._rare_attrs[int(rng.integers(self._rare_attrs.size))])
        name = self.attribute_names[j]
        has = self._node_attr_matrix
        cand = has[:, j].copy()
        kept = [Constraint(name, ConstraintOp.EQUAL, 1)]
        for c in base:
            if c.attribute == name:
                continue
            col = has[:, self._attr_index[c.attribute]]
            ok = cand & (col if c.op == ConstraintOp.EQUAL else ~col)
            if ok.any():
                cand = ok
                kept.append(c)
        return tuple(sorted(kept, key=lambda c: c.attribute))

    def _copies(self, n: int) -> np.ndarray:
        """How many copies of each of n jobs (MASB duplication: floor(m), +1 with prob frac(m))."""
        m = self.config.workload_multiplier
        whole = int(math.floor(m))
        frac = m - whole
        extra = self._rng_clone.random(n) < frac if frac > 0 else np.zeros(n, dtype=bool)
        return whole + extra.astype(np.int64)

    def _job_meta(self, rng: np.random.Generator, prod: np.ndarray):
        """User index, priority and scheduling class per job.

        [RECON] class rule (no source): free → 0, middle → 0 or 1, production → 2 or 3.
        """
        cfg = self.config
        n = prod.shape[0]
        user = np.searchsorted(self._user_cdf_a, rng.random(n), side="right")
        free = ~prod & (rng.random(n) < cfg.free_share_of_nonproduction)
        u = rng.random(n)
        prio = np.empty(n, dtype=np.int64)
        for band, sel in ((Band.PRODUCTION, prod), (Band.FREE, free), (Band.MIDDLE, ~prod & ~free)):
            vals = np.array(self._prio_vals[band])
            idx = np.minimum(np.searchsorted(self._prio_cdf_a[band], u[sel], side="right"), vals.size - 1)
            prio[sel] = vals[idx]
        coin = rng.random(n) < 0.5
        sclass = np.where(prod, 2 + coin, np.where(free, 0, coin.astype(np.int64)))
        return np.minimum(user, cfg.users - 1), prio, sclass

    # ------------------------------------------------------------- state
    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        new = max(need, 2 * self._cap, 1024)

        def ext(a: np.ndarray) -> np.ndarray:
            b = np.zeros(new, dtype=a.dtype)
            b[: a.shape[0]] = a
            return b

        self._mu, self._vL, self._vR, self._vW = ext(self._mu), ext(self._vL), ext(self._vR), ext(self._vW)
        self._ns, self._L, self._regime_end = ext(self._ns), ext(self._L), ext(self._regime_end)
        self._mem, self._start, self._alive = ext(self._mem), ext(self._start), ext(self._alive)
        self._ids.extend([None] * (new - self._cap))
        self._reason.extend([None] * (new - self._cap))
        self._free.extend(range(new - 1, self._cap - 1, -1))  # pop() hands out the lowest slot first
        self._cap = new

    def _add_tasks(self, start_us: np.ndarray, end_us: np.ndarray, params, ids: list, reasons: list) -> np.ndarray:
        """Put tasks into free slots (they count as running only once their AddTask is emitted)."""
        n = len(ids)
        if len(self._free) < n:
            self._grow(self._n_live_slots + n)
        free = self._free
        slots = free[len(free) - n:][::-1]
        del free[len(free) - n:]
        sl = np.array(slots, dtype=np.int64)
        mu, vL, vR, vW, ns, mem_used = params
        self._mu[sl], self._vL[sl], self._vR[sl], self._vW[sl] = mu, vL, vR, vW
        self._ns[sl], self._mem[sl] = ns, mem_used
        self._L[sl] = 1.0
        self._regime_end[sl] = start_us  # a non-stationary task draws its first regime at its first record
        self._start[sl] = start_us
        self._alive[sl] = True
        ends = self._ends
        held = 0
        for s_, tid, r, e in zip(slots, ids, reasons, end_us.tolist()):
            self._ids[s_] = tid
            self._reason[s_] = r
            heapq.heappush(ends, (e, s_))
            held += len(tid)
        self._held_ids += held
        self._n_live_slots += n
        return sl

    def _count_live(self, n: int) -> None:
        self.live_tasks += n
        if self.live_tasks > self.max_live_tasks:
            self.max_live_tasks = self.live_tasks
