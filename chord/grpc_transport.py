"""The live transport: Calls over grpc.aio, counted in the node's Ledger.

Any number of protobuf services share it: a method is found by its name (names are
unique across the services registered), so the protocol core never sees stubs.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass

from chord.ledger import Ledger
from chord.node import Call, Op, PeerUnreachable
from chord.proto import chord_pb2
from chord.routing import NodeRef
from chord.transport import REPLY, Handler

# Statuses that mean "this peer is gone or too slow": the protocol falls back around it.
UNREACHABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
}

# Key hand-over carries a whole region's data in one message: lift gRPC's 4 MiB default.
MAX_MESSAGE = 64 << 20
SIZE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.max_receive_message_length", MAX_MESSAGE),
]
CHANNEL_OPTIONS = SIZE_OPTIONS + [
    # fail fast when a peer dies, instead of backing off for up to two minutes
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

CHORD_SERVICE = chord_pb2.DESCRIPTOR.services_by_name["Chord"]


class MethodTable:
    """Method name -> (wire path, request class, reply class), over several services."""

    def __init__(self, services: Iterable[ServiceDescriptor]) -> None:
        self.services = list(services)
        self.methods: dict[str, tuple[str, type, type]] = {}
        for service in self.services:
            for m in service.methods:
                if m.client_streaming or m.server_streaming:
                    continue
                if m.name in self.methods:
                    raise ValueError(f"method name {m.name} is defined by two services")
                self.methods[m.name] = (
                    f"/{service.full_name}/{m.name}",
                    GetMessageClass(m.input_type),
                    GetMessageClass(m.output_type),
                )

    def generic_handlers(self, dispatch: Callable[[str, Any], Awaitable[Any]]) -> list:
        """Server side: every unary method of every service goes through one dispatch."""

        def rpc(name: str):
            async def handler(request, context):
                return await dispatch(name, request)

            return handler

        out = []
        for service in self.services:
            handlers = {}
            for m in service.methods:
                if m.name in self.methods:
                    _, req, rep = self.methods[m.name]
                    handlers[m.name] = grpc.unary_unary_rpc_method_handler(
                        rpc(m.name),
                        request_deserializer=req.FromString,
                        response_serializer=rep.SerializeToString,
                    )
            out.append(grpc.method_handlers_generic_handler(service.full_name, handlers))
        return out


class GrpcTransport:
    def __init__(
        self,
        ledger: Ledger | None = None,
        timeout: float = 1.0,
        table: MethodTable | None = None,
        timeouts: dict[str, float] | None = None,
    ) -> None:
        """`timeout`: seconds a call waits for its reply before its peer counts as
        unreachable; `timeouts`: other waits for some methods."""
        self.ledger = ledger if ledger is not None else Ledger()
        self.timeout = timeout
        self.timeouts = timeouts or {}
        self.table = table or MethodTable([CHORD_SERVICE])
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._calls: dict[tuple[str, str], Any] = {}

    def _callable(self, address: str, method: str):
        key = (address, method)
        if key not in self._calls:
            if address not in self._channels:
                self._channels[address] = grpc.aio.insecure_channel(
                    address, options=CHANNEL_OPTIONS
                )
            path, req, rep = self.table.methods[method]
            self._calls[key] = self._channels[address].unary_unary(
                path, request_serializer=req.SerializeToString, response_deserializer=rep.FromString
            )
        return self._calls[key]

    async def call(self, peer: NodeRef, method: str, request: Any) -> Any:
        self.ledger.record(method, request.ByteSize())
        try:
            reply = await self._callable(peer.address, method)(
                request, timeout=self.timeouts.get(method, self.timeout)
            )
        except grpc.aio.AioRpcError as e:
            if e.code() in UNREACHABLE:
                raise PeerUnreachable(peer, e.code().name) from None
            raise
        self.ledger.record(method + REPLY, reply.ByteSize())
        return reply

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._calls.clear()


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
            reply = (
                node.handle(call.method, call.request)
                if call.peer == node.me
                else await transport.call(call.peer, call.method, call.request)
            )
        except PeerUnreachable as e:
            error = e
