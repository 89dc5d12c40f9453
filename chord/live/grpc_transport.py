"""The live transport: Calls over grpc.aio, counted in the node's Ledger.

Any number of protobuf services share it: a method is found by its name (names are
unique across the services registered), so the protocol core never sees stubs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import GeneratorType
from typing import Any, Protocol

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from chord.live.driving import drive_async
from chord.live.gate import OF_ANOTHER_RING, RING_HEADER
from chord.live.links import Broken, Dispatch, Link, Method
from chord.live.meter import Meter, charged, metered, stepped
from chord.live.tls import Credentials, aio_channel
from chord.proto import chord_pb2
from chord.protocol.calls import ANOTHER_RING, Call, Op, PeerFailed, PeerUnreachable, StatusError
from chord.protocol.ledger import Ledger
from chord.protocol.routing import NodeRef
from chord.protocol.transport import REPLY, Handler
from chord.protocol.versions import HEADER, MINE, OF_ANOTHER_VERSION

log = logging.getLogger("chord.live.grpc_transport")
CALLS = "grpc calls"  # the account of a call's steps at its caller (chord.live.meter.stepped)

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
    # its own connection: a channel made anew does not share an old one's backoff
    ("grpc.use_local_subchannel_pool", 1),
]


CLOSE_AFTER = 60.0  # s a replaced channel lives on for the calls still on it
CHORD_SERVICE = chord_pb2.DESCRIPTOR.services_by_name["Chord"]


class MethodTable:
    """Method name -> (wire path, request class, reply class), over several services."""

    def __init__(self, services: Iterable[ServiceDescriptor]) -> None:
        self.services = list(services)
        self.methods: dict[str, Method] = {}
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

    def generic_handlers(self, dispatch: Dispatch) -> list[grpc.GenericRpcHandler]:
        """Server side: every unary method of every service goes through one dispatch."""

        def rpc(name: str) -> Callable[[Message, grpc.aio.ServicerContext], Awaitable[Any]]:
            async def handler(request: Message, context: grpc.aio.ServicerContext) -> Any:
                try:
                    return await dispatch(name, request)
                except StatusError as e:  # malformed (Refused: it changed nothing), say
                    await abort_with(context, e)

            return handler

        out = []
        for service in self.services:
            handlers: dict[str, grpc.RpcMethodHandler] = {}
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


async def abort_with(context: grpc.aio.ServicerContext, error: StatusError) -> None:
    """End a call with the status an error names (UNKNOWN if gRPC knows no such code)."""
    await context.abort(getattr(grpc.StatusCode, error.code, grpc.StatusCode.UNKNOWN), str(error))


@dataclass
class RoundTrip:
    """How long a peer takes to answer, as TCP estimates it (RFC 6298): a smoothed mean and
    mean deviation of the round trips seen, the timeout their sum with four deviations;
    and when it last answered."""

    srtt: float
    rttvar: float
    heard: float

    @classmethod
    def first(cls, sample: float, now: float) -> RoundTrip:
        return cls(sample, sample / 2, now)

    def add(self, sample: float, now: float) -> None:
        self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - sample)
        self.srtt = 0.875 * self.srtt + 0.125 * sample
        self.heard = now

    def timeout(self) -> float:
        return self.srtt + 4 * self.rttvar


class UnaryCall(Protocol):
    """A unary call of one method to one peer, as a channel (or a link) makes it."""

    def __call__(
        self, request: Message, *, timeout: float, metadata: Sequence[tuple[str, str]]
    ) -> Awaitable[Any]: ...


class GrpcTransport:
    def __init__(
        self,
        ledger: Ledger | None = None,
        timeout: float = 1.0,
        table: MethodTable | None = None,
        timeouts: dict[str, float] | None = None,
        patience: float | None = None,
        credentials: Credentials | None = None,
        max_channels: int = 1024,
        meter: Meter | None = None,
        linked: frozenset[str] = frozenset(),
        identity: str = "",
    ) -> None:
        """`timeout`: seconds a call waits for its reply before its peer counts as
        unreachable; `timeouts`: other waits for some methods.

        Slow is not dead: a node whose event loop is queued up answers late, and a peer
        suspected for its load is routed around, so that the documents of its keys miss
        their queries. So a call waits as long as the peer's recent round trips say it
        needs, and one that times out is sent again, waiting twice as long (Karn's
        backoff), while the peer answered anything within the last `patience` seconds. A
        process that died refuses the connection and fails at once. At most `max_channels`
        channels stay open: the least recently used closes first. `meter`: charged the
        CPU time of preparing calls and of (de)serializing their messages (chord.live.meter).
        `linked`: the methods whose calls go over one long-lived stream to each peer
        (chord.live.links), not a unary call each. `identity`: the ring's, named on every call
        (chord.live.gate.RING_HEADER): a peer of another ring refuses it, and counts as gone."""
        self.ledger = ledger if ledger is not None else Ledger()
        self.timeout = timeout
        self.timeouts = timeouts or {}
        self.patience = max(timeout, patience if patience is not None else timeout)
        self.round_trips: dict[str, RoundTrip] = {}
        self.table = table or MethodTable([CHORD_SERVICE])
        self._channels: OrderedDict[str, grpc.aio.Channel] = OrderedDict()
        self.max_channels = max_channels
        self.credentials = credentials  # mutual TLS with these (None: plaintext)
        self._retired: set[grpc.aio.Channel] = set()  # replaced, closing once idle
        self._calls: dict[str, dict[str, UnaryCall]] = {}  # by address, by method
        self.meter = meter
        self.linked = linked
        self._links: dict[str, Link] = {}  # by address
        # named on every call, and as each link opens (chord.protocol.versions)
        self.metadata = ((HEADER, MINE.header()),) + (
            ((RING_HEADER, identity),) if identity else ()
        )

    def _callable(self, address: str, method: str) -> UnaryCall:
        calls = self._calls.get(address)
        if calls is None:
            while len(self._channels) >= self.max_channels:
                lru = next(iter(self._channels))  # the least recently used
                self._drop(lru)
                self.round_trips.pop(lru, None)  # what is known of peers stays bounded too
            self._channels[address] = aio_channel(address, self.credentials, CHANNEL_OPTIONS)
            calls = self._calls[address] = {}
        else:
            self._channels.move_to_end(address)
        if method in self.linked:
            return self._linked(address, method)
        call = calls.get(method)
        if call is None:
            path, req, rep = self.table.methods[method]
            sent = sent_counted(self.ledger, method, req.SerializeToString)
            answered = parsed_counted(self.ledger, method + REPLY, rep.FromString)
            call = calls[method] = self._channels[address].unary_unary(
                path,
                request_serializer=metered(self.meter, "serialize", sent),
                response_deserializer=metered(self.meter, "parse", answered),
            )
        return call

    def _linked(self, address: str, method: str) -> UnaryCall:
        """A call of this method over my link to the address (a new one if it broke)."""
        link = self._links.get(address)
        if link is None or link.broken is not None:
            link = Link(self._channels[address], self.meter, self.metadata, self.ledger)
            self._links[address] = link
        reply_class = self.table.methods[method][2]
        # the link named the ring as it opened (chord.live.links): a call over it names nothing
        return lambda request, timeout, metadata: link.call(method, request, reply_class, timeout)

    def _stale(self, address: str) -> bool:
        """Is my channel to this address backing off after a failed connection (its peer
        went away)? A process restarted there would look refused until the backoff ends,
        and a live node taken for gone is dropped from tables and its keys taken. Then a
        new channel replaces it (the old one closes once calls still on it are done)."""
        old = self._channels.get(address)
        if old is None or old.get_state() != grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            return False
        self._drop(address)
        return True

    def _drop(self, address: str) -> None:
        """Forget my channel to this address; it closes once the calls still on it are
        done (a new one is opened when next needed)."""
        old = self._channels.pop(address)
        del self._calls[address]
        self._links.pop(address, None)  # its stream ends as its channel closes
        self._retired.add(old)
        asyncio.get_running_loop().call_later(CLOSE_AFTER, self._retire, old)

    def _retire(self, channel: grpc.aio.Channel) -> None:
        if channel in self._retired:
            self._retired.discard(channel)
            asyncio.ensure_future(channel.close())

    def timeout_of(self, address: str, method: str) -> float:
        """How long a call first waits for its reply: its method's, or the ring's own
        stretched to what the peer's recent round trips say it needs."""
        if method in self.timeouts:
            return self.timeouts[method]
        trip = self.round_trips.get(address)
        return (
            self.timeout if trip is None else min(max(self.timeout, trip.timeout()), self.patience)
        )

    def longer(self, address: str, method: str, waited: float, begun: float) -> float | None:
        """How long to wait when sending again a call, begun at `begun`, that timed out
        after `waited` seconds; None if its peer has been silent too long, the call has
        waited `patience` in all, or the method's wait is its own."""
        trip = self.round_trips.get(address)
        if method in self.timeouts or trip is None:
            return None
        now = time.monotonic()
        left = min(self.patience - (now - trip.heard), self.patience - (now - begun))
        return min(2 * waited, left) if left > 0 else None

    async def call(self, peer: NodeRef, method: str, request: Any) -> Any:
        wait = self.timeout_of(peer.address, method)
        begun = time.monotonic()
        fresh = False
        while True:  # (the ledger counts each message as it is serialized and parsed)
            start = time.monotonic()
            try:
                call = self._callable(peer.address, method)
                reply = await stepped(
                    self.meter, CALLS, call(request, timeout=wait, metadata=self.metadata)
                )
                break
            except grpc.aio.AioRpcError as e:
                code = e.code()
                if code == grpc.StatusCode.FAILED_PRECONDITION and _not_of_my_ring(e):
                    log.warning("%s to %s refused: %s", method, peer.address, e.details())
                    raise PeerUnreachable(peer, ANOTHER_RING) from None
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    longer = self.longer(peer.address, method, wait, begun)
                    if longer is not None:
                        wait = longer
                        continue  # busy, not dead: ask again, waiting longer
                if code == grpc.StatusCode.UNAVAILABLE and not fresh and self._stale(peer.address):
                    fresh = True  # asked again on a new connection: not refused yet
                    continue
                if isinstance(e, Broken) and not fresh:
                    fresh = True  # its stream broke under it: once more, on a new one
                    continue
                if code in UNREACHABLE:
                    log.warning("%s to %s failed: %s", method, peer.address, code.name)
                    raise PeerUnreachable(peer, code.name) from None
                # it answered with an error: that peer failed this call, nothing more
                log.warning("%s to %s failed: %s %s", method, peer.address, code.name, e.details())
                raise PeerFailed(peer, code.name, e.details() or "") from None
        now = time.monotonic()
        trip = self.round_trips.get(peer.address)
        if trip is None:
            self.round_trips[peer.address] = RoundTrip.first(now - start, now)
        else:
            trip.add(now - start, now)
        return reply

    async def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
        for channel in [*self._channels.values(), *self._retired]:
            await channel.close()
        self._channels.clear()
        self._retired.clear()
        self._calls.clear()


