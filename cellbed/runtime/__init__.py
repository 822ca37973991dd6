"""The small interfaces protocol logic is written against (DESIGN §2).

* clock: ``now()``, ``monotonic()``, ``sleep()``, ``call_later()`` — RealClock on a real
  cell, VirtualClock (a virtual-time asyncio loop) on a model cell;
* transport: ``request()`` (request/reply) and ``publish()``/``subscribe()`` — gRPC + MQTT
  on a real cell, in-process message passing on a model cell;
* rng: a seeded ``random.Random`` per agent, derived from the run seed and the agent name.

Agents (NA, BA, GM, LM) never call ``time``, ``asyncio.sleep`` or the global ``random``.
"""
from cellbed.runtime.clock import Clock, RealClock, VirtualClock, VirtualTimeLoop, run_virtual
from cellbed.runtime.rng import agent_rng
from cellbed.runtime.transport import Handler, InProcNetwork, Transport

__all__ = ["Clock", "RealClock", "VirtualClock", "VirtualTimeLoop", "run_virtual", "agent_rng",
           "Handler", "InProcNetwork", "Transport"]
