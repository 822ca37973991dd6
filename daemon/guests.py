"""A node agent's line to its guests: one control channel per VM (a virtio-serial socket on a
real host, a simulated guest on the model backend), opened on first use, and the wait for a
guest to answer."""
from __future__ import annotations

from cellbed.daemon.guest_channel import GuestChannel, GuestChannelError, GuestStatus
from cellbed.domain import errors
from cellbed.domain.vm import Hypervisor
from cellbed.runtime.clock import Clock


class Guests:
    def __init__(self, hv: Hypervisor, clock: Clock) -> None:
        self._hv = hv
        self._clock = clock
        self.channels: dict[str, GuestChannel] = {}

    def channel(self, name: str) -> GuestChannel:
        ch = self.channels.get(name)
        if ch is None:
            make = getattr(self._hv, "guest_channel", None)   # the model backend simulates its guests
            ch = self.channels[name] = (make(name) if make is not None
                                        else GuestChannel(self._hv.channel_path(name), timeout_s=5.0))
        return ch

    async def drop(self, name: str) -> None:
        ch = self.channels.pop(name, None)
        if ch is not None:
            await ch.close()

    async def close_all(self) -> None:
        for ch in self.channels.values():
            await ch.close()

    async def wait(self, name: str, timeout_s: float, after_heartbeat: int = -1) -> GuestStatus:
        """Poll the guest until it answers (with heartbeat > after_heartbeat) or time runs out."""
        deadline = self._clock.monotonic() + timeout_s
        last_err = "no answer"
        while True:
            try:
                st = await self.channel(name).status(timeout_s=2.0)
                if st.heartbeat > after_heartbeat:
                    return st
                last_err = f"heartbeat {st.heartbeat} not above {after_heartbeat}"
            except (GuestChannelError, OSError) as e:
                last_err = str(e) or type(e).__name__
            if self._clock.monotonic() >= deadline:
                raise errors.DeadlineExceeded(f"guest {name} did not answer within {timeout_s:.0f} s: {last_err}")
            await self._clock.sleep(0.2)
