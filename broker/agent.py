"""The Broker Agent (DESIGN §7): a node cache fed by NA reports, BA↔BA sync, candidates for
SAN step 2, and initial allocation. Transport, clock and RNG are injected, so the same
agent runs in cellbed-broker (gRPC + MQTT, wall clock) and in a model cell (in-process,
virtual time)."""
from __future__ import annotations

import asyncio
import collections
import logging

import numpy as np

from cellbed.domain import errors, wire
from cellbed.domain import wire_checks as check
from cellbed.domain.topics import report_topic
from cellbed.runtime.clock import Clock
from cellbed.runtime.decisions import DecisionLog
from cellbed.runtime.rpc import handles_errors
from cellbed.runtime.transport import Transport
from cellbed.v1 import masb_pb2 as masbpb, masb_pb2_grpc as masbpbg, node_pb2 as npb
from cellbed.broker.cache import NodeCache
from cellbed.broker.policies import BrokerPolicies
from cellbed.policy.masb.broker_select import BrokerParams, candidates, initial, random_head, rus_ok

log = logging.getLogger(__name__)
ALLOCATE_TRIES = 3
"""AllocateTask launches on the best node, then on the next ones if they refuse, up to this many."""


def task_vectors(t: masbpb.TaskInfo) -> tuple[np.ndarray, np.ndarray]:
    used = np.array([t.used.cpu_cores, t.used.mem_mib], dtype=float)
    req = np.array([t.requested.cpu_cores, t.requested.mem_mib], dtype=float)
    for name, v in (("task.used", used), ("task.requested", req)):
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise errors.InvalidArgument(f"{name}=({v[0]}, {v[1]}) is out of range: allowed ≥ 0 cores and ≥ 0 MiB")
    return used, req


