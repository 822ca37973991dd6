"""The ``cellbed.v1.Policies`` service every agent server registers (read-only), and the
conversions between the book's identities and timing and their wire form."""
from __future__ import annotations

import json

from cellbed.runtime.plugins.book import PolicyBook
from cellbed.runtime.plugins.identity import Identity
from cellbed.runtime.plugins.stats import StageStats
from cellbed.runtime.rpc import handles_errors
from cellbed.v1 import policy_pb2 as ppb, policy_pb2_grpc as ppbg

SERVICE = ppb.DESCRIPTOR.services_by_name["Policies"].full_name


def identity_pb(i: Identity) -> ppb.LoadedPolicy:
    return ppb.LoadedPolicy(stage=i.stage, key=i.key, ref=i.ref, name=i.name, origin=i.origin, target=i.target,
                            dist=i.dist, dist_version=i.dist_version, version=i.version, api_version=i.api_version,
                            sha256=i.sha256, params_json=json.dumps(i.params, sort_keys=True, default=str))


def identity_from_pb(p: ppb.LoadedPolicy) -> Identity:
    try:
        params = json.loads(p.params_json or "{}")
    except json.JSONDecodeError:
        params = {"unreadable": p.params_json[:200]}
    return Identity(p.stage, p.key, p.ref, p.name, p.origin, p.target, p.dist, p.dist_version, p.version,
                    p.api_version, p.sha256, params if isinstance(params, dict) else {})


def stats_pb(stats: StageStats) -> list[ppb.StageTiming]:
    out = []
    for (stage, policy), a in sorted(stats.accs.items()):
        out.append(ppb.StageTiming(stage=stage, policy=policy, calls=a.calls, errors=a.errors, examined=a.examined,
                                   total_ns=a.ns, max_ns=a.max_ns,
                                   buckets={i: n for i, n in enumerate(a.hist) if n}))
    return out


def stats_from_pb(timings) -> StageStats:
    out = StageStats()
    for t in timings:
        a = out.acc(t.stage, t.policy)
        a.calls += t.calls
        a.errors += t.errors
        a.examined += t.examined
        a.ns += t.total_ns
        a.max_ns = max(a.max_ns, t.max_ns)
        for i, n in t.buckets.items():
            if 0 <= i < len(a.hist):
                a.hist[i] += n
    return out


def list_policies(agent: str, book: PolicyBook) -> ppb.ListPoliciesResponse:
    return ppb.ListPoliciesResponse(agent=agent, mode=book.env.mode, budget_ms=book.env.budget_ms,
                                    policies=[identity_pb(i) for i in book.identities()],
                                    timings=stats_pb(book.env.stats))


class PoliciesServicer(ppbg.PoliciesServicer):
    """Thin: the agent's book, as it is."""

    def __init__(self, agent: str, book: PolicyBook) -> None:
        self.agent = agent
        self.book = book

    @handles_errors
    async def ListPolicies(self, request, context):
        return list_policies(self.agent, self.book)


def service_entry(agent: str, book: PolicyBook) -> tuple:
    """The (add_to_server, servicer, full name) triple for ``rpc.create_server``."""
    return (ppbg.add_PoliciesServicer_to_server, PoliciesServicer(agent, book), SERVICE)
