"""A migration the timeout policy aborts is recorded ABORTED, whatever error libvirt ends it with.

Stop 34's CI (test_cell_migration.py::test_timeout_policy_abort_keeps_vm_on_source): the backend
called abortJob at the 3-s timeout, and libvirt ended the job with the destination's side of the
cut stream, VIR_ERR_INTERNAL_ERROR "qemu unexpectedly closed the monitor ... load of migration
failed: Invalid argument", not VIR_ERR_OPERATION_ABORTED. The record said FAILED for a migration
the policy had aborted. Here a fake domain plays that job; no libvirtd, no sleeps: the job's
thread ends when abortJob is called."""
import asyncio
import threading

import libvirt
import pytest

from cellbed.domain import errors
from cellbed.daemon.hv_libvirt import LibvirtBackend
from cellbed.domain.vm import MigrationOptions, TimeoutPolicy
from cellbed.policy.migration.timeout import JobWatch

DEST_SIDE = ("internal error: qemu unexpectedly closed the monitor: qemu-system-x86_64: "
             "load of migration failed: Invalid argument")


def libvirt_error(code: int, msg: str) -> libvirt.libvirtError:
    e = libvirt.libvirtError(msg)
    e.err = (code, 0, msg, 0, "", None, None, 0, 0)
    return e


class MigratingDom:
    """A domain whose migration job runs until abortJob, then fails with *code*; or, if
    *refuse_abort*, refuses abortJob and fails on its own with *code*."""

    def __init__(self, code: int, refuse_abort: bool = False) -> None:
        self.code, self.refuse_abort = code, refuse_abort
        self.ended, self.started = threading.Event(), threading.Event()
        self.calls: list[str] = []

    def migrateToURI3(self, uri, params, flags):
        self.calls.append("migrate")
        self.started.set()
        self.ended.wait()
        raise libvirt_error(self.code, DEST_SIDE if self.code != libvirt.VIR_ERR_OPERATION_ABORTED
                            else "operation aborted: migration out job: canceled by client")

    def jobStats(self, flags):
        return {"type": libvirt.VIR_DOMAIN_JOB_UNBOUNDED, "memory_iteration": 1, "data_remaining": 85794816}

    def abortJob(self):
        self.calls.append("abort")
        if self.refuse_abort:
            self.ended.set()             # the job failed by itself; libvirt has no job left to abort
            raise libvirt_error(libvirt.VIR_ERR_OPERATION_INVALID, "operation invalid: no job is active")
        self.ended.set()
        return 0


class Conn:
    def __init__(self, dom) -> None:
        self.dom = dom

    def lookupByName(self, name):
        return self.dom


def migrate(dom: MigratingDom):
    async def main():
        b = LibvirtBackend("qemu:///system", accel="tcg", image=None, measure_dirty_rate=False,
                           progress_period_s=0.01)
        b._conn = Conn(dom)
        opts = MigrationOptions(completion_timeout_s=0.001, timeout_policy=TimeoutPolicy.ABORT)
        with pytest.raises(errors.MigrationFailed) as ei:
            await b.migrate("tmo1", "qemu+tls://10.0.0.2/system", opts)
        return ei.value
    return asyncio.run(main())


@pytest.mark.parametrize("code", [libvirt.VIR_ERR_INTERNAL_ERROR, libvirt.VIR_ERR_OPERATION_FAILED,
                                  libvirt.VIR_ERR_OPERATION_ABORTED])
def test_a_job_that_ends_after_our_abort_is_aborted_whatever_libvirt_says(code):
    dom = MigratingDom(code)
    exc = migrate(dom)
    assert dom.calls == ["migrate", "abort"]
    assert exc.aborted                                    # before the fix: False for the first two codes
    assert exc.timeout_action.startswith("abort: not complete after")


def test_a_job_that_failed_before_our_abort_reached_libvirt_is_failed():
    """abortJob refused (no job left): the failure was the job's own, so it is not an abort."""
    exc = migrate(MigratingDom(libvirt.VIR_ERR_INTERNAL_ERROR, refuse_abort=True))
    assert not exc.aborted and "load of migration failed" in str(exc)


# The rule itself, as a table: (libvirt's code said aborted, our abort reached libvirt) -> aborted.
@pytest.mark.parametrize("error_says, sent, aborted", [
    (False, False, False),    # a plain failure
    (True, False, True),      # someone else's abortJob (cellctl migrate --abort)
    (False, True, True),      # ours, reported as the destination's error (stop 34's CI)
    (True, True, True),
])
def test_ended_by_abort(error_says, sent, aborted):
    w = JobWatch(abort_sent=sent)
    assert w.ended_by_abort(error_says) is aborted


def test_the_operators_abort_is_aborted_whatever_libvirt_says():
    """`cellctl vm migrate --abort` reaches the backend's abort_migration, not the policy: the same
    race, the same outcome. No timeout here; the job runs until the operator's abort."""
    dom = MigratingDom(libvirt.VIR_ERR_INTERNAL_ERROR)

    async def main():
        b = LibvirtBackend("qemu:///system", accel="tcg", image=None, measure_dirty_rate=False,
                           progress_period_s=0.01)
        b._conn = Conn(dom)
        job = asyncio.create_task(b.migrate("tmo1", "qemu+tls://10.0.0.2/system", MigrationOptions(completion_timeout_s=0)))
        await asyncio.get_running_loop().run_in_executor(None, dom.started.wait)   # the job is under way
        await b.abort_migration("tmo1")
        with pytest.raises(errors.MigrationFailed) as ei:
            await job
        return ei.value
    exc = asyncio.run(main())
    assert dom.calls == ["migrate", "abort"] and exc.aborted   # before: False (the destination's error)
