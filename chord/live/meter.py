"""CPU time by what a live node was doing: the measured half of its cost model.

A live node charges the CPU time of each stretch of work to a named account: a request it
handled (by method), each step of an operation (by the generator that runs it), a call's
sending, a commit to storage. An account entered while another runs pauses that one, so no
time counts twice. Only what runs between the event loop's hand-overs is charged (and what
another thread adds, such as the analyzer's worker); the rest of the process's CPU time,
gRPC's C core, TLS, protobuf parsing of what arrives and the event loop itself, is what
`unmetered` gives. Reading the thread's CPU clock costs about half a microsecond, a few
per message: well under 1% of what a document costs.

Where the kernel tells each thread's CPU time (Linux, /proc), the unmetered rest is split by
thread: gRPC's own threads (its event engine's sockets and TLS, its timers:
UNMETERED_GRPC), Python's worker threads beyond what they charged (UNMETERED_WORKERS), and
what is left on the event loop's thread (UNMETERED: asyncio, gRPC's calls as they reach
Python, the code between an operation's steps; and threads that ended, which the kernel no
longer lists).
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

UNMETERED = "unmetered"  # the process's CPU time no account holds (on the loop's thread)
UNMETERED_GRPC = "unmetered grpc threads"  # gRPC's own threads: sockets, TLS, timers
UNMETERED_WORKERS = "unmetered worker threads"  # Python's other threads, beyond their accounts
TASKS = Path("/proc/self/task")
T = TypeVar("T")


class Meter:
    __slots__ = ("seconds", "counts", "elsewhere", "_on", "_since")

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.counts: defaultdict[str, int] = defaultdict(int)
        self.elsewhere: set[str] = set()  # accounts charged by other threads (`add`)
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
        self.elsewhere.add(account)

    def snapshot(self) -> dict[str, float]:
        """CPU seconds by account since the process began, the unmetered rest among them
        (split by thread where the kernel tells: see above); they add up to the process's."""
        out = dict(self.seconds)
        rest = max(0.0, time.process_time() - sum(out.values()))
        threads = thread_cpu()
        if threads:
            grpc_threads = sum(cpu for (python, _), cpu in threads.items() if not python)
            python_threads = sum(
                cpu for (python, name), cpu in threads.items() if python and name != "main"
            )
            workers = max(0.0, python_threads - sum(out[a] for a in self.elsewhere))
            out[UNMETERED_GRPC] = min(grpc_threads, rest)
            out[UNMETERED_WORKERS] = min(workers, rest - out[UNMETERED_GRPC])
            rest -= out[UNMETERED_GRPC] + out[UNMETERED_WORKERS]
        out[UNMETERED] = rest
        return out


def thread_cpu() -> dict[tuple[bool, str], float]:
    """This process's CPU seconds so far by thread: (whether Python started it, its name:
    "main" for the event loop's, a Python thread's own, else the kernel's), from /proc
    ({} where there is none). The kernel counts in ticks (10 ms): good over seconds."""
    if not TASKS.is_dir():
        return {}
    python = {t.native_id: t.name for t in threading.enumerate()}
    python[threading.main_thread().native_id] = "main"
    out: dict[tuple[bool, str], float] = defaultdict(float)
    for task in TASKS.iterdir():
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:  # it ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the name, which may hold spaces
        seconds = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        tid = int(task.name)
        out[(tid in python, python.get(tid, comm))] += seconds
    return dict(out)


TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def charged(meter: Meter | None, account: str, fn: Callable[..., T], *args: Any) -> T:
    """fn(*args), its CPU time charged to `account` (only fn(*args) without a meter)."""
    if meter is None:
        return fn(*args)
    paused = meter.enter(account)
    try:
        return fn(*args)
    finally:
        meter.leave(paused)


def stepped(meter: Meter | None, account: str, awaitable: Awaitable[T]) -> Awaitable[T]:
    """`awaitable`, each of its steps (from one suspension to the next) charged to
    `account`: the work a coroutine does between its awaits, not the time it waits, while
    the event loop runs other work (gRPC's calls and streams, as they reach Python)."""
    if meter is None:
        return awaitable
    return _Stepped(meter, account, awaitable)


class _Stepped(Generic[T]):
    __slots__ = ("meter", "account", "awaitable")

    def __init__(self, meter: Meter, account: str, awaitable: Awaitable[T]) -> None:
        self.meter, self.account, self.awaitable = meter, account, awaitable

    def __await__(self) -> Generator[Any, Any, T]:
        steps = self.awaitable.__await__()
        meter, account = self.meter, self.account
        value: Any = None  # what the event loop resumes the awaitable with
        error: BaseException | None = None
        while True:
            paused = meter.enter(account)
            try:
                waiting = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                result: T = done.value  # the awaitable's, as it returned it
                return result
            finally:
                meter.leave(paused)
            try:
                value, error = (yield waiting), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as e:  # a cancellation, say: into the awaitable, as await does
                value, error = None, e


def metered(
    meter: Meter | None, account: str, fn: Callable[..., T] | None
) -> Callable[..., T] | None:
    """fn, its calls charged to `account` (fn itself without a meter): for a callable handed
    to gRPC, a (de)serializer."""
    if meter is None or fn is None:
        return fn
    return partial(charged, meter, account, fn)
