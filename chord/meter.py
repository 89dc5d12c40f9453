"""CPU time by what a live node was doing: the measured half of its cost model.

A live node charges the CPU time of each stretch of work to a named account: a request it
handled (by method), each step of an operation (by the generator that runs it), a call's
sending, a commit to storage. An account entered while another runs pauses that one, so no
time counts twice. Only what runs between the event loop's hand-overs is charged (and what
another thread adds, such as the analyzer's worker); the rest of the process's CPU time,
gRPC's C core, TLS, protobuf parsing of what arrives and the event loop itself, is what
`unmetered` gives. Reading the thread's CPU clock costs about half a microsecond, a few
per message: well under 1% of what a document costs.
"""

from __future__ import annotations

import time
from collections import defaultdict
from functools import partial
from typing import Any, Callable, TypeVar

UNMETERED = "unmetered"  # the process's CPU time no account holds
T = TypeVar("T")


class Meter:
    __slots__ = ("seconds", "counts", "_on", "_since")

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.counts: defaultdict[str, int] = defaultdict(int)
        self._on: str | None = None  # the account being charged now (this thread's)
        self._since = 0.0

    def enter(self, account: str) -> str | None:
        """Charge from now to `account`; returns what to hand `leave` (the account paused)."""
        now = time.thread_time()
        on = self._on
        if on is not None:
            self.seconds[on] += now - self._since
        self._on, self._since = account, now
        return on

    def leave(self, paused: str | None) -> None:
        now = time.thread_time()
        on = self._on
        if on is not None:
            self.seconds[on] += now - self._since
            self.counts[on] += 1
        self._on, self._since = paused, now

    def add(self, account: str, seconds: float) -> None:
        """Time measured elsewhere (another thread): the event loop's account goes on."""
        self.seconds[account] += seconds
        self.counts[account] += 1

    def snapshot(self) -> dict[str, float]:
        """CPU seconds by account since the process began, `unmetered` among them."""
        out = dict(self.seconds)
        out[UNMETERED] = max(0.0, time.process_time() - sum(out.values()))
        return out


def charged(meter: Meter | None, account: str, fn: Callable[..., T], *args: Any) -> T:
    """fn(*args), its CPU time charged to `account` (only fn(*args) without a meter)."""
    if meter is None:
        return fn(*args)
    paused = meter.enter(account)
    try:
        return fn(*args)
    finally:
        meter.leave(paused)


def metered(meter: Meter | None, account: str, fn):
    """fn, its calls charged to `account` (fn itself without a meter): for a callable handed
    to gRPC, a (de)serializer."""
    if meter is None or fn is None:
        return fn
    return partial(charged, meter, account, fn)
