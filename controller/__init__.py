"""Controller (cellbed-controller): the Megha masters — Global Masters, Local Masters — and the
central and sampling baselines. The experiment runner and the workload are not here: they serve
every front-end and both kinds of cell, so they live in cellbed.experiment and cellbed.workload
(docs/architecture.md says why)."""
