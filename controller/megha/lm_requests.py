"""An LM's validation of the GMs' requests (seed 001 §IV-B6): one at a time (the LM is the serial
point of its cluster). Success reserves the resources at once, answers with a delta of the
changed host, and starts the task on its node in the background; a stale request is refused
with the full state of all partitions, counted as an internal or external inconsistency."""
from __future__ import annotations

from collections import Counter

from cellbed.controller.megha.background import Background
from cellbed.controller.megha.lm_core import LmCore
from cellbed.controller.megha.lm_launch import Launcher
from cellbed.controller.megha.lm_replicate import Replicator
from cellbed.controller.megha.lm_wire import check_task, task_request
from cellbed.controller.megha.params import LmParams
from cellbed.runtime.plugins.guard import PolicyFailed
from cellbed.domain import errors, wire
from cellbed.domain.constraints import Constraint
from cellbed.policy.megha.validation import EXTERNAL, INTERNAL, LmTask, Refusal
from cellbed.v1 import megha_pb2 as meghapb

INCONSISTENCY_PB = {INTERNAL: meghapb.INCONSISTENCY_INTERNAL, EXTERNAL: meghapb.INCONSISTENCY_EXTERNAL,
                    "preemption": meghapb.INCONSISTENCY_PREEMPTION}


