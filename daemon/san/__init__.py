"""The node agent's half of MASB: SanAgent (agent.py), its SanConfig (config.py) and the San
service (servicer.py); steps 1–5 of the negotiation are in rounds.py and steps.py."""
from cellbed.daemon.san.agent import SanAgent
from cellbed.daemon.san.config import REASON_NAME, REASON_PB, Negotiation, SanConfig
from cellbed.daemon.san.servicer import SanServicer

__all__ = ["REASON_NAME", "REASON_PB", "Negotiation", "SanAgent", "SanConfig", "SanServicer"]
