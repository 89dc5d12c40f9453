"""The one place that drives an operation: a generator of Calls (chord.protocol.calls.Op).

An operation yields a Call and is resumed with its reply, or has PeerUnreachable thrown into
it when the peer does not answer; its return value is the operation's result. It may yield a
Fanout of calls instead, made at once on a live node (one after the other in the simulator),
and is resumed with the list of their replies, a PeerUnreachable in place of each that did
not answer. Every shell runs operations through these two loops, which differ only in
whether making a call is awaited: `drive` here, synchronously (the simulator's,
chord.protocol.transport), and the live shell's asyncio loop (chord.live.driving), which
resumes and fails an operation with this module's `resume` and `failed`. An operation that
yields a Pause is resumed once that long has passed: by the shell's `pause` (the simulator's
clock steps on), or an asyncio sleep. Any other exception a call raises ends the operation:
it is closed at once (its `finally` clauses run now, not when it is collected) and the
exception goes on to whoever drove it; but a StatusError (an error the peer answered with: a
call to oneself, or any call in the simulator) is thrown in as that peer failing the call,
PeerFailed, as a live node's answer with an error status is.
"""

from __future__ import annotations

from collections.abc import Callable
from types import GeneratorType
from typing import Any

from chord.protocol.calls import Call, Fanout, Op, Pause, PeerFailed, PeerUnreachable, StatusError


def resume(op: Op, reply: Any, error: PeerUnreachable | None) -> tuple[bool, Any]:
    """Resume the operation: (False, its next Call) or (True, its result)."""
    try:
        return False, (op.throw(error) if error is not None else op.send(reply))
    except StopIteration as stop:
        return True, stop.value


def drive(op: Op, call: Callable[[Call], Any], pause: Callable[[float], None] | None = None) -> Any:
    """Run the operation to its end, making each of its calls with `call` and each of its
    pauses with `pause`."""
    done, out = resume(op, None, None)
    while not done:
        reply, error = None, None
        try:
            if isinstance(out, Pause):
                if pause is None:
                    raise RuntimeError(f"{name(op)} pauses where no time passes")
                pause(out.seconds)
            else:
                reply = _each(call, out.calls) if isinstance(out, Fanout) else call(out)
        except PeerUnreachable as e:
            error = e
        except StatusError as e:
            error = failed(out, e)
        except BaseException:
            op.close()
            raise
        done, out = resume(op, reply, error)
    return out


def name(op: Op) -> str:
    """The operation's name: its generator function's (typing's Generator declares none),
    or, for an operation that is no generator object, its class's."""
    return op.__qualname__ if isinstance(op, GeneratorType) else type(op).__qualname__


def _each(call: Callable[[Call], Any], calls: tuple[Call, ...]) -> list[Any]:
    """A fanout's calls one after the other: each one's reply, or its PeerUnreachable."""
    replies: list[Any] = []
    for c in calls:
        try:
            replies.append(call(c))
        except PeerUnreachable as e:
            replies.append(e)
        except StatusError as e:
            replies.append(failed(c, e))
    return replies


def failed(c: Call, e: StatusError) -> PeerFailed:
    """The peer of a call answered it with this error: that peer failed the call."""
    return PeerFailed(c.peer, e.code, str(e))
