"""The target's side of a SAN: the answer to TaskMigrationRequest (step 3) and the final check and
reservation of TaskMigrationProcessRequest (step 5), both by the SAN's accept rule (the policies'
``accept``; by default cellbed.policy.masb.accept) over this host's state."""
from __future__ import annotations

import collections
import functools
import math
from typing import Awaitable, Callable

from cellbed.daemon.host_view import HostView
from cellbed.daemon.san.config import REASON_PB
from cellbed.daemon.san.policies import SanPolicies
from cellbed.daemon.san.reader import HostReader
from cellbed.domain import wire
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.wire import spec_from_pb
from cellbed.policy.masb import accept
from cellbed.runtime.clock import Clock
from cellbed.v1 import masb_pb2 as masbpb

ReserveFn = Callable[..., Awaitable[None]]
"""The NodeAgent's admission of an incoming migration:
``reserve(spec, src, migration_id, force, cpu_used, mem_used, check=)``."""


class Refused(Exception):
    def __init__(self, answer: accept.Answer) -> None:
        super().__init__(answer.detail)
        self.answer = answer


class Responder:
    """This host as a SAN's target: it answers TaskMigrationRequest (step 3) and
    TaskMigrationProcessRequest (step 5) by the *policies*' accept rule over the *reader*'s state,
    and reserves with the NodeAgent's *reserve*."""

    def __init__(self, view: HostView, reader: HostReader, policies: SanPolicies, reserve: ReserveFn,
                 counters: collections.Counter, clock: Clock) -> None:
        self.view = view
        self.reader = reader
        self.host = reader.host
        self.policies = policies
        self.node_reserve = reserve
        self.counters = counters
        self.clock = clock

    def _demand(self, t: masbpb.TaskInfo) -> accept.TaskDemand:
        if not t.name:
            raise InvalidArgument("task.name must be set")
        vals = (t.used.cpu_cores, t.used.mem_mib, t.requested.cpu_cores, t.requested.mem_mib)
        if not all(math.isfinite(v) and v >= 0 for v in vals):
            raise InvalidArgument(f"task {t.name}: used ({vals[0]}, {vals[1]}) and requested ({vals[2]}, {vals[3]}) "
                                  f"are out of range: allowed ≥ 0 cores and ≥ 0 MiB")
        if not (math.isfinite(t.cpu_mean) and t.cpu_mean >= 0 and math.isfinite(t.cpu_var) and t.cpu_var >= 0):
            raise InvalidArgument(f"task {t.name}: cpu_mean={t.cpu_mean}, cpu_var={t.cpu_var} are out of range: "
                                  "allowed ≥ 0")
        return accept.TaskDemand(t.name, (t.used.cpu_cores, t.used.mem_mib),
                                 (t.requested.cpu_cores, t.requested.mem_mib), t.production,
                                 wire.constraints_from_pb(t.constraints), t.cpu_mean, t.cpu_var, t.cpu_samples)

    def answer(self, req: masbpb.TaskMigrationRequest) -> masbpb.TaskMigrationResponse:
        if not req.san_id or not req.src_host:
            raise InvalidArgument("san_id and src_host must be set")
        d = self._demand(req.task)
        self.counters["requests_received"] += 1
        if d.name in self.view.vms or req.src_host == self.host:
            a = accept.Answer(False, accept.SAME_HOST, f"{self.host}: task {d.name} is already here")
        elif not req.force_migration and self.policies.overload(self.reader.load()):
            a = accept.Answer(False, accept.OVERLOADED, f"{self.host}: overloaded itself: "
                              + "; ".join(self.policies.overload(self.reader.load()).reasons))
        else:
            a = self.policies.accept(self.reader.target_state(), d, req.force_migration)
        if a.accepted:
            self.counters["accepted"] += 1
            st = self.reader.target_state()
            used = (st.used[0] + st.incoming_used[0], st.used[1] + st.incoming_used[1])
            return masbpb.TaskMigrationResponse(acceptance=masbpb.TaskMigrationAcceptanceResponse(
                host=self.host, capacity=wire.resources(*st.capacity), used=wire.resources(*used),
                sampled_unix_s=self.clock.now()))
        self.counters[f"rejected_{a.reason}"] += 1
        return masbpb.TaskMigrationResponse(rejection=self._rejection(a))

    def _rejection(self, a: accept.Answer) -> masbpb.TaskMigrationRejectionResponse:
        return masbpb.TaskMigrationRejectionResponse(host=self.host, reason=REASON_PB[a.reason], detail=a.detail,
                                                  projected=wire.resources(*a.projected),
                                                  limit=wire.resources(*a.limit))

    async def process(self, req: masbpb.TaskMigrationProcessRequest) -> masbpb.TaskMigrationProcessResponse:
        if not req.migration_id or not req.src_host:
            raise InvalidArgument("migration_id and src_host must be set")
        d = self._demand(req.task)
        spec = spec_from_pb(req.spec)
        if spec.name != d.name:
            raise InvalidArgument(f"spec.name={spec.name!r} must equal task.name={d.name!r}")
        try:   # reserve (the node checks constraints and total capacity again)
            await self.node_reserve(spec, req.src_host, req.migration_id, True, d.used[0], d.used[1],
                                    check=functools.partial(self.final_check, d, req.force_migration))
        except Refused as r:
            self.counters["process_refused"] += 1
            return masbpb.TaskMigrationProcessResponse(accepted=False, rejection=self._rejection(r.answer))
        self.counters["process_accepted"] += 1
        return masbpb.TaskMigrationProcessResponse(accepted=True)

    def final_check(self, d: accept.TaskDemand, forced: bool, view: HostView) -> None:
        """Step 5 on the target: the accept rule once more, on the host as it is now. The node runs
        it under its admission lock (the first request wins); a refusal raises Refused."""
        if d.name in view.vms:
            ans = accept.Answer(False, accept.SAME_HOST, f"{self.host}: task {d.name} is already here")
        else:
            ans = self.policies.accept(self.reader.target_state(), d, forced)
        if not ans.accepted:
            raise Refused(ans)