class BrokerAgent:
    """Built by :func:`cellbed.assembly.build_broker`. *rng* is the broker's own numpy stream
    (shuffles and score-weighted sampling); *policies* are its stages."""

    def __init__(self, name: str, transport: Transport, clock: Clock, rng: np.random.Generator,
                 policies: BrokerPolicies, params: BrokerParams = BrokerParams(), peers: list[str] | None = None,
                 cell: str = "cell", sync_period_s: float = 30.0, decisions: DecisionLog | None = None) -> None:
        self.name = name
        self.policies = policies
        self.transport = transport
        self.clock = clock
        self.params = params
        self.peers = [p for p in (peers or []) if p != name]
        self.cell = cell
        self.sync_period_s = sync_period_s
        self.cache = NodeCache(params.node_expiry_s)
        self.rng = rng
        self.counters: collections.Counter = collections.Counter()
        self.decisions = decisions or DecisionLog(clock=clock, who=name)
        self._tasks: list[asyncio.Task] = []

    async def start(self, subscribe: bool = True) -> None:
        if subscribe:
            self.transport.subscribe(report_topic(self.cell), self.on_report, masbpb.NodeReport)
        self._tasks.append(asyncio.create_task(self._housekeeping(), name=f"{self.name}-housekeeping"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.decisions.close()

    # --- cache --------------------------------------------------------------------------
    def on_report(self, topic: str, r: masbpb.NodeReport) -> None:
        """A node's report (the MQTT handler; ReportNodeState checks first): one that fails the
        checks is dropped, and counted under ``reports_dropped_<reason>``."""
        self.counters["reports"] += 1
        if not self._valid(r, "reports"):
            return
        if self.cache.update(r):
            self.counters["reports_stored"] += 1

    def check_report(self, r: masbpb.NodeReport, field: str = "report") -> None:
        """InvalidArgument unless *r* may enter the cache (wire_checks.node_report at this broker's
        clock and max_clock_skew_s)."""
        check.node_report(field, r, self.clock.now(), self.params.max_clock_skew_s)

    def _valid(self, r: masbpb.NodeReport, what: str) -> bool:
        try:
            self.check_report(r)
        except errors.InvalidArgument as e:
            self.counters[f"{what}_dropped_{e.reason}"] += 1
            log.info("%s: dropped a node report: %s", self.name, e)
            return False
        return True

    async def _housekeeping(self) -> None:
        while True:
            await self.clock.sleep(self.sync_period_s)
            gone = self.cache.expire(self.clock.now())
            if gone:
                self.counters["expired"] += len(gone)
                log.info("%s: %d node(s) expired: %s", self.name, len(gone), ", ".join(gone[:10]))
            if self.peers:
                peer = self.peers[int(self.rng.integers(len(self.peers)))]
                try:
                    await self.sync_with(peer)
                except errors.CellbedError as e:
                    self.counters["sync_failed"] += 1
                    log.debug("%s: sync with %s failed: %s", self.name, peer, e)

    async def sync_with(self, peer: str) -> int:
        """Pairwise sync: send ours, store what the peer has newer. Returns entries taken."""
        reply = await self.transport.request(peer, "BrokerAgent/SyncCache", masbpb.SyncCacheRequest(
            broker=self.name, entries=self.cache.entries(), digest=self.cache.digest), timeout=10.0)
        taken = sum(self.cache.update(r) for r in reply.entries if self._valid(r, "sync_entries"))
        self.counters["syncs"] += 1
        if reply.in_sync:
            self.counters["syncs_in_sync"] += 1
        self.counters["sync_entries_taken"] += taken
        return taken

    # --- SAN step 2 ----------------------------------------------------------------------
    def get_candidates(self, req: masbpb.GetCandidateNodesRequest) -> masbpb.GetCandidateNodesResponse:
        if not req.task.name:
            raise errors.InvalidArgument("task.name must be set")
        used, _ = task_vectors(req.task)
        cons = wire.constraints_from_pb(req.task.constraints)
        now = self.clock.now()
        pool = self.cache.fresh(now)
        src = self.cache.index.get(req.src_host)
        if src is not None:
            pool = pool[pool != src]
        pool = self.rng.permutation(pool)
        extra = None
        if req.task.production:
            _, reqv = task_vectors(req.task)
            extra = lambda idx: rus_ok(self.cache.prod[idx], self.cache.cap[idx], reqv, self.params.max_util)  # noqa: E731
        pool, examined = self.cache.first_matching(pool, cons, self.params.realloc_scan_limit, extra)
        match = np.ones(len(pool), dtype=bool)
        pol = self.policies
        res = candidates(pool, match, self.cache.cap, self.cache.used, used, self.rng, self.params,
                         score=pol.realloc_score, pick=pol.candidates, force=pol.forced)
        if not res.picks and extra is not None:
            # a production task that no node can take within the RUS rule: forced candidates
            # whose production requests still fit total capacity (the target may then offload)
            forced_pool, more = self.cache.first_matching(
                self.rng.permutation(self.cache.fresh(now)), cons, self.params.realloc_scan_limit,
                lambda idx: rus_ok(self.cache.prod[idx], self.cache.cap[idx], reqv, 1.0)
                & (idx != (-1 if src is None else src)))      # not the source (one index per host)
            res = candidates(forced_pool, np.ones(len(forced_pool), dtype=bool), self.cache.cap, self.cache.used,
                             used, self.rng, self.params, forced_only=True, force=pol.forced)
            examined += more
        self.counters["candidate_requests"] += 1
        self.counters["candidates_returned"] += len(res.picks)
        self.counters["forced_returned"] += sum(p.forced for p in res.picks)
        if not res.picks:
            self.counters["candidate_requests_empty"] += 1
        out = masbpb.GetCandidateNodesResponse(scanned=examined, matched=len(pool), broker=self.name)
        for p in res.picks:
            r = self.cache.reports[p.index]
            avail = self.cache.cap[p.index] - self.cache.used[p.index]
            out.recommendations.add(host=self.cache.hosts[p.index], fitness=p.score,
                                    timestamp_unix_s=float(self.cache.ts[p.index]),
                                    available=wire.resources(float(avail[0]), float(avail[1])),
                                    force_migration=p.forced)
            del r
        self.decisions.maybe("scoring", lambda: {
            "san_id": req.san_id, "task": req.task.name, "task_used": used, "scanned": res.scanned,
            "scores": res.scores[:200], "picked": [(self.cache.hosts[p.index], p.score, p.forced) for p in res.picks]})
        return out

    # --- initial allocation ---------------------------------------------------------------
    async def allocate(self, req: masbpb.AllocateTaskRequest) -> masbpb.AllocateTaskResponse:
        if not req.task.name:
            raise errors.InvalidArgument("task.name must be set")
        if req.launch and req.spec.name != req.task.name:
            raise errors.InvalidArgument(f"spec.name={req.spec.name!r} must equal task.name={req.task.name!r}")
        used, reqv = task_vectors(req.task)
        cons = wire.constraints_from_pb(req.task.constraints)
        fresh, pool, examined = self._initial_pool(cons, reqv if req.task.production else None)
        ranked, scanned, _ = initial(pool, np.ones(len(pool), dtype=bool), self.cache.cap, self.cache.req,
                                     self.cache.used, reqv, self.params, limit=ALLOCATE_TRIES,
                                     score=self.policies.initial_score)
        self.counters["allocations"] += 1
        if not ranked:
            self.counters["allocations_no_room"] += 1
            band = "production" if req.task.production else "other"
            self.counters[f"allocations_no_room_{band}_{self._no_room_why(fresh, pool, cons)}"] += 1
            raise errors.FailedPrecondition(
                f"{self.name}: no node for task {req.task.name} ({reqv[0]:.3f} cores, {reqv[1]:.0f} MiB, "
                f"{len(cons)} constraint(s)): {len(pool)} matching of {examined} examined ({len(fresh)} fresh), "
                f"none has room")
        # the launches below wait on nodes; a warm start has ~10 tasks per node in flight at
        # once, so do not keep the per-call arrays alive (at 12,500 nodes the shuffled pool
        # alone is 100 KiB per allocation: 9.4 GiB peak RSS before this)
        del fresh, pool
        refused = 0
        load = tuple(used if used.any() else reqv)
        for pick in ranked:
            host = self.cache.hosts[pick.index]
            # count the task on its node before launching: allocations running at the same time
            # (a warm start places thousands at once) then see it, instead of all picking the
            # same best node and being refused by it
            added_at = self.cache.add_load(host, load, tuple(reqv), req.task.production)
            if req.launch:
                try:
                    await self.transport.request(host, "NodeAgent/StartVm", npb.StartVmRequest(spec=req.spec),
                                                 timeout=150.0)
                except BaseException as e:
                    self.cache.undo_load(host, load, tuple(reqv), req.task.production, added_at)
                    if not isinstance(e, (errors.FailedPrecondition, errors.Unavailable)):
                        raise
                    refused += 1
                    self.counters["allocation_refusals"] += 1
                    log.debug("%s: %s refused %s: %s", self.name, host, req.task.name, e)
                    continue
            return masbpb.AllocateTaskResponse(host=host, score=pick.score, scanned=scanned, refused=refused,
                                            broker=self.name)
        self.counters["allocations_failed"] += 1
        raise errors.FailedPrecondition(f"{self.name}: task {req.task.name}: the {refused} best node(s) refused it")


    def _no_room_why(self, fresh: np.ndarray, pool: np.ndarray, cons) -> str:
        """Why an initial allocation found no node: no fresh node at all, none meets the
        constraints, none passes the RUS rule (production), or the matching ones are full."""
        if len(fresh) == 0:
            return "no_fresh"
        if len(pool):
            return "full"
        if cons and not self.cache.match(fresh, cons).any():
            return "constraints"
        return "rus"

    def _initial_pool(self, cons, prod_req: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, int]:
        """(fresh nodes, the first initial_scan_limit of them that match in a random order, how many
        were examined); *prod_req*: a production task's request (the RUS rule is a match test
        then). ``pool_sampling = draw``: the head of the order is drawn, and the rest permuted only
        when the head holds too few matches."""
        cache, mu = self.cache, self.params.max_util

        def rus_mask() -> np.ndarray | None:
            """The RUS rule over the whole cache, once per call, then looked up per chunk: a
            production task often passes RUS on few nodes, so a scan covers most of the cache."""
            return rus_ok(cache.prod, cache.cap, prod_req, mu) if prod_req is not None else None

        def lookup(mask: np.ndarray | None):
            return None if mask is None else mask.__getitem__

        fresh = cache.fresh(self.clock.now())
        limit = self.params.initial_scan_limit
        head = 2 * limit
        if self.params.pool_sampling != "draw" or len(fresh) <= head:
            pool, examined = cache.first_matching(self.rng.permutation(fresh), cons, limit, lookup(rus_mask()))
            return fresh, pool, examined
        first = random_head(len(fresh), head, self.rng)
        on_head = None if prod_req is None else (lambda idx: rus_ok(cache.prod[idx], cache.cap[idx], prod_req, mu))
        pool, examined = cache.first_matching(fresh[first], cons, limit, on_head)   # the same mask, elementwise
        if len(pool) < limit:
            mask = rus_mask()
            if mask is not None:
                on_fresh = mask[fresh]
                if np.count_nonzero(on_fresh) == np.count_nonzero(on_fresh[first]):
                    # no node of the rest takes this production task under the RUS rule: in any
                    # order, the scan would examine all of it and add none, so skip drawing that
                    # order (most no-room allocations; the pool and the count are the same)
                    self.counters["initial_scans_skipped"] += 1
                    return fresh, pool, examined + len(fresh) - len(first)
            rest = np.delete(fresh, first)
            more, seen = cache.first_matching(self.rng.permutation(rest), cons, limit - len(pool), lookup(mask))
            pool, examined = np.concatenate([pool, more]), examined + seen
        return fresh, pool, examined


class BrokerServicer(masbpbg.BrokerAgentServicer):
    """Thin: translate, delegate."""

    def __init__(self, agent: BrokerAgent) -> None:
        self.agent = agent

    @handles_errors
    async def ReportNodeState(self, request, context):
        self.agent.check_report(request.report)
        self.agent.on_report("grpc", request.report)
        return masbpb.ReportNodeStateResponse(cache_size=len(self.agent.cache))

    @handles_errors
    async def GetCandidateNodes(self, request, context):
        check.get_candidate_nodes(request)
        return self.agent.get_candidates(request)

    @handles_errors
    async def AllocateTask(self, request, context):
        check.allocate_task(request)
        return await self.agent.allocate(request)

    @handles_errors
    async def SyncCache(self, request, context):
        a = self.agent
        if a.cache.in_sync(request.digest, len(request.entries)):
            # the same (host, time) set: every entry is one this broker checked and holds, none
            # is newer on either side (what the comparison below would find, at a fraction)
            check.sync_cache_header(request)
            a.counters["sync_served"] += 1
            a.counters["sync_served_in_sync"] += 1
            return masbpb.SyncCacheResponse(accepted=0, in_sync=True)
        check.sync_cache(request, a.clock.now(), a.params.max_clock_skew_s, checked=a.cache.holds)
        theirs = {r.host: r.sampled_unix_s for r in request.entries}
        accepted = sum(a.cache.update(r) for r in request.entries)
        newer = [r for r in a.cache.entries() if r.sampled_unix_s > theirs.get(r.host, -1.0)]
        a.counters["sync_served"] += 1
        return masbpb.SyncCacheResponse(entries=newer, accepted=accepted)

    @handles_errors
    async def ListCache(self, request, context):
        a = self.agent
        now = a.clock.now()
        a.cache.expire(now)
        return masbpb.ListCacheResponse(
            broker=a.name, node_expiry_s=a.params.node_expiry_s, counters=dict(a.counters),
            entries=[masbpb.CacheEntry(report=r, age_s=now - r.sampled_unix_s)
                     for r in sorted(a.cache.entries(), key=lambda r: r.host)])
