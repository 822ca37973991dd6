"""The GCD-shaped generator's usage stream: each live task's usage record every usage period, from its regime (mean, spread, burst) at that time."""
from __future__ import annotations

from typing import Iterator
import numpy as np
from cellbed.workload.events import UpdateTaskUsedResources, WorkloadEvent
from cellbed.workload.genmath import gamma1
from cellbed.workload.generator_config import US_PER_S


class UsageMixin:
    """Part of WorkloadGenerator (which owns the state these methods use)."""

    def _sample(self, rng: np.random.Generator, sl: np.ndarray):
        """5-min mean, one 1-s sample, approximate max CPU, and memory for the slots."""
        m = np.minimum(self._mu[sl] * self._L[sl] * gamma1(rng, self._vR[sl]), 1.0)
        vW = self._vW[sl]
        x = np.minimum(m * gamma1(rng, vW), 1.0)
        # max of ~300 one-second samples, approximated as 3 σ above the record mean
        mx = np.minimum(np.maximum(x, m * (1.0 + 3.0 * np.sqrt(vW))), 1.0)
        noise = self.config.mem_usage_noise
        mem = self._mem[sl]
        if noise > 0:
            mem = np.maximum(mem * (1.0 + noise * rng.standard_normal(sl.shape[0])), 0.0)
        return m, x, mx, mem

    def _tick(self, t: int) -> Iterator[WorkloadEvent]:
        """One usage record per running task for the period ending at t (tasks that started at t excluded)."""
        sl = np.flatnonzero(self._alive[: self._cap] & (self._start[: self._cap] < t))
        if sl.size == 0:
            return
        self._update_regimes(t, sl)
        yield from self._records(t, sl)

    def _update_regimes(self, t: int, sl: np.ndarray) -> None:
        """New regime level for non-stationary tasks whose regime has run out."""
        due = self._ns[sl] & (self._regime_end[sl] <= t)
        if due.any():
            ch = sl[due]
            rng = self._rng_usage
            self._L[ch] = gamma1(rng, self._vL[ch])
            self._regime_end[ch] = t + rng.exponential(self.config.regime_mean_s * US_PER_S, ch.size)

    def _records(self, t: int, sl: np.ndarray) -> Iterator[WorkloadEvent]:
        if sl.size == 0:
            return
        rng = self._rng_usage
        m, x, mx, mem = self._sample(rng, sl)
        ws = np.maximum(self._start[sl], t - self._period_us)
        # records in window-start order (stable): the GCD file order, so a trace round trip is exact
        order = np.argsort(ws, kind="stable")
        sl, m, x, mx, mem, ws = sl[order], m[order], x[order], mx[order], mem[order], ws[order].tolist()
        ids = self._ids
        cls = UpdateTaskUsedResources
        count = 0
        for s, mi, xi, mxi, memi, wsi in zip(sl.tolist(), m.tolist(), x.tolist(), mx.tolist(), mem.tolist(), ws):
            for jid, k in ids[s]:
                yield cls(t, jid, k, None, wsi, t, mi, memi, None, None, mxi, xi)
                count += 1
        self.events_emitted += count
