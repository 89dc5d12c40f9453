"""The live transport: Calls over grpc.aio, counted in the node's Ledger."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import grpc

from chord.ledger import Ledger
from chord.node import Call, Op, PeerUnreachable
from chord.proto import chord_pb2 as pb
from chord.proto import chord_pb2_grpc as pb_grpc
from chord.routing import NodeRef
from chord.transport import REPLY, Handler

# Statuses that mean "this peer is gone or too slow": the protocol falls back around it.
UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
               grpc.StatusCode.CANCELLED}

# Key hand-over carries a whole region's data in one message: lift gRPC's 4 MiB default.
MAX_MESSAGE = 64 << 20
SIZE_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE),
                ("grpc.max_receive_message_length", MAX_MESSAGE)]
CHANNEL_OPTIONS = SIZE_OPTIONS + [
    # fail fast when a peer dies, instead of backing off for up to two minutes
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

SERVICE = pb.DESCRIPTOR.services_by_name["Chord"]


class GrpcTransport:
    def __init__(self, ledger: Ledger | None = None, timeout: float = 1.0) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.timeout = timeout
        self._stubs: dict[str, tuple[grpc.aio.Channel, pb_grpc.ChordStub]] = {}

    def _stub(self, address: str) -> pb_grpc.ChordStub:
        if address not in self._stubs:
            channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
            self._stubs[address] = (channel, pb_grpc.ChordStub(channel))
        return self._stubs[address][1]

    async def call(self, peer: NodeRef, method: str, request: Any) -> Any:
        self.ledger.record(method, request.ByteSize())
        try:
            reply = await getattr(self._stub(peer.address), method)(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            if e.code() in UNREACHABLE:
                raise PeerUnreachable(peer, e.code().name) from None
            raise
        self.ledger.record(method + REPLY, reply.ByteSize())
        return reply

    async def close(self) -> None:
        for channel, _ in self._stubs.values():
            await channel.close()
        self._stubs.clear()


async def run_async(node: Handler, op: Op, transport: GrpcTransport) -> Any:
    """The asyncio twin of chord.transport.run_sync."""
    reply: Any = None
    error: PeerUnreachable | None = None
    while True:
        try:
            call: Call = op.throw(error) if error else op.send(reply)
        except StopIteration as stop:
            return stop.value
        reply, error = None, None
        try:
            reply = (node.handle(call.method, call.request) if call.peer == node.me
                     else await transport.call(call.peer, call.method, call.request))
        except PeerUnreachable as e:
            error = e


def chord_servicer(dispatch: Callable[[str, Any], Awaitable[Any]]) -> pb_grpc.ChordServicer:
    """A servicer whose every RPC goes through one dispatch function."""

    def method(name: str):
        async def rpc(self, request, context):
            return await dispatch(name, request)
        return rpc

    body = {name: method(name) for name in SERVICE.methods_by_name}
    return type("ChordDispatch", (pb_grpc.ChordServicer,), body)()
