"""The live shell's loop that drives an operation (chord.protocol.driver's `drive` on
asyncio): a call's reply is awaited when it is on its way, a fanout's calls go at once, and
each step of the operation may be charged to a meter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from inspect import isawaitable
from typing import Any

from chord.live.meter import Meter, charged
from chord.protocol.calls import Call, Fanout, NotWaited, Op, Pause, PeerUnreachable, StatusError
from chord.protocol.driver import failed, name, resume


async def drive_async(op: Op, call: Callable[[Call], Any], meter: Meter | None = None) -> Any:
    """drive, on a live node: a call's reply is awaited when `call` gives an awaitable (a
    message on its way), taken as it is when not (a request to itself answered at once),
    so that a call costs no coroutine of its own. With a meter, each of the operation's
    steps is charged to the generator that runs it (chord.live.meter)."""
    step = resume if meter is None else partial(charged, meter, "op " + name(op), resume)
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
            error = failed(out, e)
        except BaseException:  # cancelled, say: the operation's clean-up runs now
            op.close()
            raise
        done, out = step(op, reply, error)
    return out


UNWAITED: set[asyncio.Task[Any]] = set()  # calls of a fanout resumed without them, still going


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


def _told_late(late: Callable[[int, Any], None], i: int, task: asyncio.Task[Any]) -> None:
    if not task.cancelled():  # (cancelled: the node is shutting down)
        late(i, task.result())


async def _answer(call: Callable[[Call], Any], c: Call) -> Any:
    """One call of a fanout, on a live node: its reply, or its PeerUnreachable."""
    try:
        reply = call(c)
        return (await reply) if isawaitable(reply) else reply
    except PeerUnreachable as e:
        return e
    except StatusError as e:
        return failed(c, e)
