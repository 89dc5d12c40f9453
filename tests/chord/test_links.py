"""Links (chord.live.links): calls over one long-lived Exchange stream behave as unary calls do.
Replies find their calls whatever order they come in; a refusal and a failure end a call
with the status a unary call would get; a stream that breaks fails the calls waiting on it
as unreachable, and the next call opens a new one; a node that stops ends its streams."""

import asyncio

import grpc
import pytest
from support.waiting import eventually_async

from chord.live.grpc_transport import CHORD_SERVICE, GrpcTransport, MethodTable
from chord.live.links import Exchanges
from chord.live.server import SERVER_OPTIONS
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import PeerFailed, PeerUnreachable, Refused
from chord.protocol.node import NodeRef
from cqengine.live.ports import free_ports

LINKED = frozenset({"FindSuccessor", "Ping"})


class Peer:
    """A server answering Exchange alone: FindSuccessor echoes its key as the owner's id,
    after `delay[key]` seconds; a key of 13 is refused; Ping fails unexpectedly."""

    def __init__(self, port: int) -> None:
        self.port, self.asked, self.answered, self.member = port, [], [], True
        self.delay: dict[int, float] = {}
        self.server = None

    async def dispatch(self, method, request):
        if method == "Ping":
            raise RuntimeError("unexpected")
        if request.key == 13:
            raise Refused("13 is out of range")
        self.asked.append(request.key)
        await asyncio.sleep(self.delay.get(request.key, 0))
        self.answered.append(request.key)
        return pb.FindSuccessorReply(done=True, node=pb.NodeInfo(id=request.key, address="x:1"))

    async def start(self) -> None:
        table = MethodTable([CHORD_SERVICE])
        self.exchanges = Exchanges(self.dispatch, table.methods, lambda: self.member)
        self.server = grpc.aio.server(options=SERVER_OPTIONS)
        links = {"Exchange": self.exchanges.handler()}
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(CHORD_SERVICE.full_name, links)]
        )
        self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        await self.server.start()

    async def stop(self) -> None:
        self.exchanges.close()
        await self.server.stop(grace=0.5)


def with_peer(test) -> None:
    """Run `test(peer, transport, ref)` against a Peer at a free port, through a transport
    that sends FindSuccessor and Ping over links; both shut down however it ends."""

    async def main():
        (port,) = free_ports(1)
        peer, t = Peer(port), GrpcTransport(timeout=5.0, linked=LINKED)
        await peer.start()
        try:
            await test(peer, t, NodeRef(1, f"127.0.0.1:{port}"))
        finally:
            await t.close()
            await peer.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def find(key: int) -> pb.FindSuccessorRequest:
    return pb.FindSuccessorRequest(key=key)


def test_replies_find_their_calls_in_any_order_over_one_stream():
    async def test(peer, t, me):
        peer.delay = {k: (10 - k) * 0.02 for k in range(10)}  # the first answered last
        replies = await asyncio.gather(*(t.call(me, "FindSuccessor", find(k)) for k in range(10)))
        assert [r.node.id for r in replies] == list(range(10))
        assert peer.answered == sorted(range(10), reverse=True)
        assert len(t._links) == 1  # one stream carried them all
        assert t.ledger.snapshot()["FindSuccessor"].messages == 10  # counted as calls

    with_peer(test)


def test_a_refused_or_failing_call_ends_as_a_unary_call_would_and_the_stream_serves_on():
    async def test(peer, t, me):
        with pytest.raises(PeerFailed) as refused:  # (the peer failed that call: not gone)
            await t.call(me, "FindSuccessor", find(13))
        assert refused.value.code == "INVALID_ARGUMENT" and not refused.value.refused
        assert "out of range" in refused.value.details
        with pytest.raises(PeerFailed) as failed:
            await t.call(me, "Ping", pb.Empty())
        assert failed.value.code == "INTERNAL"
        peer.member = False  # stopping: every request refused as by a node gone
        with pytest.raises(PeerUnreachable) as gone:
            await t.call(me, "FindSuccessor", find(2))
        assert gone.value.refused
        peer.member = True
        assert (await t.call(me, "FindSuccessor", find(3))).node.id == 3

    with_peer(test)


def test_a_stream_that_breaks_fails_its_waiting_calls_and_the_next_call_opens_another():
    async def test(peer, t, me):
        assert (await t.call(me, "FindSuccessor", find(1))).node.id == 1
        first = t._links[me.address]
        peer.delay = {5: 30.0}  # never answered before the stream goes
        waiting = asyncio.ensure_future(t.call(me, "FindSuccessor", find(5)))
        await eventually_async(lambda: 5 in peer.asked, 5, "the peer to have the request")
        await peer.stop()  # the node stops: its streams end
        with pytest.raises(PeerUnreachable):
            await waiting
        assert first.broken is not None and not first.waiting
        await peer.start()  # back, at the same address
        assert (await t.call(me, "FindSuccessor", find(6))).node.id == 6
        assert t._links[me.address] is not first

    with_peer(test)
