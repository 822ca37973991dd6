"""A real run's policies as its agents loaded them: every node daemon and the broker (and Megha's
masters) answer ``cellbed.v1.Policies``; the runner asks each before the cell goes down and
merges their identities and stage timing (what manifest.json's ``policies`` and ``stages.csv``
hold)."""
from __future__ import annotations

import asyncio
import collections
import logging

from cellbed.cell import cell_pki
from cellbed.cell import megha as meghamod
from cellbed.domain.identity import Role
from cellbed.experiment.policies import agent_key
from cellbed.runtime.plugins.identity import Identity
from cellbed.runtime.plugins.service import identity_from_pb, stats_from_pb
from cellbed.runtime.plugins.stats import StageStats
from cellbed.v1 import policy_pb2 as ppb, policy_pb2_grpc as ppbg

log = logging.getLogger(__name__)
TIMEOUT_S = 10.0


def agent_targets(st: dict) -> dict[str, str]:
    """Every agent of the cell that serves gRPC: its name -> address:port."""
    out = {h: f"{d['address']}:{d['grpc_port']}" for h, d in st["hosts"].items()}
    if st.get("broker"):
        out["ba1"] = st["broker"]
    if st.get("megha"):
        out.update(meghamod.targets(st["megha"]))
    return out


async def collect(st: dict) -> tuple[list[Identity], StageStats, dict[str, list[str]], list[str]]:
    """(identities, merged timing, agents per identity key, agents that did not answer)."""
    security = cell_pki.security(st, Role.ADMIN, "admin")
    ids: list[Identity] = []
    stats = StageStats()
    agents: dict[str, list[str]] = collections.defaultdict(list)
    missing = []
    for name, target in agent_targets(st).items():
        ch = security.channel(target)
        try:
            r = await ppbg.PoliciesStub(ch).ListPolicies(ppb.ListPoliciesRequest(), timeout=TIMEOUT_S)
        except Exception as e:       # an agent down at the end of a run: its policies are unknown, say so
            log.warning("policies of %s (%s): %s", name, target, e)
            missing.append(name)
            continue
        finally:
            await ch.close()
        for p in r.policies:
            i = identity_from_pb(p)
            ids.append(i)
            agents[agent_key(i)].append(name)
        stats.merge(stats_from_pb(r.timings))
    return ids, stats, dict(agents), missing


def collect_now(st: dict):
    return asyncio.run(collect(st))
