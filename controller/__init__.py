"""Controller: experiment runner, workload, Megha masters."""
