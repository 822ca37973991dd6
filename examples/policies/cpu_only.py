"""The policy of docs/policies.md: a host is overloaded when its CPU alone passes a threshold
(MASB's rule also counts memory and production requests)."""
import dataclasses

from cellbed.policy import api


@dataclasses.dataclass(frozen=True)
class Params:
    threshold: float = api.param(0.8, lo=0.05, hi=1.0, doc="the CPU share of capacity that counts as overload")


@api.policy(stage="overload", name="cpu-only", version="0.1", params=Params)
def cpu_only(load: api.HostLoad, params: Params) -> api.Verdict:
    cap, used = load.capacity[0], load.used[0]
    limit = params.threshold * cap
    if used <= limit:
        return api.Verdict(False, (), (0.0, 0.0))
    return api.Verdict(True, (f"cpu used {used:.2f} > {params.threshold:g} x {cap:.2f} cores",), (used - limit, 0.0))
