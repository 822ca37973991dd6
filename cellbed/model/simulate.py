"""Megha-style experiments on the model cell: a generated arrival stream (not the GCD stream)
through a Megha front-end, as the Megha paper's simulator measures placement.

    res = simulate(megha_cell(frontend="megha", nodes=1000, gms=4, lms=10),
                   ArrivalConfig(duration_s=30, job_rate_per_s=40, users=...))
"""
from __future__ import annotations

from cellbed.controller.megha.params import GmParams, LmParams
from cellbed.controller.megha.workload import Arrival, ArrivalConfig, arrivals
from cellbed.model.cell import ModelCell
from cellbed.model.megha import ModelRunResult
from cellbed.model.params import ModelCellParams
from cellbed.runtime.clock import run_virtual

__all__ = ["simulate"]


def simulate(params: ModelCellParams, workload: ArrivalConfig | list[Arrival], drain_s: float = 300.0,
             sample_period_s: float = 0.0, check: bool = True, gm_params: GmParams | None = None,
             lm_params: LmParams | None = None) -> ModelRunResult:
    """Build a Megha-front-end model cell, run *workload* through it in virtual time, tear it down."""
    cell = ModelCell(params, gm_params=gm_params, lm_params=lm_params)

    async def main():
        front = await cell.frontend.build()
        try:
            arr = workload if isinstance(workload, list) else arrivals(workload, params.megha.attribute_probs)
            res = await front.run_arrivals(arr, drain_s=drain_s, sample_period_s=sample_period_s)
            if check:
                front.check_no_double_allocation()
            return res
        finally:
            await front.close()
    return run_virtual(main())