def _not_of_my_ring(e: grpc.aio.AioRpcError) -> bool:
    """Did the peer refuse the call as one of another ring's, or as speaking a protocol
    it does not talk to (chord.live.gate)? Either way no node of my ring answers there."""
    return (e.details() or "").startswith((OF_ANOTHER_RING, OF_ANOTHER_VERSION))


def sent_counted(
    ledger: Ledger, kind: str, serialize: Callable[[Message], bytes]
) -> Callable[[Message], bytes]:
    """`serialize`, each message it serializes counted in the ledger: its size read off
    the bytes that go on the wire, not computed again (ByteSize costs a serialization)."""

    def counted(message: Message) -> bytes:
        data = serialize(message)
        ledger.record(kind, len(data))
        return data

    return counted


def parsed_counted(
    ledger: Ledger, kind: str, parse: Callable[[bytes], Message]
) -> Callable[[bytes], Message]:
    """`parse`, each message it parses counted in the ledger by the bytes that came."""

    def counted(data: bytes) -> Message:
        ledger.record(kind, len(data))
        return parse(data)

    return counted


async def run_async(node: Handler, op: Op, transport: GrpcTransport) -> Any:
    """Drive an operation over the network (chord.protocol.driver); calls to oneself are handled
    here, an answer that needs calls of its own driven in turn."""

    me = node.me

    meter = transport.meter

    def call(c: Call) -> Any:
        if c.peer != me:
            return transport.call(c.peer, c.method, c.request)  # a coroutine: the driver awaits
        reply = charged(meter, c.method, node.handle, c.method, c.request)
        return run_async(node, reply, transport) if isinstance(reply, GeneratorType) else reply

    return await drive_async(op, call, meter)
