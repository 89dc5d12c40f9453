"""Waiting for a condition instead of sleeping a fixed time.

A fixed sleep before an assert is too short on a loaded machine (the test fails for no
reason of its own) and too long on an idle one. `eventually` polls the condition with
short sleeps and goes on as soon as it holds; if it never does, it fails loudly, naming
what it waited for and the last value seen, rather than leaving a later assert to fail
without saying why.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


def _timed_out(what: str, timeout: float, seen: Any) -> AssertionError:
    return AssertionError(f"not within {timeout:g} s: {what} (last seen: {seen!r})")


def eventually(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    *,
    holds: Callable[[Any], bool] = bool,
    interval: float = 0.05,
) -> Any:
    """Call `predicate` every `interval` s until its value holds (is true, or satisfies
    `holds`) and return that value; after `timeout` s, AssertionError naming `what` and
    the last value. An exception `predicate` raises (an assert of its own) ends the wait."""
    deadline = time.monotonic() + timeout
    while True:
        seen = predicate()
        if holds(seen):
            return seen
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, seen)
        time.sleep(interval)


async def eventually_async(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    *,
    holds: Callable[[Any], bool] = bool,
    interval: float = 0.05,
) -> Any:
    """`eventually` on an event loop: it sleeps without blocking the loop (the condition
    is usually something the loop's other tasks bring about), and `predicate` may be a
    coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        seen = predicate()
        if inspect.isawaitable(seen):
            seen = await seen
        if holds(seen):
            return seen
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, seen)
        await asyncio.sleep(interval)
