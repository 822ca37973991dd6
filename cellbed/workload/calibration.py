"""The request and usage calibration of the GCD-shaped generator (seed 004 and the digest's
targets): the log-normal request locations of each band and resource, and the near-zero share
and mean use/request ratio of active tasks, solved so that the cell's used and requested CPU
and memory hit their targets. Pure arithmetic over the generator's static tables."""
from __future__ import annotations

import logging
import math

import numpy as np

from cellbed.workload.genmath import beta_cdf, grid_weights, solve_monotone

log = logging.getLogger(__name__)

E_U = 1.0 / 3.0
"""Mean of Beta(1, 2): the near-zero archetype's fraction of min(request, near_zero_cpu)."""


class RequestModel:
    """Grid weights of a running task's request, mixed over the size-biased job-size distribution:
    jobs of size n shift the location by -β·ln n."""

    def __init__(self, grid: np.ndarray, spread: float, size_vals, size_ptask, beta: float) -> None:
        self.grid, self.spread = grid, spread
        self.shifts = -beta * np.log(size_vals)
        self.ptask = size_ptask
        self.lo_loc = math.log(grid[0]) - 6.0 * spread
        self.hi_loc = math.log(grid[-1]) + 6.0 * spread

    def weights(self, loc: float) -> np.ndarray:
        return sum(p * grid_weights(self.grid, loc + sh, self.spread) for p, sh in zip(self.ptask, self.shifts))

    def mean(self, loc: float) -> float:
        return float((self.weights(loc) * self.grid).sum())

    def solve(self, target: float, what: str) -> float:
        return solve_monotone(self.mean, target, self.lo_loc, self.hi_loc, what)


class CpuUseModel:
    """Used CPU of running tasks: a near-zero archetype (share p_nz) and active tasks whose
    use/request ratio has mean m_o (Beta with concentration κ), in both bands."""

    def __init__(self, cfg, req: RequestModel, loc_pc: float, s_p: float, lp: float, ln_: float) -> None:
        self.cfg, self.req = cfg, req
        grid = req.grid
        self.z = cfg.near_zero_cpu
        self.minz = np.minimum(grid, self.z)
        self.w_pc = req.weights(loc_pc)
        self.A_p = float((self.w_pc * self.minz / grid).sum())
        self.B_p = float((self.w_pc * self.minz).sum())
        self.C_p = float((self.w_pc * grid).sum())
        self.s_p, self.s_n = s_p, 1.0 - s_p
        self.lp, self.ln_ = lp, ln_
        self.kappa = cfg.cpu_use_ratio_concentration

    def ratio_mo(self, p_nz: float, loc_nc: float) -> float:
        w = self.req.weights(loc_nc)
        A_n = float((w * self.minz / self.req.grid).sum())
        return (self.cfg.cpu_use_ratio_mean - p_nz * E_U * (self.s_p * self.A_p + self.s_n * A_n)) / (1 - p_nz)

    def used(self, p_nz: float, loc_nc: float) -> float:
        w = self.req.weights(loc_nc)
        B_n, C_n = float((w * self.minz).sum()), float((w * self.req.grid).sum())
        mo = self.ratio_mo(p_nz, loc_nc)
        return (self.s_p * (p_nz * E_U * self.B_p + (1 - p_nz) * mo * self.C_p)
                + self.s_n * (p_nz * E_U * B_n + (1 - p_nz) * mo * C_n))

    def q_active_below(self, mo: float, loc_nc: float) -> float:
        a_, b_ = mo * self.kappa, (1 - mo) * self.kappa
        pb = np.array([beta_cdf(self.z / g, a_, b_) for g in self.req.grid])
        return float(self.lp * (self.w_pc * pb).sum() + self.ln_ * (self.req.weights(loc_nc) * pb).sum())

    def solve_loc(self, p_nz: float, used_target: float) -> float:
        return solve_monotone(lambda t: self.used(p_nz, t), used_target, self.req.lo_loc, self.req.hi_loc,
                              "mean non-production CPU request (target_used_cpu)")

    def solve(self, used_target: float) -> tuple[float, float, float, float]:
        """(p_nz, loc_nc, m_o, near-zero share of long tasks): the fixed point of the near-zero
        share, each step solving the non-production CPU location for the used-CPU target."""
        cfg = self.cfg
        p_nz = cfg.near_zero_frac
        for _ in range(100):
            loc_nc = self.solve_loc(p_nz, used_target)
            mo = self.ratio_mo(p_nz, loc_nc)
            if not 0.005 < mo < 0.995:
                raise ValueError(
                    f"calibration infeasible: active tasks' CPU use/request mean would be {mo:.3f}; "
                    "adjust cpu_use_ratio_mean, near_zero_frac or the used/requested CPU targets"
                )
            q = self.q_active_below(mo, loc_nc)
            p_new = 0.0 if q >= cfg.near_zero_frac else (cfg.near_zero_frac - q) / (1 - q)
            if abs(p_new - p_nz) < 1e-10:
                p_nz = p_new
                break
            p_nz = p_new
        loc_nc = self.solve_loc(p_nz, used_target)
        mo = self.ratio_mo(p_nz, loc_nc)
        q = self.q_active_below(mo, loc_nc)
        nz_share = p_nz + (1 - p_nz) * q
        if abs(nz_share - cfg.near_zero_frac) > 0.01:
            log.warning("near-zero share of long tasks reaches %.3f, not %.3f (small requests alone exceed it)",
                        nz_share, cfg.near_zero_frac)
        return p_nz, loc_nc, mo, nz_share

    def expected_ratio(self, p_nz: float, loc_nc: float, mo: float) -> float:
        A_n = float((self.req.weights(loc_nc) * self.minz / self.req.grid).sum())
        return p_nz * E_U * (self.s_p * self.A_p + self.s_n * A_n) + (1 - p_nz) * mo
