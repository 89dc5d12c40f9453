"""What a node checks of every Chord message before it acts on it: requests, and the
replies it routes by (a lookup's next hop, a successor's neighbours).

A message that fails a check is refused (chord.protocol.calls.Refused) and changes nothing: a peer
with a bug, or a hostile one holding a node certificate, must not make a node adopt an
impossible neighbour, route around itself or take keys by a malformed claim. The checks
are of shape and range only, never of timing: a message a correct node sends while the
ring changes always passes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from chord.proto import chord_pb2 as pb
from chord.protocol.ids import BITS
from chord.protocol.messages import items_from_pb
from chord.protocol.routing import NodeRef


class Receiver(Protocol):
    """What a check reads of the node that received the message (a chord.protocol.node.Receiver)."""

    @property
    def me(self) -> NodeRef: ...

    # what is wrong with keys handed to the node, as the app that stores them judges
    items_problem: Callable[[list[tuple[int, bytes]]], str | None]


MAX_ADDRESS = 255  # characters of host:port
MAX_AVOID = 4 * BITS  # nodes a lookup asks to route around: more is no lookup of ours
MAX_SUCCESSORS = 64  # a successor list's length (the ring's r is far below)


def address_problem(address: str) -> str | None:
    """What is wrong with a node address (None: a name a transport may dial: host:port on
    the live ring, any name in a simulated one)."""
    if not address or len(address) > MAX_ADDRESS:
        return f"a node address of {len(address)} characters"
    if not address.isascii() or not address.isprintable() or " " in address:
        return f"{address[:40]!r} is no node's address"
    return None


def node_problem(info: pb.NodeInfo, me_id: int, me_address: str) -> str | None:
    """A node a message names: a real address, and never my id at another address."""
    why = address_problem(info.address)
    if why is None and info.id == me_id and info.address != me_address:
        why = f"{info.address} claims this node's id"
    return why


def _find_successor(node: Receiver, req: pb.FindSuccessorRequest) -> str | None:
    if len(req.avoid) > MAX_AVOID:
        return f"{len(req.avoid)} nodes to avoid; at most {MAX_AVOID}"
    return None


def _notify(node: Receiver, req: pb.NotifyRequest) -> str | None:
    me = node.me
    return node_problem(req.node, me.id, me.address)


def _leave(node: Receiver, req: pb.LeaveRequest) -> str | None:
    me = node.me
    if req.leaving.id == me.id or req.leaving.address == me.address:
        return "this node is not the one leaving"
    named = [req.leaving, *req.successors]
    if req.HasField("predecessor"):
        named.append(req.predecessor)
    if len(req.successors) > MAX_SUCCESSORS:
        return f"{len(req.successors)} successors; at most {MAX_SUCCESSORS}"
    for info in named:
        why = node_problem(info, me.id, me.address)
        if why is not None:
            return why
    return node.items_problem(items_from_pb(req.items))


CHECKS: dict[str, Callable[[Any, Any], str | None]] = {
    "FindSuccessor": _find_successor,
    "Notify": _notify,
    "Leave": _leave,
}


def invalid(node: Receiver, method: str, request: Any) -> str | None:
    """Why `node` refuses this request (None: it may act on it)."""
    check = CHECKS.get(method)
    return check(node, request) if check is not None else None


def _find_successor_reply(node: Receiver, reply: pb.FindSuccessorReply) -> str | None:
    # a node at my id is no malformed answer: it is why a join is refused (Receiver.join)
    return address_problem(reply.node.address)


def _neighbors_reply(node: Receiver, reply: pb.NeighborsReply) -> str | None:
    if not 1 <= len(reply.successors) <= MAX_SUCCESSORS:  # a node is its own successor alone
        return f"{len(reply.successors)} successors; 1 to {MAX_SUCCESSORS}"
    named = [*reply.successors]
    if reply.HasField("predecessor"):
        named.append(reply.predecessor)
    me = node.me
    return next((w for w in (node_problem(i, me.id, me.address) for i in named) if w), None)


REPLY_CHECKS: dict[str, Callable[[Any, Any], str | None]] = {
    "FindSuccessor": _find_successor_reply,
    "GetNeighbors": _neighbors_reply,
}


def invalid_reply(node: Receiver, method: str, reply: Any) -> str | None:
    """Why `node` refuses a peer's reply to its `method` call (None: it may route by it)."""
    check = REPLY_CHECKS.get(method)
    return check(node, reply) if check is not None else None
