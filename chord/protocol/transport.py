"""Transports carry the protocol core's Calls; both count every message in one Ledger.

`MemoryTransport` is the simulator's: it delivers to in-process nodes and counts the
serialized size of every request and reply. The gRPC transport (chord.live.grpc_transport)
does the same over the network. Both round-trip messages through their wire form, so a
handler never shares an object with its caller.
"""

from __future__ import annotations

from collections.abc import Callable
from types import GeneratorType
from typing import Any, Protocol

from chord.protocol.calls import Call, Op, PeerUnreachable
from chord.protocol.driver import drive
from chord.protocol.ledger import Ledger, LocalLedger
from chord.protocol.routing import NodeRef

REPLY = ".reply"  # a reply is counted under its request's kind with this suffix


class Handler(Protocol):
    @property
    def me(self) -> NodeRef:
        """The node it answers for (read only: an attribute or a property will do)."""

    def handle(self, method: str, request: Any) -> Any:
        """The reply; or, for a request whose answer needs calls of its own (a write copied
        to replicas before it is acknowledged), an operation whose result is the reply."""


class MemoryTransport:
    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else LocalLedger()
        self.nodes: dict[str, Handler] = {}
        # how an operation's Pause passes (the simulator steps its clock); None: none may
        self.pause: Callable[[float], None] | None = None
        # a network partition: the nodes cut off from the rest (their calls across fail)
        self.cut: frozenset[str] = frozenset()

    def register(self, node: Handler) -> None:
        self.nodes[node.me.address] = node

    def unregister(self, address: str) -> None:
        self.nodes.pop(address, None)

    def _deliver(self, peer: NodeRef, method: str, request: Any, sender: str = "") -> Any:
        data = request.SerializeToString()
        self.ledger.record(method, len(data))
        target = self.nodes.get(peer.address)
        if target is None:
            raise PeerUnreachable(peer, "no such node")
        if self.cut and (sender in self.cut) != (peer.address in self.cut):
            raise PeerUnreachable(peer, "partitioned")
        return answer(target, method, type(request).FromString(data), self)

    def call(self, peer: NodeRef, method: str, request: Any, sender: str = "") -> Any:
        """The reply; `sender`: who calls (a call across a partition fails)."""
        reply = self._deliver(peer, method, request, sender)
        data = reply.SerializeToString()
        self.ledger.record(method + REPLY, len(data))
        return type(reply).FromString(data)

    def send(self, peer: NodeRef, method: str, request: Any) -> None:
        """One-way: the reply, if the handler makes one, never crosses the wire."""
        self._deliver(peer, method, request)


def answer(node: Handler, method: str, request: Any, transport: MemoryTransport) -> Any:
    """A node's reply to a request: its handler's, or the result of the operation it
    returned, run here to the end (the caller waits, as a live caller would)."""
    reply = node.handle(method, request)
    return run_sync(node, reply, transport) if isinstance(reply, GeneratorType) else reply


def run_sync(node: Handler, op: Op, transport: MemoryTransport) -> Any:
    """Drive an operation to completion; calls to oneself are handled without the wire."""
    me = node.me

    def call(c: Call) -> Any:
        if c.peer == me:
            return answer(node, c.method, c.request, transport)
        return transport.call(c.peer, c.method, c.request, me.address)

    return drive(op, call, transport.pause)
