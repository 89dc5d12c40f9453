"""The one place that drives an operation: a generator of Calls (chord.node.Op).

An operation yields a Call and is resumed with its reply, or has PeerUnreachable thrown
into it when the peer does not answer; its return value is the operation's result. It may
yield a Fanout of calls instead, made at once on a live node (one after the other in the
simulator), and is resumed with the list of their replies, a PeerUnreachable in place of
each that did not answer. Every shell runs operations through these two loops, which
differ only in whether making a call is awaited: synchronously in the simulator
(chord.transport), with asyncio on a live node (chord.grpc_transport). An operation that
yields a Pause is resumed once that long has passed: by the shell's `pause` (the
simulator's clock steps on), or an asyncio sleep. Any other exception a call raises ends
the operation: it is closed at once (its `finally` clauses run now, not when it is
collected) and the exception goes on to whoever drove it; but a StatusError (an error
the peer answered with: a call to oneself, or any call in the simulator) is thrown in as
that peer failing the call, PeerFailed, as a live node's answer with an error status is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from inspect import isawaitable
from typing import Any

from chord.meter import Meter, charged
from chord.node import (
    Call,
    Fanout,
    NotWaited,
    Op,
    Pause,
    PeerFailed,
    PeerUnreachable,
    StatusError,
)


def _next(op: Op, reply: Any, error: PeerUnreachable | None) -> tuple[bool, Any]:
    """Resume the operation: (False, its next Call) or (True, its result)."""
    try:
        return False, (op.throw(error) if error is not None else op.send(reply))
    except StopIteration as stop:
        return True, stop.value


def drive(op: Op, call: Callable[[Call], Any], pause: Callable[[float], None] | None = None) -> Any:
    """Run the operation to its end, making each of its calls with `call` and each of its
    pauses with `pause`."""
    done, out = _next(op, None, None)
    while not done:
        reply, error = None, None
        try:
            if isinstance(out, Pause):
                if pause is None:
                    raise RuntimeError(f"{op.__qualname__} pauses where no time passes")
                pause(out.seconds)
            else:
                reply = _each(call, out.calls) if isinstance(out, Fanout) else call(out)
        except PeerUnreachable as e:
            error = e
        except StatusError as e:
            error = _failed(out, e)
        except BaseException:
            op.close()
            raise
        done, out = _next(op, reply, error)
    return out


async def drive_async(op: Op, call: Callable[[Call], Any], meter: Meter | None = None) -> Any:
    """drive, on a live node: a call's reply is awaited when `call` gives an awaitable (a
    message on its way), taken as it is when not (a request to itself answered at once),
    so that a call costs no coroutine of its own. With a meter, each of the operation's
    steps is charged to the generator that runs it (chord.meter)."""
    step = _next if meter is None else partial(charged, meter, "op " + op.__qualname__, _next)
    done, out = step(op, None, None)
    while not done:
        reply, error = None, None
        try:
            if isinstance(out, Pause):
                await asyncio.sleep(out.seconds)
            elif isinstance(out, Fanout):
                reply = await _fanout(call, out)
            else:
                reply = call(out)
                if isawaitable(reply):
                    reply = await reply
        except PeerUnreachable as e:
            error = e
        except StatusError as e:
            error = _failed(out, e)
        except BaseException:  # cancelled, say: the operation's clean-up runs now
            op.close()
            raise
        done, out = step(op, reply, error)
    return out


UNWAITED: set[asyncio.Task] = set()  # calls of a fanout resumed without them, still going


async def _fanout(call: Callable[[Call], Any], out: Fanout) -> list[Any]:
    """A fanout's replies once all came, or once `out.enough` answered."""
    if out.enough <= 0 or out.enough >= len(out.calls):
        return await asyncio.gather(*(_answer(call, c) for c in out.calls))
    tasks = [asyncio.ensure_future(_answer(call, c)) for c in out.calls]
    pending, answered = set(tasks), 0
    while pending and answered < out.enough:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        answered += sum(not isinstance(t.result(), PeerUnreachable) for t in done)
    for i, task in enumerate(tasks):  # they go on: a member answering late took the call
        if task in pending:
            UNWAITED.add(task)
            task.add_done_callback(UNWAITED.discard)
            if out.late is not None:
                task.add_done_callback(partial(_told_late, out.late, i))
    return [t.result() if t.done() else NotWaited(c.peer) for t, c in zip(tasks, out.calls)]


def _told_late(late: Callable[[int, Any], None], i: int, task: asyncio.Task) -> None:
    if not task.cancelled():  # (cancelled: the node is shutting down)
        late(i, task.result())


def _each(call: Callable[[Call], Any], calls: tuple[Call, ...]) -> list[Any]:
    """A fanout's calls one after the other: each one's reply, or its PeerUnreachable."""
    replies: list[Any] = []
    for c in calls:
        try:
            replies.append(call(c))
        except PeerUnreachable as e:
            replies.append(e)
        except StatusError as e:
            replies.append(_failed(c, e))
    return replies


def _failed(c: Call, e: StatusError) -> PeerFailed:
    """The peer of a call answered it with this error: that peer failed the call."""
    return PeerFailed(c.peer, e.code, str(e))


async def _answer(call: Callable[[Call], Any], c: Call) -> Any:
    """One call of a fanout, on a live node: its reply, or its PeerUnreachable."""
    try:
        reply = call(c)
        return (await reply) if isawaitable(reply) else reply
    except PeerUnreachable as e:
        return e
    except StatusError as e:
        return _failed(c, e)
