"""The node agent's half of MASB: SanAgent (agent.py), a facade over its parts (the host reader,
the report, the negotiation ledger, the initiator's rounds and steps, the target's responder),
its SanConfig (config.py), its policies (policies.py) and the San service (servicer.py); step 1
is in host.py and rounds.py, steps 2–5 in steps.py, the target's side in target.py."""
from cellbed.daemon.san.agent import SanAgent
from cellbed.daemon.san.config import REASON_NAME, REASON_PB, Negotiation, SanConfig
from cellbed.daemon.san.policies import SanPolicies, san_policies
from cellbed.daemon.san.servicer import SanServicer

__all__ = ["REASON_NAME", "REASON_PB", "Negotiation", "SanAgent", "SanConfig", "SanPolicies", "SanServicer",
           "san_policies"]
