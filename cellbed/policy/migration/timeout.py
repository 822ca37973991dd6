"""Pure decisions taken while a live migration runs: when to switch to post-copy, and what
to do when the completion timeout expires. No I/O; the backend applies the action."""
from __future__ import annotations

import dataclasses
import enum

from cellbed.domain.vm import JobProgress, MigrationOptions, TimeoutPolicy

# Switch to post-copy once the first full pre-copy pass is done (iteration 2 has begun):
# the destination then already holds most pages and post-copy faults are few.
POSTCOPY_AFTER_ITERATION = 2


class Action(str, enum.Enum):
    CONTINUE = "continue"
    SWITCH_POSTCOPY = "switch-postcopy"
    ABORT = "abort"
    ABORT_AND_RETRY_AUTO_CONVERGE = "abort-retry-auto-converge"


def needs_postcopy_flag(opts: MigrationOptions) -> bool:
    """Post-copy must be enabled when the job starts for a later switch to be possible."""
    return opts.postcopy or opts.timeout_policy is TimeoutPolicy.POSTCOPY


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Action
    why: str = ""
    timeout: bool = False   # True when the completion timeout caused this action


def next_action(opts: MigrationOptions, progress: JobProgress, elapsed_s: float,
                switched: bool, timed_out: bool) -> Decision:
    """Decide on one progress sample of a running migration."""
    if switched:
        return Decision(Action.CONTINUE, "already in post-copy")
    if opts.postcopy and progress.memory_iteration >= POSTCOPY_AFTER_ITERATION:
        return Decision(Action.SWITCH_POSTCOPY,
                        f"iteration {progress.memory_iteration} >= {POSTCOPY_AFTER_ITERATION}")
    if opts.completion_timeout_s > 0 and elapsed_s > opts.completion_timeout_s and not timed_out:
        why = (f"not complete after {elapsed_s:.1f} s > timeout {opts.completion_timeout_s:.1f} s "
               f"(iteration {progress.memory_iteration}, remaining {progress.data_remaining} B)")
        if opts.timeout_policy is TimeoutPolicy.POSTCOPY:
            return Decision(Action.SWITCH_POSTCOPY, why, timeout=True)
        if opts.timeout_policy is TimeoutPolicy.AUTO_CONVERGE and not opts.auto_converge:
            return Decision(Action.ABORT_AND_RETRY_AUTO_CONVERGE, why, timeout=True)
        return Decision(Action.ABORT, why, timeout=True)
    return Decision(Action.CONTINUE)


@dataclasses.dataclass
class JobWatch:
    """What the backend's polling of one migration job has seen and done: the inputs of
    :func:`next_action` and what the record says about the timeout."""

    switched: bool = False             # post-copy has started
    timed_out: bool = False
    downtime_set: bool = False         # the max-downtime limit has reached the running job
    retry_auto_converge: bool = False  # aborted so that the backend retries with auto-converge
    action_taken: str = ""
    abort_sent: bool = False           # libvirt accepted our abortJob for this job

    def decide(self, opts: MigrationOptions, progress: JobProgress, elapsed_s: float) -> Decision:
        d = next_action(opts, progress, elapsed_s, self.switched, self.timed_out)
        if d.timeout:
            self.timed_out = True
            self.action_taken = f"{d.action.value}: {d.why}"
        if d.action in (Action.ABORT, Action.ABORT_AND_RETRY_AUTO_CONVERGE):
            self.retry_auto_converge = d.action is Action.ABORT_AND_RETRY_AUTO_CONVERGE
        return d

    def ended_by_abort(self, error_says_aborted: bool) -> bool:
        """Whether a job that failed was aborted. After our abortJob, libvirt may report the
        destination's side of the cut stream ("qemu unexpectedly closed ... load of migration
        failed") instead of VIR_ERR_OPERATION_ABORTED: the failure is still the abort we asked for."""
        return error_says_aborted or self.abort_sent
