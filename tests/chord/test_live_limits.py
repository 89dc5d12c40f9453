"""A node's own limits (chord.live.server.Limits): channels to peers in an LRU, background
operations capped, and a rate per client on the client API (RESOURCE_EXHAUSTED beyond
it, the ring's own calls never limited); and what a refused call leaves behind."""

from __future__ import annotations

import asyncio
import gc
import types

import grpc
import pytest
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st
from support.waiting import eventually_async

from chord.live.gate import ClientRate
from chord.live.grpc_transport import SIZE_OPTIONS, GrpcTransport
from chord.live.server import Limits, LiveNode, Timing
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import Call
from chord.protocol.node import NodeRef
from cqengine.live.ports import free_ports

FAST = Timing(stabilize=0.05, fix_fingers=0.1, check_predecessor=0.1)


@given(
    st.floats(0.5, 100),
    st.integers(1, 20),
    st.lists(st.floats(0, 0.5), min_size=1, max_size=200),
)
def test_a_client_gets_no_more_than_its_burst_and_rate(rate, burst, gaps):
    """Over any stretch of calls, one client is admitted at most burst + rate * elapsed
    calls; a client calling no faster than its rate is always admitted."""
    limit, now, times = ClientRate(rate, burst), 0.0, []
    for gap in gaps:
        now += gap
        if limit.admit("alice", now):
            times.append(now)
    for i in range(len(times)):
        for j in range(i, len(times)):
            assert j - i + 1 <= burst + rate * (times[j] - times[i]) + 1e-9
    slow, now = ClientRate(rate, burst), 0.0
    for _ in range(50):
        now += 1.0 / rate
        assert slow.admit("bob", now)


def test_clients_forgotten_past_the_bound_start_with_a_full_bucket():
    limit = ClientRate(1.0, 1, clients=3)
    assert all(limit.admit(f"c{i}", 0.0) for i in range(5))
    assert len(limit.buckets) == 3  # the two heard from longest ago are forgotten
    assert limit.admit("c0", 0.0) and not limit.admit("c4", 0.0)


def test_channels_beyond_the_bound_close_least_recently_used_first():
    async def main():
        nodes = [LiveNode("127.0.0.1", p, timing=FAST) for p in free_ports(3)]
        transport = GrpcTransport(timeout=2.0, max_channels=2)
        try:
            for n in nodes:
                await n.start()
            for n in [*nodes, nodes[0], nodes[2], nodes[1]]:
                reply = await transport.call(n.me, "GetState", pb.Empty())
                assert reply.node.address == n.me.address  # an evicted peer is dialled again
                assert len(transport._channels) <= 2
            assert list(transport._channels) == [nodes[2].me.address, nodes[1].me.address]
            assert set(transport.round_trips) == set(transport._channels)
        finally:
            await transport.close()
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_background_operations_beyond_the_bound_wait_their_turn():
    (port,) = free_ports(1)
    node = LiveNode("127.0.0.1", port, limits=Limits(background=2))
    running, most, done = [0], [0], []

    async def call(peer, method, request):
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0.02)
        running[0] -= 1
        return pb.Empty()

    node.transport.call = call

    def op(i):
        yield Call(NodeRef(1, "127.0.0.1:1"), "Ping", pb.Empty())
        done.append(i)

    async def main():
        for i in range(6):
            node.spawn(op(i))
        await eventually_async(
            lambda: len(done), 10, "six operations done", holds=lambda n: n >= 6, interval=0.01
        )

    asyncio.run(asyncio.wait_for(main(), 10))
    assert sorted(done) == list(range(6)) and most[0] == 2


def test_a_client_over_its_rate_is_told_to_slow_down_and_the_ring_is_not():
    """A client API call past the client's burst is refused RESOURCE_EXHAUSTED; the
    node's ring methods, called as often, are not limited."""
    from support.live import engine_node, start_with_client_api

    from cqengine.proto import cqengine_pb2 as cpb
    from cqengine.proto import cqengine_pb2_grpc as cpb_grpc

    node = engine_node(timing=FAST, limits=Limits(client_rate=0.5, client_burst=3))

    async def main():
        await start_with_client_api(node)
        try:
            async with grpc.aio.insecure_channel(node.me.address) as channel:
                stub = cpb_grpc.CQEngineStub(channel)
                codes = []
                for _ in range(5):
                    try:
                        await stub.Stats(cpb.StatsRequest(), timeout=5)
                        codes.append("OK")
                    except grpc.aio.AioRpcError as e:
                        codes.append(e.code().name)
                        assert "slow down" in e.details()
                assert codes == ["OK"] * 3 + ["RESOURCE_EXHAUSTED"] * 2
                chord = channel.unary_unary(
                    "/chord.Chord/GetNeighbors",
                    request_serializer=pb.Empty.SerializeToString,
                    response_deserializer=pb.NeighborsReply.FromString,
                )
                for _ in range(10):
                    await chord(pb.Empty(), timeout=5)
        finally:
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_refused_call_leaves_nothing_of_its_request_behind():
    """gRPC keeps the exception of a refused call after its answer. No frame its traceback
    holds (the Gate's, the handler's, the analysis that refused a document) may keep the
    request alive, nor may the publishing loop keep the last batch: a node sent large
    requests must not hold on to them."""
    from support.live import engine_node, start_with_client_api

    from cqengine.proto import cqengine_pb2 as cpb
    from cqengine.proto import cqengine_pb2_grpc as cpb_grpc

    node = engine_node(timing=FAST)
    big = 1 << 20

    def size(v) -> int:  # of a value, a message, or a list of them (and their pairs)
        if isinstance(v, (bytes, str)):
            return len(v)
        if isinstance(v, Message):
            return v.ByteSize()
        if isinstance(v, (list, tuple)):
            return sum(size(x) for x in v)
        return 0

    def holding() -> list[str]:
        gc.collect()
        frames = [f for f in gc.get_objects() if isinstance(f, types.FrameType)]
        return [
            f"{f.f_code.co_name} holds {name}"
            for f in frames
            if f.f_code.co_filename != __file__
            for name, v in f.f_locals.items()
            if size(v) >= big
        ]

    async def let_go(what: str) -> None:
        """The node holds no large request once it has finished with the call: its reply
        may reach the client a moment before the server's last frames end (a loaded
        machine shows it), so wait for that, not for ever: what is kept stays."""
        await eventually_async(holding, 5, f"no frame holding {what}", holds=lambda h: h == [])

    async def main():
        await start_with_client_api(node)
        try:
            async with grpc.aio.insecure_channel(node.me.address, options=SIZE_OPTIONS) as ch:
                stub = cpb_grpc.CQEngineStub(ch)
                refused = [  # by the analysis, by the client API, by the Gate's parsing
                    stub.Publish(cpb.PublishRequest(docno="BIG", text=b"x " * big)),
                    stub.Subscribe(cpb.SubscribeRequest(query="levee " * big)),
                    ch.unary_unary("/cqengine.CQEngine/Publish")(b"\xff" * 2 * big),
                ]
                for call in refused:
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await call
                    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                    await let_go("a refused request")
                # nor does an accepted batch stay behind once published
                docs = [cpb.PublishRequest(docno=f"D{i}", text=b"word " * 30_000) for i in range(8)]
                reply = await stub.PublishBatch(cpb.PublishBatchRequest(documents=docs))
                assert all(r.accepted for r in reply.results)
                await let_go("a published batch")
        finally:
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 30))
