"""What an operation says to the shell that drives it, and what it is told back: the
vocabulary every operation of the ring, and of what rides on it, is written in.

An operation is a generator (`Op`): it yields a `Call`, a `Fanout` of calls or a `Pause`,
and is resumed with the reply (or the list of replies), or has `PeerUnreachable` (or one
of its kinds) thrown into it. A driver (chord.protocol.driver, chord.live.driving) runs
it; the node's own operations are in chord.protocol.node.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from chord.protocol.routing import NodeRef

ANOTHER_RING = "ANOTHER_RING"  # why a peer is unreachable: it is a node of another ring


class PeerUnreachable(Exception):
    """A peer did not answer in time, or refused the connection, or is of another ring."""

    def __init__(self, peer: NodeRef, why: str = "") -> None:
        super().__init__(f"{peer.address} unreachable{': ' + why if why else ''}")
        self.peer = peer
        # a node of another ring answers there (another ring id, or other settings: the
        # live shell's Gate tells): to this ring it is as gone as one that refuses
        self.another_ring = why == ANOTHER_RING
        # refused (nothing of this ring listens there: it is gone), not just slow to answer
        self.refused = why in ("UNAVAILABLE", "no such node") or self.another_ring


class NotWaited(PeerUnreachable):
    """A call of a Fanout resumed without it (Fanout.enough): still on its way, not failed.
    Its peer may yet take it, after calls made since (Fanout.late tells what it said)."""

    def __init__(self, peer: NodeRef) -> None:
        super().__init__(peer, "not waited for")


class PeerFailed(PeerUnreachable):
    """A peer answered a call with an error (it is there, but the call failed there: its
    disk is full, say, or a bug): to the caller, that peer failing this once. Every loop
    over peers handles it as it handles a peer that does not answer, retrying and then
    counting, never abandoning the other peers' calls for it."""

    def __init__(self, peer: NodeRef, code: str, details: str = "") -> None:
        super().__init__(peer, f"{code}: {details}" if details else code)
        self.code, self.details = code, details


class StatusError(Exception):
    """An error a node answers a call with: a live node sends it as the gRPC status `code`
    names. To the caller it is that peer failing the call (PeerFailed), whether the call
    crossed the wire or not (a node calling itself, the simulator)."""

    code = "UNKNOWN"


class Refused(StatusError):
    """A message its receiver refuses as malformed or out of range (chord.protocol.checks,
    cqengine.core.frame.checks): it changed nothing. The live shell answers INVALID_ARGUMENT."""

    code = "INVALID_ARGUMENT"


class Call(NamedTuple):
    """What an operation asks of the shell that drives it (a tuple: made per message)."""

    peer: NodeRef
    method: str
    request: Any


class Fanout(NamedTuple):
    """Calls an operation makes at once (a copy to each replica, say): it is resumed with
    their replies in order, a PeerUnreachable in place of each that did not answer.
    `enough` > 0: resumed once that many have answered (a majority of a log's members,
    say), a PeerUnreachable in place of each still on its way, which goes on unwaited:
    one member silent until its call times out must not hold up the rest. `late(i, reply)`:
    told the reply of each call i not waited for as it comes (or its PeerUnreachable),
    so that what a late answer says is not lost (a log's leader learns how far a slow
    member holds its appends, and that it refused one)."""

    calls: tuple[Call, ...]
    enough: int = 0
    late: Callable[[int, Any], None] | None = None


class Pause(NamedTuple):
    """An operation waits this many seconds before it goes on (resumed with None): on a
    live node a sleep of its own, in the simulator a step of the virtual clock."""

    seconds: float


Op = Generator[Call | Fanout | Pause, Any, Any]