class Requests:
    """Launch, Repartition and Preempt, and a start outside the GMs (place_direct). The fit of a
    task on a host is checked in one place, ``_validate``."""

    def __init__(self, core: LmCore, launcher: Launcher, repl: Replicator, bg: Background, clock,
                 params: LmParams, counters: Counter, validation=None) -> None:
        """*validation*: the ``validation`` stage's policy (the room check on the true state)."""
        self._validation = validation
        self._core = core
        self._launcher = launcher
        self._repl = repl
        self._bg = bg
        self._clock = clock
        self._params = params
        self._counters = counters
        self.validating = 0                                    # requests waiting for, or holding, the lock
        self._acquired = 0.0                                   # when the current validation began
        self._pending_start = None

    def waiting(self) -> int:
        """Requests queued for the validation lock."""
        return self.validating - int(self._core.lock.locked())

    async def _serial(self, req, fn) -> meghapb.PlacementResponse:
        """Validate one request at a time and time it (the LmTiming of the reply)."""
        recv = self._clock.now()
        self._core.require_active()
        check_task(req.task)
        self.validating += 1
        try:
            async with self._core.lock:
                acq = self._acquired = self._clock.now()
                self._core.require_active()
                await self._clock.charge("lm_validate")
                resp = fn()
                done = self._clock.now()
                start, self._pending_start = self._pending_start, None
        finally:
            self.validating -= 1
        if start is not None:
            await self._repl.before_start()          # before anyone hears of it
            self._bg.spawn(self._launcher.start_task(*start), f"start-{start[0].name}")
        resp.timing.comm_in_ms = max(0.0, recv - req.sent_unix_s) * 1000 if req.sent_unix_s else 0.0
        resp.timing.queue_ms = (acq - recv) * 1000
        resp.timing.processing_ms = (done - acq) * 1000
        return resp

    def _refuse(self, r: Refusal) -> meghapb.PlacementResponse:
        self._counters[f"inconsistency_{r.kind}"] += 1
        return meghapb.PlacementResponse(ok=False, detail=r.detail, inconsistency=INCONSISTENCY_PB[r.kind],
                                         state=self._core.full_state())

    def _duplicate(self, name: str) -> meghapb.PlacementResponse | None:
        t = self._core.cluster.tasks.get(name)
        if t is None:
            return None
        self._counters["duplicates"] += 1   # a GM resent a task it had placed (e.g. after its restart)
        return meghapb.PlacementResponse(ok=True, detail="already placed", state=self._core.reply_state(t.host),
                                         placement=self._core.placement(t))

    def _indices(self, gm: str, host: str = "") -> tuple[int, int]:
        c = self._core.cluster
        g = c.gm_index.get(gm)
        if g is None:
            raise errors.NotFound(f"gm={gm!r} has no partition on LM {self._core.lm}: partitions are for "
                                  f"{', '.join(c.gms)}")
        if not host:
            return g, -1
        h = c.index.get(host)
        if h is None:
            raise errors.NotFound(f"host={host!r} is not in LM {self._core.lm}'s cluster ({len(c.hosts)} hosts)")
        return g, h

    def _validate(self, kind: str, h: int, g: int, cpu: float, mem: float, cons: tuple[Constraint, ...]) -> None:
        """Whether GM g's request of *kind* (INTERNAL: a launch; EXTERNAL: a repartition) may take
        host h: the partition rule of its kind, then the fit (raises Refusal)."""
        c = self._core.cluster
        c.check_partition(kind, h, g)
        try:
            c.check_fit(kind, h, cpu, mem, cons, self._validation)
        except PolicyFailed as e:      # a plugin failed: refused as an inconsistency (the GM tries again), not an LM fault
            self._counters["policy_refused"] += 1
            raise Refusal(kind, str(e)) from None

    def _accept(self, req, h: int, g: int, logical: bool, victims=()) -> meghapb.PlacementResponse:
        cpu, mem = task_request(req.task)
        t = LmTask(req.task.name, req.task.user, cpu, mem, h, g, logical, req.gm, "starting", 0.0, req.task)
        self._core.cluster.allocate(t)
        self._repl.changed(t.name)
        resp = meghapb.PlacementResponse(ok=True, state=self._core.reply_state(h),
                                         placement=self._core.placement(t, [v.name for v in victims]))
        self._pending_start = (t, resp, list(victims), self._acquired)   # _serial starts it
        return resp

    async def launch(self, req: meghapb.LaunchRequest) -> meghapb.PlacementResponse:
        """A GM's placement in its own partition, validated on the true state."""
        return await self._placement(req, INTERNAL, ("launch_requests", "launches"), logical=False)

    async def repartition(self, req: meghapb.RepartitionRequest) -> meghapb.PlacementResponse:
        """A GM's placement in another GM's partition (a logical node), validated the same way."""
        return await self._placement(req, EXTERNAL, ("repartition_requests", "repartitions"), logical=True)

    async def _placement(self, req, scope, counters: tuple[str, str], logical: bool) -> meghapb.PlacementResponse:
        def fn():
            dup = self._duplicate(req.task.name)
            if dup is not None:
                return dup
            g, h = self._indices(req.gm, req.host)
            cpu, mem = task_request(req.task)
            self._counters[counters[0]] += 1
            try:
                self._validate(scope, h, g, cpu, mem, wire.constraints_from_pb(req.task.constraints))
            except Refusal as r:
                return self._refuse(r)
            self._counters[counters[1]] += 1
            return self._accept(req, h, g, logical=logical)
        return await self._serial(req, fn)

    async def preempt(self, req: meghapb.PreemptRequest) -> meghapb.PlacementResponse:
        def fn():
            dup = self._duplicate(req.task.name)
            if dup is not None:
                return dup
            g, _ = self._indices(req.gm)
            if not req.victim_user:
                raise errors.InvalidArgument("victim_user must be set")
            cpu, mem = task_request(req.task)
            self._counters["preemption_requests"] += 1
            c = self._core.cluster
            try:
                h, victims = c.find_preemption(g, req.victim_user, cpu, mem,
                                               wire.constraints_from_pb(req.task.constraints))
            except Refusal as r:
                return self._refuse(r)
            for v in victims:
                c.release(v.name)
                self._repl.released(v.name)
                self._launcher.cancel_finish(v.name)
            self._counters["preemptions"] += len(victims)
            self._counters["preemptions_granted"] += 1
            return self._accept(req, h, g, logical=c.owner[h] != g, victims=victims)
        return await self._serial(req, fn)

    async def place_direct(self, task: meghapb.MeghaTask, host: str) -> None:
        """Start a task on *host* outside the GMs, in the owner's partition (a warm model cell at
        t=0). Raises FailedPrecondition if it does not fit."""
        self._core.require_active()
        check_task(task)
        c = self._core.cluster
        h = c.index.get(host)
        if h is None:
            raise errors.NotFound(f"host={host!r} is not in LM {self._core.lm}'s cluster")
        cpu, mem = task_request(task)
        fc, fm = c.free(h)
        if fc + 1e-9 < cpu or fm + 1e-9 < mem:
            raise errors.FailedPrecondition(f"{host} has {fc:.3f} cores / {fm:.0f} MiB free, {task.name} needs "
                                            f"{cpu:.3f} / {mem:.0f}")
        t = LmTask(task.name, task.user, cpu, mem, h, int(c.owner[h]), False, "", "starting", 0.0, task)
        c.allocate(t)
        self._repl.changed(t.name)
        await self._launcher.start_task(t, meghapb.PlacementResponse(ok=True, placement=self._core.placement(t)), [],
                                        self._clock.now())
