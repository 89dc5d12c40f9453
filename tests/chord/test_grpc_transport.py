"""The live transport tells a busy peer from a dead one: slow replies stretch its waits."""

import asyncio

import grpc
import pytest
from support.live import engine_node

from chord.live.grpc_transport import CHORD_SERVICE, GrpcTransport, MethodTable, RoundTrip
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import PeerFailed, PeerUnreachable, Refused, StatusError
from chord.protocol.routing import NodeRef
from chord.protocol.transport import REPLY
from cqengine.proto import cqengine_pb2


def test_round_trip_estimate_follows_rfc_6298():
    trip = RoundTrip.first(0.2, now=1.0)
    assert (trip.srtt, trip.rttvar, trip.timeout()) == (0.2, 0.1, pytest.approx(0.6))
    trip.add(1.0, now=2.0)
    assert trip.rttvar == pytest.approx(0.75 * 0.1 + 0.25 * 0.8)
    assert trip.srtt == pytest.approx(0.875 * 0.2 + 0.125 * 1.0)
    assert trip.heard == 2.0 and trip.timeout() == pytest.approx(trip.srtt + 4 * trip.rttvar)


TABLE = MethodTable([CHORD_SERVICE])


class SlowPeer:
    """A loopback Chord server whose Ping answers after `delay` seconds, and every other
    method at once; or, with `error` set, Ping answers with that error."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.error: Exception | None = None

    async def dispatch(self, method: str, request):
        if method == "Ping":
            if self.error is not None:
                raise self.error
            await asyncio.sleep(self.delay)
        return TABLE.methods[method][2]()

    async def start(self, port: int = 0) -> NodeRef:
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers(TABLE.generic_handlers(self.dispatch))
        port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        await self.server.start()
        return NodeRef(1, f"127.0.0.1:{port}")


def test_a_busy_peer_is_waited_for_a_silent_or_dead_one_is_not():
    async def run() -> None:
        peer = SlowPeer()
        ref = await peer.start()
        known = GrpcTransport(timeout=0.3, patience=4.0)
        stranger = GrpcTransport(timeout=0.3, patience=4.0)
        try:
            await known.call(ref, "Ping", pb.Empty())  # answered at once: heard lately
            peer.delay = 0.8  # busy now: longer than the ring's timeout
            await known.call(ref, "Ping", pb.Empty())  # asked again, waiting longer
            assert known.ledger.snapshot()["Ping"].messages >= 3
            assert known.round_trips[ref.address].srtt > 0.05  # the slow reply counted
            with pytest.raises(PeerUnreachable):  # never heard: its timeout is the ring's
                await stranger.call(ref, "Ping", pb.Empty())
            assert known.timeout_of(ref.address, "Ping") > 0.3  # stretched by slow replies
            peer.delay = 30.0  # hung: silent past the patience
            with pytest.raises(PeerUnreachable):
                await known.call(ref, "Ping", pb.Empty())
            await peer.server.stop(None)  # gone: refused at once, not waited for
            before = known.ledger.snapshot()["Ping"].messages
            with pytest.raises(PeerUnreachable) as refused:
                await known.call(ref, "Ping", pb.Empty())
            assert refused.value.refused
            # asked at most once more, on a new connection (the old one backs off)
            assert known.ledger.snapshot()["Ping"].messages <= before + 2
        finally:
            await peer.server.stop(None)
            await known.close()
            await stranger.close()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_a_call_gives_up_after_its_patience_even_while_its_peer_answers_others():
    async def run() -> None:
        peer = SlowPeer()
        ref = await peer.start()
        transport = GrpcTransport(timeout=0.3, patience=2.0)

        async def chatter() -> None:  # keeps the peer heard from
            while True:
                await transport.call(ref, "GetNeighbors", pb.Empty())
                await asyncio.sleep(0.1)

        try:
            await transport.call(ref, "Ping", pb.Empty())
            peer.delay = 60.0  # one method hangs; the others answer
            talking = asyncio.create_task(chatter())
            with pytest.raises(PeerUnreachable):
                await asyncio.wait_for(transport.call(ref, "Ping", pb.Empty()), 20)
            talking.cancel()
            await asyncio.gather(talking, return_exceptions=True)
        finally:
            await peer.server.stop(None)
            await transport.close()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_a_peer_restarted_at_its_address_is_reached_at_once():
    """A channel to a peer that went away backs off before it connects again; a process
    restarted there meanwhile would look refused (and a live node taken for gone loses its
    keys to its successor). The call is made again on a new connection."""

    async def run() -> None:
        first = SlowPeer()
        ref = await first.start()
        transport = GrpcTransport(timeout=0.5, patience=0.5)
        again = SlowPeer()
        try:
            await transport.call(ref, "Ping", pb.Empty())
            await first.server.stop(None)
            for _ in range(3):  # refused: its channel backs off
                with pytest.raises(PeerUnreachable):
                    await transport.call(ref, "Ping", pb.Empty())
            port = int(ref.address.rsplit(":", 1)[1])
            assert await again.start(port) == ref
            await transport.call(ref, "Ping", pb.Empty())  # at once, not after the backoff
        finally:
            await first.server.stop(None)
            if hasattr(again, "server"):
                await again.server.stop(None)
            await transport.close()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_a_peer_answering_with_an_error_fails_that_call_only():
    """A peer that answers with an error status (a refusal, a failure of its own) failed
    the call: PeerFailed, a PeerUnreachable every loop over peers handles, with the code and
    the peer's words, not an exception that ends the caller's whole operation. The peer is
    not taken for gone (not `refused`) and answers its next call."""

    async def run() -> None:
        peer = SlowPeer()
        ref = await peer.start()
        transport = GrpcTransport(timeout=2.0, patience=4.0)
        try:
            peer.error = Refused("Ping: malformed")  # answered INVALID_ARGUMENT
            with pytest.raises(PeerFailed) as failed:
                await transport.call(ref, "Ping", pb.Empty())
            assert failed.value.code == "INVALID_ARGUMENT" and not failed.value.refused
            assert "Ping: malformed" in failed.value.details
            full = StatusError("data directory full")
            full.code = "RESOURCE_EXHAUSTED"  # an error of the peer's own, with its status
            peer.error = full
            with pytest.raises(PeerFailed) as failed:
                await transport.call(ref, "Ping", pb.Empty())
            assert (failed.value.code, failed.value.details) == (
                "RESOURCE_EXHAUSTED",
                "data directory full",
            )
            peer.error = RuntimeError("a bug")  # answered UNKNOWN by gRPC
            with pytest.raises(PeerFailed) as failed:
                await transport.call(ref, "Ping", pb.Empty())
            assert failed.value.code == "UNKNOWN"
            peer.error = None
            await transport.call(ref, "Ping", pb.Empty())
        finally:
            await peer.server.stop(None)
            await transport.close()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_the_ledger_counts_each_message_by_the_bytes_that_cross_the_wire():
    """Sized off the bytes serialized and parsed (not by ByteSize, a serialization of its
    own): the same figures, on a unary call and on a link."""

    async def main():
        node = engine_node()
        await node.start()
        unary = GrpcTransport(table=node.methods)
        linked = GrpcTransport(table=node.methods, linked=frozenset({"GetConfig"}))
        try:
            asked = pb.FindSuccessorRequest(key=12345, avoid=[1, 2, 3])
            found = await unary.call(node.me, "FindSuccessor", asked)
            config = await linked.call(node.me, "GetConfig", cqengine_pb2.ConfigRequest())
            for transport, kind, request, reply in (
                (unary, "FindSuccessor", asked, found),
                (linked, "GetConfig", cqengine_pb2.ConfigRequest(), config),
            ):
                counts = transport.ledger.snapshot()
                assert (counts[kind].messages, counts[kind].bytes) == (1, request.ByteSize())
                answer = counts[kind + REPLY]
                assert (answer.messages, answer.bytes) == (1, reply.ByteSize())
                assert reply.ByteSize() > 0
        finally:
            for t in (unary, linked):
                await t.close()
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))
