import asyncio
import time

import pytest


async def wait_until(fn, timeout_s: float, what: str, period_s: float = 0.2):
    """Poll the coroutine function *fn* until it returns a truthy value; fail after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        last = await fn()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}; last value {last!r}")
        await asyncio.sleep(period_s)  # polling interval between condition checks, not a synchronisation sleep


# Files that take the longest on one worker (--durations of tier 1 on this box, CPU seconds):
# scale equivalence 559, sweep 114, masb_scale 94, ui_browser_run 75, rpc_fuzz 72, megha_model 65,
# run_sigterm 59, golden_runs 49, ansible_lint 36, workload_generator 25, refarch 25.
# With --dist loadfile, xdist hands files to the two workers in collection order: the long ones
# go first, so that neither worker starts one of them when the other is nearly done.
HEAVY_FIRST = ("test_scale_equivalence.py", "test_sweep.py", "test_masb_scale.py", "test_ui_browser_run.py",
               "test_rpc_fuzz.py", "test_megha_model.py", "test_run_sigterm.py", "test_golden_runs.py",
               "test_ansible_lint.py", "test_workload_generator.py", "test_refarch.py")


def pytest_collection_modifyitems(config, items):
    """The heavy files first (in HEAVY_FIRST's order), every other file after them as collected;
    the tests inside a file keep their order."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    order = {}
    for it in items:
        order.setdefault(it.path, len(order))
    items.sort(key=lambda it: (rank.get(it.path.name, len(rank)), order[it.path]))
