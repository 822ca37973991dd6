"""The files of a results folder (DESIGN §12) and the error for a run that did not complete."""
from __future__ import annotations

from cellbed.domain.errors import FailedPrecondition


RESULTS_FORMAT = "cellbed-results/1"
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
TICKS = "ticks.csv"
MIGRATIONS = "migrations.csv"
ALLOCATIONS = "allocations.csv"
VMS = "vms.csv"
"""A real cell's per-VM samples, one row per VM per tick (what the model twin's guest overhead is
fitted from: cellbed/experiment/twin/fit.py)."""
VM_COLUMNS = ("t_s", "host", "vm", "state", "age_s", "vcpus", "cpu_load", "cpu_used_cores", "mem_mib", "wss_mib",
              "rss_mib", "boot_s")
"""``vms.csv``: one row per VM per tick of a real run (t_s simulated; age_s and boot_s wall seconds);
the real runner writes it, the twin's fit reads it."""
SANS = "san.csv"
"""A real cell's finished SAN rounds, with the time of each step after the overload (cellbed/metrics/san_timing.py)."""
STAGES = "stages.csv"
"""Per-stage timing of the run (DESIGN §17, seed 002's TC): calls, errors, hosts or tasks examined and
time per (stage, policy), summed over every agent (cellbed/runtime/plugins/stats.py)."""
TASKS = "tasks.csv"
"""A jobs workload's tasks: job, submission, duration (what TRT, JMS, NJSL and JWT are computed from)."""
TASK_COLUMNS = ("task", "job", "user", "arrival_s", "duration_s", "cpu", "mem_mib")
DECISIONS = "decisions.jsonl"
"""Explained decisions (DESIGN §17), a sampled share (run.explain): one JSON object per decision
(cellbed/runtime/explain.py; SAN rounds: daemon/san/explain.py; Megha: controller/megha/gm_explain.py)."""
RUN_COMPLETED = "run_completed"


class IncompleteRun(FailedPrecondition):
    """A results folder without ``run_completed`` at the end of events.jsonl."""
