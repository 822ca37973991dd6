"""Interrupting a plugin that does not answer within its time budget.

A policy runs in its agent's thread; Python cannot stop a thread from outside. For a call on
the main thread (every agent process, and a model cell, run their event loop there), a watchdog
thread sends the process a signal once the budget has passed, and the handler raises
:class:`PolicyTimeout` inside the plugin's frame, between two bytecodes. That stops a Python
loop, and a C call that the signal interrupts (``time.sleep``, I/O waits); a long C computation
that does not look at signals ends first, and is then refused as over budget.

On another thread the call is only measured: an answer over budget is refused once it comes.

The hot path (:meth:`Watchdog.enter`, :meth:`Watchdog.leave`) sets two integers; the watchdog
thread wakes every ``poll_s`` only while a call is running under it, and stops when none is.
"""
from __future__ import annotations

import signal
import threading
import time

SIGNAL = signal.SIGUSR2


class PolicyTimeout(BaseException):
    """Raised inside a plugin that ran over its budget. A BaseException, so that a plugin's own
    ``except Exception`` does not swallow it."""


class Watchdog:
    def __init__(self, poll_s: float = 0.02) -> None:
        self.poll_s = poll_s
        self.token = 0                  # the current call's number
        self.deadline = 0               # monotonic ns; 0 = no call under watch
        self.fired = 0                  # the token the last signal was sent for
        self._main = threading.main_thread().ident
        self._armed = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def usable(self) -> bool:
        return threading.get_ident() == self._main

    def enter(self, budget_ns: int) -> int:
        if not self._armed:
            self._arm()
        self.token += 1
        self.deadline = time.monotonic_ns() + budget_ns
        self._wake.set()
        return self.token

    def leave(self) -> None:
        self.deadline = 0

    def _arm(self) -> None:
        with self._lock:
            if self._armed:
                return
            signal.signal(SIGNAL, self._on_signal)
            self._thread = threading.Thread(target=self._run, name="cellbed-policy-watchdog", daemon=True)
            self._thread.start()
            self._armed = True

    def _on_signal(self, _signum, _frame) -> None:
        if self.deadline and self.fired == self.token:
            raise PolicyTimeout()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            d, tok = self.deadline, self.token
            if not d:
                self._wake.clear()
                if self.deadline:              # a call began between the read and the clear
                    self._wake.set()
                continue
            if time.monotonic_ns() > d and self.fired != tok and self.deadline == d:
                self.fired = tok
                signal.pthread_kill(self._main, SIGNAL)
            time.sleep(self.poll_s)


WATCHDOG = Watchdog()
